#!/usr/bin/env bash
# One device call that checks a change and measures it against the code before it, in the same call: the change's
# tests, then op-bench and model-bench runs of the old and the new binaries alternated. Run on the GPU machine from
# the repository root:
#   NEW=build-new OLD=build-old SHAPES="qwen3.5-9b qwen3.5-35b-a3b:8" bench/gpu/ab_check.sh
# NEW and OLD are carry folders made here by `TARGETS="..." bench/gpu/pack_carry.sh BUILD FOLDER` from a build of the
# change and one of the commit before it (e.g. `git stash` the change's kernels, rebuild the bench targets in the same
# build folder, pack, `git stash pop`, rebuild, pack). Both are carried (`carry` takes both folder names).
#   TESTS     test binaries of NEW to run first, each NAME or NAME:GTEST_FILTER (default: every *_test in NEW)
#   ENV       environment for the tests (e.g. PAGODA_TEST_DEVICE=cuda, which executor_test needs to use the GPU)
#   OPS       a pagoda_op_bench --filter for the Qwen3-8B table (none: no op bench), run old/new twice
#   OPS_ARGS  more pagoda_op_bench arguments (e.g. --cold: tensors past the L2, read from memory)
#   OPS_ENV_A, OPS_ENV_B  instead of OLD: NEW's op bench under two environments, alternated twice (a switch's A/B in
#             one binary, e.g. OPS_ENV_A=PAGODA_INT4_GEMV_MMA=0 OPS_ENV_B=PAGODA_INT4_GEMV_MMA=1)
#   SHAPES    random checkpoints to make (hf_qwen3_8b.py --shape; ":N" keeps N layers), each benched old, new, old, new
#   BENCH     extra pagoda_cuda_bench arguments (e.g. "--quantization fp8")
#   KEEP_MODEL=1 leaves the last of SHAPES in /tmp/ab-model (for runs of its own after this script)
#   BUDGET    seconds after which no further model is started (default 330: a call is at most 600 s, and the
#             machine's start-up counts against the session too)
# Writes $OUT/summary.txt (also printed) and $OUT/logs.tgz (one file: a call brings back only a few).
set -uo pipefail
NEW=${NEW:?carry folder of the change} OLD=${OLD:-} OUT=${OUT:-/tmp/ab-check}
BUDGET=${BUDGET:-330}
L=$OUT/logs S=$OUT/summary.txt
mkdir -p "$L"
: > "$S"
T0=$SECONDS
for dir in "$NEW" $OLD; do
    for packed in "$dir"/*.xz; do
        [[ -e $packed ]] || continue
        xz -dc "$packed" > "${packed%.xz}" && chmod +x "${packed%.xz}"
    done
done
NEW=$(cd "$NEW" && pwd)
[[ -n $OLD ]] && OLD=$(cd "$OLD" && pwd)
# Each binary runs with its own folder first on the library path: built with the kernels in one shared library
# (pack_carry.sh), a binary finds libpagoda_kernels_cuda.so there (its RUNPATH, a path of this machine, yields to
# LD_LIBRARY_PATH), and with NEW first for both, OLD's binaries ran NEW's kernels (session 23's first A/Bs compared the
# change with itself). The folders also hold the libgomp and libxxhash the GPU machine lacks.
BASE_LD=${LD_LIBRARY_PATH:-}
libs() { echo "$1:$BASE_LD"; }
note() { echo "$*" >> "$S"; }

tests=${TESTS:-$(cd "$NEW" && ls *_test 2> /dev/null | tr '\n' ' ')}
for t in $tests; do
    name=${t%%:*} filter='*'
    [[ $t == *:* ]] && filter=${t#*:}
    env LD_LIBRARY_PATH="$(libs "$NEW")" ${ENV:-} timeout 200 "$NEW/$name" --gtest_filter="$filter" \
        > "$L/$name.log" 2>&1
    note "$name rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$L/$name.log" | tr '\n' ' ')"
    grep -E '^\[  FAILED  \] .*\.' "$L/$name.log" | head -10 >> "$S"
done
note "tests done at $((SECONDS - T0)) s"

env_ab=0
[[ -n ${OPS_ENV_B:-} ]] && env_ab=1
if [[ -n ${OPS:-} && -x $NEW/pagoda_op_bench && ( $env_ab == 1 || ( -n $OLD && -x $OLD/pagoda_op_bench ) ) ]]; then
    for round in 1 2; do
        for v in old new; do
            dir=$NEW env=""
            if [[ $env_ab == 1 ]]; then
                env=${OPS_ENV_A:-}
                [[ $v == new ]] && env=$OPS_ENV_B
            elif [[ $v == old ]]; then
                dir=$OLD
            fi
            env LD_LIBRARY_PATH="$(libs "$dir")" $env timeout 120 "$dir/pagoda_op_bench" --table qwen3-8b \
                --filter "$OPS" ${OPS_ARGS:-} > "$L/op_bench_${v}_$round.log" 2>&1
        done
    done
    if [[ $env_ab == 1 ]]; then
        note "op bench, us per call ('${OPS_ENV_A:-}', '$OPS_ENV_B', again both):"
    else
        note "op bench, us per call (old, new, old, new):"
    fi
    # Columns are two or more spaces apart (a case's name has single spaces); rows joined by case name.
    awk -F'  +' 'FNR == 1 { file++ } $1 ~ / T=/ && NF >= 2 { us[$1, file] = $2; if (file == 2) order[++n] = $1 }
                 END { for (i = 1; i <= n; i++) printf "  %-64s %9s %9s %9s %9s\n", order[i], us[order[i], 1],
                       us[order[i], 2], us[order[i], 3], us[order[i], 4] }' \
        "$L"/op_bench_old_1.log "$L"/op_bench_new_1.log "$L"/op_bench_old_2.log "$L"/op_bench_new_2.log >> "$S"
fi

for spec in ${SHAPES:-}; do
    if ((SECONDS - T0 > BUDGET)); then
        note "$spec: not started (budget of $BUDGET s spent)"
        continue
    fi
    shape=${spec%%:*} layers=""
    [[ $spec == *:* ]] && layers="--layers ${spec#*:}"
    PYTHONUNBUFFERED=1 timeout 200 python3 bench/gpu/hf_qwen3_8b.py /tmp/ab-model --shape "$shape" $layers \
        --reference-only > "$L/hf_$shape.log" 2>&1
    note "$spec made at $((SECONDS - T0)) s"
    for round in 1 2; do
        for v in old new; do
            dir=$NEW
            if [[ $v == old ]]; then
                [[ -n $OLD && -x $OLD/pagoda_cuda_bench ]] || continue
                dir=$OLD
            fi
            LD_LIBRARY_PATH="$(libs "$dir")" timeout 100 "$dir/pagoda_cuda_bench" --model /tmp/ab-model --prefill 2048 \
                --context 512 --decode 128 \
                ${BENCH:-} > "$L/bench_${shape}_${v}_$round.log" 2>&1
            note "$spec $v $round: $(tail -1 "$L/bench_${shape}_${v}_$round.log")"
        done
    done
    [[ ${KEEP_MODEL:-0} == 1 ]] || rm -rf /tmp/ab-model
done
note "done at $((SECONDS - T0)) s"
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$L"
cat "$S"
