#!/usr/bin/env bash
# Makes, from this checkout, every folder the GPU plans carry (bench/gpu/plans/*.plan name them in their headers), so
# that a session on a fresh machine is one command away from its first device call:
#   build-all          pagoda_cuda_bench, pagoda_op_bench, backend_ops_test, cuda_golden_test, the kernel library
#   build-serve        pagoda with ICU and the tokenizer files (runs beside build-all: its libraries are there)
#   build-tests        executor_test, delta_net_kernels_test, lora_engine_test (beside build-all, likewise)
#   build-ptx80-carry  the A100's code as compute_80 PTX alone (the `arch` stage), its libraries in it: it goes alone
#   build-llama-carry  llama.cpp's source (the peer, built there by the `peer-build` stage)
#   build-old          only with OLD_REV (a commit): that commit's kernel library, the A/B's other side for a change
#                      to the kernels alone (gemv_experiments.sh's variant `old`, ab_check.sh's OLD)
#     [PACKS="build-all ..."] [OLD_REV=commit] bench/gpu/make_packs.sh
# The CUDA builds are build-h200 (-DCMAKE_CUDA_ARCHITECTURES=90a-real: plain 90a adds PTX the GPU never uses,
# pack_carry.sh) and build-ptx80 (80-virtual), both with the kernels in one shared library; ccache keeps a rebuild short
# (from nothing on this 2-core machine: ~8 min for build-h200's targets). Last it prints each folder's size in disk
# blocks beside the tree's, against the 64 MiB a device call carries.
set -euo pipefail
cd "$(dirname "$0")/../.."
PACKS=${PACKS:-build-all build-serve build-tests build-ptx80-carry build-llama-carry${OLD_REV:+ build-old}}
wants() { [[ " $PACKS " == *" $1 "* ]]; }
# The libraries every binary needs come with build-all (and build-ptx80-carry); a pack carried beside build-all
# drops its copies (the carry limit counts every byte).
drop_shared_libs() { rm -f "$1"/libgomp.so.1 "$1"/libxxhash.so.0 "$1"/libpagoda_kernels_cuda.so.xz; }

cuda_build() {  # DIR ARCHITECTURES TARGETS...
    local dir=$1 arch=$2
    shift 2
    [[ -f $dir/build.ninja ]] ||
        cmake -S . -B "$dir" -G Ninja -DCMAKE_CUDA_ARCHITECTURES="$arch" -DPAGODA_CUDA_KERNELS_SHARED=ON >/dev/null
    ninja -C "$dir" -j "$(nproc)" "$@"
}

# The targets of each pack built in build-h200.
declare -A h200_packs=([build-all]="pagoda_cuda_bench pagoda_op_bench backend_ops_test cuda_golden_test"
    [build-serve]=pagoda [build-tests]="executor_test delta_net_kernels_test lora_engine_test")
h200_targets=()
for p in "${!h200_packs[@]}"; do wants "$p" && read -r -a more <<< "${h200_packs[$p]}" && h200_targets+=("${more[@]}"); done
if ((${#h200_targets[@]})); then
    cuda_build build-h200 90a-real "${h200_targets[@]}"
    for p in build-all build-serve build-tests; do
        wants "$p" || continue
        TARGETS="${h200_packs[$p]}" bench/gpu/pack_carry.sh build-h200 "$p"
        [[ $p == build-all ]] || drop_shared_libs "$p"
    done
fi
if wants build-ptx80-carry; then
    ptx=(backend_ops_test cuda_golden_test cuda_sampler_test delta_net_kernels_test executor_test pagoda_cuda_bench)
    cuda_build build-ptx80 80-virtual "${ptx[@]}"
    TARGETS="${ptx[*]}" bench/gpu/pack_carry.sh build-ptx80 build-ptx80-carry
fi
if wants build-old; then
    # The commit's tree in a worktree beside this checkout, its build folder of the same name, so that ccache (paths
    # below their common parent rewritten as relative ones) finds every kernel file the commit shares with it.
    old_tree=$(dirname "$PWD")/pagoda-old-tree
    git worktree remove --force "$old_tree" 2> /dev/null || rm -rf "$old_tree"
    git worktree add -q --detach "$old_tree" "${OLD_REV:?build-old needs OLD_REV}"
    (cd "$old_tree" && export CCACHE_BASEDIR=${old_tree%/*} && cuda_build build-h200 90a-real pagoda_kernels_cuda)
    rm -rf build-old && mkdir build-old
    strip -s -o build-old/libpagoda_kernels_cuda.so "$old_tree"/build-h200/src/kernels/cuda/libpagoda_kernels_cuda.so
    xz -9e -f build-old/libpagoda_kernels_cuda.so
    git rev-parse "$OLD_REV" > build-old/REVISION
    git worktree remove --force "$old_tree"
fi
if wants build-llama-carry; then
    # ../shared/GPU.md: the llama-cpp-python 0.3.36 sdist's vendor/llama.cpp (a tree of 2026-10). What its CUDA build
    # does not read stays out: models, docs, media, benches, tests (LLAMA_BUILD_TESTS=OFF) and the other backends'
    # sources (ggml_add_backend adds a backend's folder only when it is switched on): 6.6 MB where the whole tree
    # is 8.5, which with build-all beside the repository would pass the 64 MiB.
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    python3 -m pip download -q --no-deps --no-binary=:all: llama-cpp-python==0.3.36 -d "$work"
    tar xzf "$work"/llama_cpp_python-0.3.36.tar.gz -C "$work"
    excludes=()
    for d in models docs media benches tests; do excludes+=(--exclude="llama.cpp/$d"); done
    for b in sycl vulkan opencl hexagon metal et cann musa webgpu zdnn openvino virtgpu zendnn; do
        excludes+=(--exclude="llama.cpp/ggml/src/ggml-$b")
    done
    mkdir -p build-llama-carry
    tar cJf build-llama-carry/llama.cpp.tar.xz -C "$work"/llama_cpp_python-0.3.36/vendor "${excludes[@]}" llama.cpp
fi

# What a call carries is the tree (tracked files and untracked ones git does not ignore) and the named folders,
# counted in disk blocks.
tree_kib=$(git ls-files -z --cached --others --exclude-standard | du -c -k --files0-from=- 2>/dev/null | tail -1 |
    cut -f1)
echo "make_packs: the tree ${tree_kib} KiB; a call carries 65536 KiB in all, so $((65536 - tree_kib)) KiB of folders"
for p in $PACKS; do
    [[ -d $p ]] && echo "make_packs: $p $(du -sk "$p" | cut -f1) KiB"
done
