#!/usr/bin/env bash
# One device call for the tensor-core GEMV experiments (kernels/cuda/gemm/gemv_mma.cu, issue 18): the op harness's
# quantized cases against the CPU under each experiment's switches, the op bench's quantized one- and eight-token
# cases under each (ab_check.sh OPS_ENVS, alternated twice), batch-1 decode of the AWQ and fp8 Qwen3-8B shapes under
# each, and ncu's stall breakdown of the kernel. Run on the GPU machine from the repository root:
#   NEW=build-all OUT=$OUT/g bench/gpu/gemv_experiments.sh
# NEW: a pack_carry.sh folder with backend_ops_test, pagoda_op_bench and pagoda_cuda_bench. VARIANTS: the switches,
# ';' between settings ('-' for the defaults; 'old' for NEW's binaries over the kernel library in OLD, a folder with
# libpagoda_kernels_cuda.so.xz of the code before a change to the kernels alone: its A/B in one call). MODEL: a
# random Qwen3-8B checkpoint (hf_qwen3_8b.py --save-only; made here, ~55 s, when absent), its AWQ copy made beside it (make_awq_checkpoint.py). PARTS (tests,ops,e2e,ncu) picks;
# OPS_FILTERS (';' between them) the op bench's cases, E2E_MODELS (awq fp8) the e2e runs (E2E_ROUNDS: 2 rounds
# alternating the variants), NCU_FILTERS the op-bench
# cases ncu profiles (one launch each) under NCU_VARIANTS (VARIANTS).
# Session 29 ran the f16-products A/B this way by hand (`docs/benchmarks.md`): ~430 s for tests, model, e2e and the
# one-token op bench of two settings; keep the variants few (session 30: tests and the three op A/Bs of two settings
# took 409 s). x staged in shared memory ran so (session 30) and is the default for one token on 12,288 rows or more;
# PAGODA_GEMV_MMA_X_SHARED=0|1 (the default VARIANTS: "-;PAGODA_GEMV_MMA_X_SHARED=1") compare it elsewhere. Waiting:
#   PAGODA_GEMV_MMA_E4M3=alu     the f16 products' e4m3 weights by integer instructions instead of the GPU's
#                                conversion; fp8 at 8 tokens takes f16 products only with PAGODA_GEMV_MMA_F16=1, so
#                                VARIANTS="PAGODA_GEMV_MMA_F16=1;PAGODA_GEMV_MMA_F16=1 PAGODA_GEMV_MMA_E4M3=alu" PARTS=tests,ops
#   PAGODA_GEMV_MMA_STAGES=auto  the shared-memory ring of weight chunks (session 43; bench/gpu/plans/gemv-ring.plan)
#   PAGODA_GEMV_MMA_ONE_X=1      the register double buffer's kernels of one x source each (session 45;
#                                bench/gpu/plans/checks-after-45.plan)
# (The lean loop ran so in session 41 as PAGODA_GEMV_MMA_LEAN=1, PARTS=tests,ops,e2e: the only loop since.)
set -uo pipefail
NEW=${NEW:?carry folder} OUT=${OUT:-/tmp/gemv-experiments}
PARTS=${PARTS:-tests,ops,e2e,ncu}
VARIANTS=${VARIANTS:-"-;PAGODA_GEMV_MMA_X_SHARED=1"}
MODEL=${MODEL:-/tmp/qwen3-8b-random}
S=$OUT/summary.txt
mkdir -p "$OUT/logs"
want() { [[ ",$PARTS," == *",$1,"* ]]; }
OLD=${OLD:-}
for packed in "$NEW"/*.xz ${OLD:+"$OLD"/*.xz}; do
    [[ -e $packed ]] || continue
    xz -dc "$packed" > "${packed%.xz}" && chmod +x "${packed%.xz}"
done
NEW=$(cd "$NEW" && pwd)
[[ -n $OLD ]] && OLD=$(cd "$OLD" && pwd)
export OLD  # ab_check.sh (the ops part) takes 'old' among its OPS_ENVS from it
IFS=';' read -r -a variants <<< "$VARIANTS"
setting() { [[ $1 == - || $1 == old ]] && echo "" || echo "$1"; }
# run_as VARIANT COMMAND...: COMMAND under the variant's switches, with NEW's libraries (OLD's kernels first for 'old').
run_as() {
    local v=$1 lib=$NEW
    shift
    [[ $v == old ]] && lib=${OLD:?the variant old needs OLD}:$NEW
    # shellcheck disable=SC2046  # the setting is VAR=VALUE words, or none
    env LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}" $(setting "$v") "$@"
}
if want tests; then
    # Every quantized case against the CPU, with one token on the tensor-core GEMV at every shape as well.
    for v in "${variants[@]}"; do
        for one in "" "PAGODA_INT4_GEMV_MMA=1 PAGODA_FP8_GEMV_MMA=1"; do
            run_as "$v" PAGODA_TEST_DEVICE=cuda $one timeout 150 "$NEW/backend_ops_test" \
                --gtest_filter='*fp8*:*int4*:*int8*:*silu*' > "$OUT/logs/ops.log" 2>&1
            echo "backend_ops_test ($v $one) rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$OUT/logs/ops.log" |
                tr '\n' ' ')" >> "$S"
        done
    done
fi
if want ops; then
    IFS=';' read -r -a ops_filters <<< "${OPS_FILTERS:-T=1 N=;linear_silu_mul T=1 ;T=8 N=}"
    for f in "${ops_filters[@]}"; do
        NEW=$NEW OUT=$OUT/ab TESTS=" " OPS="$f" OPS_ARGS=--cold OPS_ENVS="$VARIANTS" BUDGET=0 \
            bench/gpu/ab_check.sh > /dev/null 2>&1
        grep -E '^\s+(\[|linear)' "$OUT/ab/summary.txt" >> "$S"
        rm -rf "$OUT/ab"
    done
fi
if want e2e; then
    [[ -f $MODEL/config.json ]] || python3 bench/gpu/hf_qwen3_8b.py "$MODEL" --save-only > "$OUT/logs/model.log" 2>&1
    [[ " ${E2E_MODELS:-awq} " != *" awq "* || -f $MODEL-awq/config.json ]] || python3 bench/gpu/make_awq_checkpoint.py "$MODEL" "$MODEL-awq" \
        > "$OUT/logs/awq.log" 2>&1
    for round in $(seq 1 "${E2E_ROUNDS:-2}"); do
        for v in "${variants[@]}"; do
            for m in ${E2E_MODELS:-awq fp8}; do
                args=(--model "$MODEL-awq")
                [[ $m == fp8 ]] && args=(--model "$MODEL" --quantization fp8)
                run_as "$v" timeout 120 "$NEW/pagoda_cuda_bench" "${args[@]}" --prefill 64 --context 512 \
                    --decode 128 > "$OUT/logs/e2e.log" 2>&1
                echo "$m ($v) round $round: $(tail -1 "$OUT/logs/e2e.log" | grep -oE '"decode_(tok_s|roofline_frac)": [0-9.]+' |
                    tr '\n' ' ')" >> "$S"
            done
        done
    done
fi
if want ncu && command -v ncu > /dev/null; then
    # One launch of each case in NCU_FILTERS (';' between op-bench filters), caches flushed (ncu's default): where the
    # kernel's cycles go, the bf16 GEMV's (gemv_kernel, near the copy bandwidth) beside the quantized ones. The stall
    # reasons are warps stalled per issued instruction, by reason (smsp__average_warps_issue_stalled_*).
    NCU_FILTERS=${NCU_FILTERS:-"linear gate_up T=1 ;linear fp8 gate_up T=1 ;linear fp8 down T=1 ;linear fp8 o T=1 ;int4 T=1 N=24576;int4 T=1 N=4096 K=12288"}
    IFS=';' read -r -a filters <<< "$NCU_FILTERS"
    keep='Duration|DRAM Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|Issued Ipc|Issue Slots Busy|Achieved Occupancy'
    keep+='|Registers Per|Warp Cycles Per Issued|Waves Per SM|Executed Instructions  |stalled_[a-z_]+_per_issue_active'
    IFS=';' read -r -a ncu_variants <<< "${NCU_VARIANTS:-$VARIANTS}"
    for v in "${ncu_variants[@]}"; do
        for f in "${filters[@]}"; do
            log=$OUT/logs/ncu_$(echo "$v $f" | tr -c 'A-Za-z0-9=' '_').log
            run_as "$v" timeout 100 ncu -k regex:gemv -c 1 --section SpeedOfLight --section Occupancy \
                --section LaunchStats --section WarpStateStats --section InstructionStats \
                --section MemoryWorkloadAnalysis --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
                "$NEW/pagoda_op_bench" --table qwen3-8b --filter "$f" > "$log" 2>&1
            echo "ncu ($v) '$f' rc=$?:" >> "$S"
            # The stall reasons under 0.05 warps an instruction are left out of the summary (the log has them).
            grep -E "$keep" "$log" | awk '!/stalled/ || $NF + 0 >= 0.05' | tr -s ' ' | head -40 >> "$S"
        done
    done
fi
(cd "$OUT" && tar czf logs.tgz logs && rm -rf logs)
cat "$S"
