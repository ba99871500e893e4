#!/usr/bin/env bash
# One device call that checks a change and measures it against the code before it, in the same call: the change's
# tests, then op-bench and model-bench runs of the old and the new binaries alternated. Run on the GPU machine from
# the repository root:
#   NEW=build-new OLD=build-old SHAPES="qwen3.5-9b qwen3.5-35b-a3b:8" bench/gpu/ab_check.sh
# NEW and OLD are carry folders made here by `TARGETS="..." bench/gpu/pack_carry.sh BUILD FOLDER` from a build of the
# change and one of the commit before it (e.g. `git stash` the change's kernels, rebuild the bench targets in the same
# build folder, pack, `git stash pop`, rebuild, pack). Both are carried (`carry` takes both folder names). A change
# inside the kernels alone (launchers with the same signatures) needs only the old kernels' library in OLD
# (libpagoda_kernels_cuda.so.xz from pack_carry.sh of the old build): OLD then runs NEW's binaries with that library
# first on the path, and the carry is one library instead of a second set of binaries (session 30 ran it so).
#   TESTS     test binaries of NEW to run first, each NAME or NAME:GTEST_FILTER (default: every *_test in NEW)
#   ENV       environment for the tests (e.g. PAGODA_TEST_DEVICE=cuda, which executor_test needs to use the GPU)
#   OPS       a pagoda_op_bench --filter for the Qwen3-8B table (none: no op bench), run old/new twice
#   OPS_ARGS  more pagoda_op_bench arguments (e.g. --cold: tensors past the L2, read from memory)
#   OPS_ENV_A, OPS_ENV_B  instead of OLD: NEW's op bench under two environments, alternated twice (a switch's A/B in
#             one binary, e.g. OPS_ENV_A=PAGODA_INT4_GEMV_MMA=0 OPS_ENV_B=PAGODA_INT4_GEMV_MMA=1)
#   OPS_ENVS  the same for any number of environments, ';' between them ('-' for none; 'old' for OLD's build), e.g.
#             OPS_ENVS="-;PAGODA_INT4_GEMV_MMA=2;PAGODA_INT4_GEMV_MMA=2 PAGODA_GEMV_MMA_SPLIT=1"
#   BENCH_ENVS  likewise for NEW's model bench of each of SHAPES (instead of OLD), each run twice, alternated
#   SHAPES    random checkpoints to make (hf_qwen3_8b.py --shape; ":N" keeps N layers), each benched old, new, old, new;
#             a path (from /) is a checkpoint already there, benched as it is and kept
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
# The old side's binary NAME and its library path: OLD's own, or NEW's binary over OLD's kernels library.
old_bin() { [[ -x $OLD/$1 ]] && echo "$OLD/$1" || echo "$NEW/$1"; }
old_libs() { [[ -x $OLD/$1 ]] && libs "$OLD" || libs "$OLD:$NEW"; }
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

# The op bench's variants: OLD and NEW, or NEW under each of OPS_ENVS (OPS_ENV_A and OPS_ENV_B: two of them).
variants=()
if [[ -n ${OPS_ENVS:-} ]]; then
    IFS=';' read -r -a variants <<< "$OPS_ENVS"
elif [[ -n ${OPS_ENV_B:-} ]]; then
    variants=("${OPS_ENV_A:--}" "$OPS_ENV_B")
fi
if [[ -n ${OPS:-} && -x $NEW/pagoda_op_bench && ( ${#variants[@]} -gt 0 || -n $OLD ) ]]; then
    logs=()
    for round in 1 2; do
        if ((${#variants[@]} > 0)); then
            for i in "${!variants[@]}"; do
                env=${variants[$i]} bin=$NEW/pagoda_op_bench lib=$(libs "$NEW")
                [[ $env == old ]] && bin=$(old_bin pagoda_op_bench) lib=$(old_libs pagoda_op_bench)
                [[ $env == - || $env == old ]] && env=""
                env LD_LIBRARY_PATH="$lib" $env timeout 120 "$bin" --table qwen3-8b \
                    --filter "$OPS" ${OPS_ARGS:-} > "$L/op_bench_${i}_$round.log" 2>&1
                logs+=("$L/op_bench_${i}_$round.log")
            done
        else
            for v in old new; do
                bin=$NEW/pagoda_op_bench lib=$(libs "$NEW")
                [[ $v == old ]] && bin=$(old_bin pagoda_op_bench) lib=$(old_libs pagoda_op_bench)
                LD_LIBRARY_PATH="$lib" timeout 120 "$bin" --table qwen3-8b --filter "$OPS" \
                    ${OPS_ARGS:-} > "$L/op_bench_${v}_$round.log" 2>&1
                logs+=("$L/op_bench_${v}_$round.log")
            done
        fi
    done
    if ((${#variants[@]} > 0)); then
        note "op bench, us per call, each environment in turn, twice:"
        for i in "${!variants[@]}"; do note "  [$i] ${variants[$i]}"; done
    else
        note "op bench, us per call (old, new, old, new):"
    fi
    # Columns are two or more spaces apart (a case's name has single spaces); rows joined by case name.
    awk -F'  +' 'FNR == 1 { file++ } $1 ~ / T=/ && NF >= 2 { us[$1, file] = $2; if (!($1 in seen)) { seen[$1];
                 order[++n] = $1 } }
                 END { for (i = 1; i <= n; i++) { printf "  %-64s", order[i];
                       for (f = 1; f <= file; f++) printf " %9s", us[order[i], f]; printf "\n" } }' \
        "${logs[@]}" >> "$S"
fi

for spec in ${SHAPES:-}; do
    if ((SECONDS - T0 > BUDGET)); then
        note "$spec: not started (budget of $BUDGET s spent)"
        continue
    fi
    model=/tmp/ab-model
    if [[ $spec == /* ]]; then
        model=$spec shape=$(basename "$spec")
    else
        shape=${spec%%:*} layers=""
        [[ $spec == *:* ]] && layers="--layers ${spec#*:}"
        PYTHONUNBUFFERED=1 timeout 200 python3 bench/gpu/hf_qwen3_8b.py "$model" --shape "$shape" $layers \
            --reference-only > "$L/hf_$shape.log" 2>&1
        note "$spec made at $((SECONDS - T0)) s"
    fi
    benches=(old new)
    [[ -n ${BENCH_ENVS:-} ]] && IFS=';' read -r -a benches <<< "$BENCH_ENVS"
    for round in 1 2; do
        for i in "${!benches[@]}"; do
            v=${benches[$i]} bin=$NEW/pagoda_cuda_bench lib=$(libs "$NEW") env=""
            if [[ -n ${BENCH_ENVS:-} ]]; then
                [[ $v != - ]] && env=$v
                v="env$i"
            elif [[ $v == old ]]; then
                [[ -n $OLD ]] || continue
                bin=$(old_bin pagoda_cuda_bench) lib=$(old_libs pagoda_cuda_bench)
            fi
            env LD_LIBRARY_PATH="$lib" $env timeout 100 "$bin" --model "$model" \
                --prefill 2048 --context 512 --decode 128 ${BENCH:-} > "$L/bench_${shape}_${v}_$round.log" 2>&1
            note "$spec $v${env:+ ($env)} $round: $(tail -1 "$L/bench_${shape}_${v}_$round.log")"
        done
    done
    [[ ${KEEP_MODEL:-0} == 1 || $model != /tmp/ab-model ]] || rm -rf /tmp/ab-model
done
note "done at $((SECONDS - T0)) s"
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$L"
cat "$S"
