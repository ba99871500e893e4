#!/usr/bin/env bash
# A plan of run_cuda_bench.sh parts run as stages that survive the device's call limit: each stage that ends leaves a
# mark in DONE, a stage that would end past LIMIT seconds stops the call instead, and the next call on the same warm
# machine (the marks, the checkpoints in /tmp and the peer's build stay there) goes on from the first stage without a
# mark (a stage whose run exits 3, run_cuda_bench.sh's "not run: missing binaries", gets none and stops the call).
# Run on the GPU machine from the repository root:
#   OUT=$OUT BIN=build-all SHAPE=qwen3-8b bench/gpu/stages.sh bench/gpu/plans/dense-table.plan
# A plan has one stage a line ('#' starts a comment): NAME SECONDS [VAR=VALUE ...] PARTS
#   NAME     the stage's mark and its folder (OUT/NAME: run_cuda_bench.sh's logs and summary)
#   SECONDS  what the stage is expected to take: it starts only if that still fits LIMIT
#   VAR=...  settings for this stage's run_cuda_bench.sh alone (VAR= sets VAR empty, as SERVE_SIZES= does)
#   PARTS    run_cuda_bench.sh's parts (a comma-separated list)
# Settings: OUT (required), BIN_PARTS (folders copied into BIN first, e.g. "build-tests build-serve"), DONE
# (/tmp/stages.done), LIMIT (570 s: a call is at most 600 s), SKIP (stage names not to run, e.g. SKIP="tests arch"
# where the binaries' tests passed in an earlier session), and
# RUN (bash bench/gpu/run_cuda_bench.sh): the command each stage runs, given the stage's settings in its environment
# and PARTS as its argument (tests/oracle/model/test_stages.py runs plans with a stand-in that records them; RUN=true
# here checks that a plan parses). OUT/summary.txt gathers every stage's summary as each ends, and the running
# stage's lines so far every WATCH_SECONDS (5), so a call stopped at the device's limit still brings back what was
# measured; OUT/stages.tgz holds the logs.
set -uo pipefail
PLAN=${1:?plan file}
OUT=${OUT:?OUT: where the summary and the logs go}
DONE=${DONE:-/tmp/stages.done}
LIMIT=${LIMIT:-570}
RUN=${RUN:-bash bench/gpu/run_cuda_bench.sh}
mkdir -p "$DONE" "$OUT"
# BIN_PARTS: folders whose files join BIN at the start of every call. A call's carries replace the folders the call
# before left, so a copy made in one call is gone in the next (session 36 lost pagoda's serving stages so).
for dir in ${BIN_PARTS:-}; do cp -r "$dir/." "${BIN:?BIN_PARTS needs BIN}/"; done
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
note() { echo "$*" >> "$DONE/summary.txt"; }
finish() {
    cp "$DONE/summary.txt" "$OUT/summary.txt"
    (cd "$DONE" && tar czf "$OUT/stages.tgz" --exclude=summary.txt -- */ 2> /dev/null)
}
done_before=()
for mark in "$DONE"/*/.done; do [[ -e $mark ]] && done_before+=("$(basename "$(dirname "$mark")")"); done
note "=== call at $(date -u +%T); stages done before it: ${done_before[*]}"
line_no=0
while read -r -a words; do
    line_no=$((line_no + 1))
    [[ ${#words[@]} -eq 0 || ${words[0]} == \#* ]] && continue
    name=${words[0]} seconds=${words[1]:-}
    settings=() parts=""
    for word in "${words[@]:2}"; do
        [[ $word == \#* ]] && break
        if [[ -z $parts && $word == [A-Za-z_]*=* ]]; then settings+=("$word"); else parts+=${parts:+ }$word; fi
    done
    if [[ ! $seconds =~ ^[0-9]+$ || -z $parts || $parts == *" "* || $name == */* ]]; then
        note "plan line $line_no is not NAME SECONDS [VAR=VALUE ...] PARTS: ${words[*]}"
        finish
        exit 2
    fi
    [[ -f $DONE/$name/.done || " ${SKIP:-} " == *" $name "* ]] && continue
    if (($(elapsed) + seconds > LIMIT)); then
        note "stopped before $name at $(elapsed) s (it is expected to take $seconds s; the limit is $LIMIT s)"
        finish
        exit 0
    fi
    mkdir -p "$DONE/$name"
    rm -f "$DONE/$name/summary.txt"  # a run that did not finish (exit 3, or a call stopped mid-stage) left its lines
    t=$(date +%s)
    # While the stage runs, OUT/summary.txt is the summary so far and the stage's lines so far (run_cuda_bench.sh
    # appends each as it is measured), every WATCH_SECONDS (5): a call killed at the device's limit mid-stage still
    # returns them.
    (
        trap 'kill ${nap:-} 2> /dev/null; exit 0' TERM  # stop at once, not after the current sleep
        while :; do
            sleep "${WATCH_SECONDS:-5}" &
            nap=$!
            wait $nap
            { cat "$DONE/summary.txt"; sed "s/^/[$name, so far] /" "$DONE/$name/summary.txt" 2> /dev/null; } \
                > "$OUT/summary.txt.new" && mv "$OUT/summary.txt.new" "$OUT/summary.txt"
        done
    ) &
    watcher=$!
    # shellcheck disable=SC2086  # RUN is a command line: split into its words
    # (< /dev/null: the loop reads the plan from stdin, which nothing the stage runs may take lines from.)
    OUT=$DONE/$name env "${settings[@]}" $RUN "$parts" < /dev/null > "$DONE/$name/stdout.txt" 2>&1
    rc=$?
    kill $watcher 2> /dev/null
    wait $watcher 2> /dev/null
    if ((rc == 3)); then  # run_cuda_bench.sh's "not run": BIN lacks a binary the stage needs
        note "  [$name: not run, $(tail -1 "$DONE/$name/summary.txt" 2> /dev/null); the call stops here]"
        finish
        exit 3
    fi
    touch "$DONE/$name/.done"
    [[ -f $DONE/$name/summary.txt ]] && sed "s/^/[$name] /" "$DONE/$name/summary.txt" >> "$DONE/summary.txt"
    note "  [$name: rc $rc, $(($(date +%s) - t)) s, at $(elapsed) s]"
    cp "$DONE/summary.txt" "$OUT/summary.txt"
done < "$PLAN"
note "every stage done at $(elapsed) s"
finish
