#!/usr/bin/env bash
# The CUDA backend on the GPU machine, in one visit: correctness tests (ops vs CPU, golden models), then the
# benchmark table on a random Qwen3-8B-shaped bf16 model (pagoda vs transformers eager, with the machine's measured
# copy bandwidth and cuBLASLt peak). Binaries are built on the development machine and carried in $BIN.
#   BIN=build-cuda-carry OUT=/tmp/out bench/gpu/run_cuda_bench.sh [tests|bench|all]
# `bench` also times `pagoda serve` from process start to /health 200 on the 8B model (when $BIN has pagoda and a
# Qwen tokenizer in $BIN/tok) and, when nsys is installed, lists the GPU time per kernel of 32 decode steps.
# Libraries the GPU machine lacks (ICU) may travel xz-compressed as $BIN/lib*.so.*.xz; they are unpacked first.
set -uo pipefail
BIN=${BIN:-build-cuda-carry}
OUT=${OUT:-/tmp/pagoda-cuda-bench}
WHAT=${1:-all}
MODEL=${MODEL:-/tmp/qwen3-8b-random}
mkdir -p "$OUT"
export PAGODA_SOURCE_DIR=$PWD
# Our binaries may need the libgomp carried beside them; Python keeps its own environment.
LIBS="$BIN:${LD_LIBRARY_PATH:-}"
for packed in "$BIN"/lib*.xz; do
    [[ -e $packed ]] && xz -dc "$packed" > "$BIN/$(basename "$packed" .xz)"
done
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt" 2>&1
summary=()

if [[ $WHAT == tests || $WHAT == all ]]; then
    for t in cuda_ops_test cuda_golden_test; do
        LD_LIBRARY_PATH=$LIBS timeout 120 "$BIN/$t" > "$OUT/$t.log" 2>&1
        rc=$?
        summary+=("$t rc=$rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/$t.log" | tr '\n' ' ')")
    done
    # The engine's own tests (batch invariance, prefix hit = miss, preemption) on the GPU, dense models only.
    if [[ -x $BIN/serving_test ]]; then
        PAGODA_TEST_DEVICE=cuda LD_LIBRARY_PATH=$LIBS timeout 120 "$BIN/serving_test" \
            --gtest_filter='Golden/EngineRunnerTest.*/qwen3:Golden/EngineRunnerTest.*/qwen2:Golden/EngineRunnerTest.*/qwen2_tied' \
            > "$OUT/serving_test.log" 2>&1
        rc=$?
        summary+=("serving_test (cuda) rc=$rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/serving_test.log" | tr '\n' ' ')")
    fi
    # The CLI on the GPU: greedy ids from --device cuda and --device cpu (tiny golden model; equal unless a near-tie).
    if [[ -x $BIN/pagoda ]]; then
        for dev in cuda cpu; do
            LD_LIBRARY_PATH=$LIBS timeout 60 "$BIN/pagoda" generate --model tests/golden/qwen3 --ids "1 2 3 4 5" -n 12 \
                --device $dev --json > "$OUT/generate_$dev.log" 2>&1
        done
        summary+=("pagoda generate cuda: $(tail -1 "$OUT/generate_cuda.log")")
        summary+=("pagoda generate cpu:  $(tail -1 "$OUT/generate_cpu.log")")
    fi
fi

if [[ $WHAT == bench || $WHAT == all ]]; then
    PYTHONUNBUFFERED=1 timeout 280 python3 bench/gpu/hf_qwen3_8b.py "$MODEL" > "$OUT/hf.log" 2>&1
    summary+=("transformers: $(tail -1 "$OUT/hf.log")")
    LD_LIBRARY_PATH=$LIBS timeout 150 "$BIN/pagoda_cuda_bench" --model "$MODEL" --prefill 2048 --context 512 --decode 128 \
        > "$OUT/pagoda_bench.log" 2>&1
    summary+=("pagoda: $(tail -1 "$OUT/pagoda_bench.log")")
    if command -v nsys > /dev/null; then
        LD_LIBRARY_PATH=$LIBS timeout 120 nsys profile -t cuda -o "$OUT/decode" --force-overwrite true --stats=true \
            "$BIN/pagoda_cuda_bench" --model "$MODEL" --prefill 16 --context 512 --decode 32 > "$OUT/nsys.log" 2>&1
        summary+=("nsys: rc=$? (kernel table in nsys.log)")
    fi
    if [[ -x $BIN/pagoda && -f $BIN/tok/vocab.json ]]; then
        cp "$BIN"/tok/* "$MODEL"/
        start=$(date +%s.%N)
        LD_LIBRARY_PATH=$LIBS "$BIN/pagoda" serve "$MODEL" --device cuda --port 8011 --max-model-len 4096 \
            > "$OUT/serve.log" 2>&1 &
        pid=$!
        # One Python process polls /health every 10 ms, then asks for one completion (no curl needed there).
        START=$start PID=$pid MODEL=$MODEL python3 - > "$OUT/serve_probe.txt" 2>&1 << 'PY'
import json, os, time, urllib.request
start, pid = float(os.environ["START"]), int(os.environ["PID"])
ready = None
while time.time() - start < 60:
    try:
        if urllib.request.urlopen("http://127.0.0.1:8011/health", timeout=1).status == 200:
            ready = time.time() - start
            break
    except Exception:
        pass
    try:
        os.kill(pid, 0)
    except OSError:
        break
    time.sleep(0.01)
print("ready_s", "never" if ready is None else round(ready, 2))
if ready is not None:
    body = json.dumps({"model": os.environ["MODEL"], "prompt": "Hello", "max_tokens": 8}).encode()
    req = urllib.request.Request("http://127.0.0.1:8011/v1/completions", body, {"Content-Type": "application/json"})
    print(urllib.request.urlopen(req, timeout=60).read().decode()[:300])
PY
        kill -TERM $pid; wait $pid
        summary+=("serve (start to /health 200, then one completion): $(tr '\n' ' ' < "$OUT/serve_probe.txt")")
    fi
fi

echo "=== $(date -u +%F) $(cat "$OUT/gpu.txt")"
for line in "${summary[@]}"; do echo "$line"; done
