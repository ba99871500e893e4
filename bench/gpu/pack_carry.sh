#!/usr/bin/env bash
# Packs what run_cuda_bench.sh runs on the GPU machine from a CUDA build on this machine: the test and benchmark
# binaries (stripped, xz-compressed: the carry limit is 64 MiB), the libraries the GPU machine lacks and the tokenizer
# files the serving runs need.   [TARGETS="name ..."] bench/gpu/pack_carry.sh BUILD_DIR [CARRY_DIR]
# The carry limit (64 MiB) counts the repository's own files too (~34 MB), so a call carries about eight binaries
# (3-5 MB each, xz) and not all of them: TARGETS names the ones this call runs (default: every one below). ICU
# (8 MB) comes only with `pagoda` (the server and `pagoda logits` need it; the test binaries do not), the tokenizer
# files as said below.
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
    strip -s -o "$CARRY/$name" "$BUILD/$f" && xz -f "$CARRY/$name"
done
cp /lib/x86_64-linux-gnu/{libgomp.so.1,libxxhash.so.0} "$CARRY/"
if [[ -f $CARRY/pagoda.xz ]]; then
    for l in icuuc icudata; do xz -c /usr/lib/x86_64-linux-gnu/lib$l.so.72.1 > "$CARRY/lib$l.so.72.xz"; done
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
