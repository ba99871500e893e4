#!/usr/bin/env bash
# Packs what run_cuda_bench.sh runs on the GPU machine from a CUDA build on this machine: the test and benchmark
# binaries (stripped, xz-compressed: the carry limit is 64 MiB), the libraries the GPU machine lacks and the tokenizer
# files the serving runs need.   [TARGETS="name ..."] bench/gpu/pack_carry.sh BUILD_DIR [CARRY_DIR]
# Configure the build with -DCMAKE_CUDA_ARCHITECTURES=90a-real: plain 90a adds compute_90a PTX of every kernel, which
# the H100/H200 never JIT-compiles and which took the kernel library from 2.7 to 5.0 MB packed (session 37).
# The carry limit (64 MiB) counts the repository's own files too (~49 MB). Built with the kernels in one shared
# library (-DPAGODA_CUDA_KERNELS_SHARED=ON) every binary below fits (~0.3-1 MB each, xz, beside the library's ~3 MB);
# built with static kernels a call carries about five (3-5 MB each): TARGETS names the ones this call runs (default:
# every one below). ICU (0.7 MB: libicuuc, and a libicudata of only the data pagoda reads, make_small_icudata.sh)
# comes only with `pagoda` (the server and `pagoda logits` need it; the test binaries do not), the tokenizer files as
# said below.
set -euo pipefail
BUILD=${1:?build folder}
CARRY=${2:-build-cuda-carry}
ALL="tests/unit/ops/backend_ops_test tests/unit/cuda/delta_net_kernels_test tests/unit/cuda/cuda_golden_test
     tests/unit/cuda/cuda_sampler_test tests/unit/cuda/cuda_tensor_parallel_test tests/unit/cuda/cuda_lora_test
     tests/unit/cuda/int4_dequant_test
     tests/unit/executor/executor_test tests/unit/executor/lora_engine_test bench/gpu/pagoda_cuda_bench
     bench/gpu/pagoda_op_bench
     bench/gpu/pagoda_delta_net_bench src/cli/pagoda"
rm -rf "$CARRY" && mkdir -p "$CARRY/tok"
for f in $ALL; do
    name=$(basename "$f")
    [[ -z ${TARGETS:-} || " $TARGETS " == *" $name "* ]] || continue
    strip -s -o "$CARRY/$name" "$BUILD/$f" && xz -9e -f "$CARRY/$name"
done
# A build configured with -DPAGODA_CUDA_KERNELS_SHARED=ON keeps the kernels (most of every binary) in one library:
# then every binary fits one call's carry.
kernels=$BUILD/src/kernels/cuda/libpagoda_kernels_cuda.so
[[ -f $kernels ]] && strip -s -o "$CARRY/libpagoda_kernels_cuda.so" "$kernels" &&
    xz -9e -f "$CARRY/libpagoda_kernels_cuda.so"
cp /lib/x86_64-linux-gnu/{libgomp.so.1,libxxhash.so.0} "$CARRY/"
# The kernel trace (run_cuda_bench.sh's timeline part) with the CUPTI it was built against (the GPU machine's CUPTI
# may be another release, whose kernel records differ).
trace=$BUILD/bench/gpu/libpagoda_kernel_trace.so
if [[ -f $trace && ( -z ${TARGETS:-} || " $TARGETS " == *" pagoda_kernel_trace "* ) ]]; then
    cp "$trace" "$CARRY/"
    cupti=$(ldd "$trace" | awk '/libcupti/ {print $3}')
    xz -c "$cupti" > "$CARRY/$(basename "$cupti").xz"
fi
if [[ -f $CARRY/pagoda.xz ]]; then
    xz -c /usr/lib/x86_64-linux-gnu/libicuuc.so.72.1 > "$CARRY/libicuuc.so.72.xz"
    "$(dirname "$0")/make_small_icudata.sh" "$CARRY" && xz -f "$CARRY/libicudata.so.72"
fi
# The tokenizer files (~1.3 MB compressed) for the serving runs and the peer's GGUF conversion: with every target,
# with `pagoda`, or with TOK=1.
if [[ -z ${TARGETS:-} || " $TARGETS " == *" pagoda "* || ${TOK:-0} == 1 ]]; then
    cp ../shared/qwen-tokenizers/qwen3-4b/tokenizer_config.json "$CARRY/tok/"
    for f in vocab.json merges.txt; do xz -9 -c "../shared/qwen-tokenizers/qwen3-4b/$f" > "$CARRY/tok/$f.xz"; done
else
    rmdir "$CARRY/tok"
fi
du -sh "$CARRY"
