#!/usr/bin/env bash
# One device call for the one-token GEMV experiments (kernels/cuda/gemm/gemv.h, issue 18): the CUDA tests with the
# defaults, the op harness's quantized cases under each experiment's switches, then the op bench's T=1 cases under
# each, alternated twice (ab_check.sh OPS_ENVS). Run on the GPU machine from the repository root:
#   NEW=build-all OUT=$OUT/g bench/gpu/gemv_experiments.sh
# (session 28, five variants on an H100: 556 s, 360 of them the op bench; pass a narrower OPS to fit a call.)
# NEW: a pack_carry.sh folder with backend_ops_test, pagoda_op_bench and the other CUDA tests (TESTS: ab_check's form,
# NAME or NAME:GTEST_FILTER; the default takes backend_ops_test's LoRA, quantized, gated-MLP and MoE cases and
# CudaDeviceTest).
set -uo pipefail
NEW=${NEW:?carry folder} OUT=${OUT:-/tmp/gemv-experiments}
mma="PAGODA_INT4_GEMV_MMA=1 PAGODA_FP8_GEMV_MMA=1"  # one token on the tensor-core GEMV at every shape
old="PAGODA_INT4_GEMV_MMA=2 PAGODA_FP8_GEMV_MMA=2 PAGODA_GEMV_MMA_SPLIT=1"  # the defaults before session 28
# Tests with the defaults, and the op bench of every variant (ab_check also unpacks the carry).
ops_tests="backend_ops_test:*lora*:*int4*:*int8*:*fp8*:*silu*:*moe*:*CudaDevice*"
variants="-;$old;$mma;$mma PAGODA_GEMV_MMA_WARPS=16"
NEW=$NEW OUT=$OUT ENV="PAGODA_TEST_DEVICE=cuda PAGODA_SOURCE_DIR=$PWD" \
    TESTS=${TESTS:-"$ops_tests cuda_lora_test lora_engine_test cuda_golden_test"} OPS=${OPS:-"T=1 "} OPS_ARGS=--cold \
    OPS_ENVS=$variants bench/gpu/ab_check.sh > /dev/null
# The experiments' correctness: the quantized and gated-MLP op cases against the CPU under each switch (the defaults
# ran above).
NEW=$(cd "$NEW" && pwd)
for variant in "$old" "$mma" "$mma PAGODA_GEMV_MMA_SPLIT=1" "$mma PAGODA_GEMV_MMA_SPLIT=2" "$mma PAGODA_GEMV_MMA_SPLIT=4" \
    "$mma PAGODA_GEMV_MMA_WARPS=16"; do
    result=$(env LD_LIBRARY_PATH="$NEW:${LD_LIBRARY_PATH:-}" PAGODA_TEST_DEVICE=cuda $variant timeout 200 \
        "$NEW/backend_ops_test" --gtest_filter='*fp8*:*int4*:*int8*:*silu*' 2>&1 |
        grep -E '^\[  (PASSED|FAILED)  \]' | tr '\n' ' ')
    echo "backend_ops_test ($variant): $result" >> "$OUT/summary.txt"
done
cat "$OUT/summary.txt"
