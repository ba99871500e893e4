#!/usr/bin/env bash
# The CUDA backend on the GPU machine, in one visit: correctness tests (ops vs CPU, golden models), then the
# benchmark table on a random Qwen3-8B-shaped bf16 model (pagoda vs transformers eager, with the machine's measured
# copy bandwidth and cuBLASLt peak). Binaries are built on the development machine and carried in $BIN.
#   BIN=build-cuda-carry OUT=/tmp/out bench/gpu/run_cuda_bench.sh PARTS
# PARTS is a comma-separated list of:
#   tests       the CUDA unit tests (TEST_BINS, TEST_SECONDS a binary: 300; the attention cases also with each
#               decode attention block shape, each FP8_DECODE_VARIANTS e4m3 decode path: widened registers, and each
#               PREFILL_ATTENTION_VARIANTS prefill kernel: mma, the one other GPUs than Hopper take, by default),
#               the engine's tests on the GPU, `pagoda generate` on both devices
#   arch        the kernels A100 / sm_86 / sm_89 GPUs get (their tile limits; the compute_80 PTX through the JIT):
#               the CUDA tests, and batch-1 decode / prefill speed when the model part made a model
#   ops         pagoda_op_bench (the op harness's perf mode: Qwen3-8B shapes, then the whole case table, µs and GB/s
#               or TFLOP/s per case; the decode attention block shapes and PREFILL_ATTENTION_VARIANTS' prefill
#               kernels too) and, with ncu, the decode attention kernel's memory throughput
#   model       makes the model with transformers (and its baseline), compares our logits with transformers'
#               (SHAPE=qwen3-8b by default; qwen3.5-9b, qwen3.5-27b, qwen3-30b-a3b, qwen3.5-35b-a3b,
#               qwen3-next-80b-a3b; LAYERS=N keeps N layers;
#               ROUTER_SCALE=S scales the MoE routers' weights: clear routing choices, less bf16 sensitivity;
#               SAVE_ONLY=1 makes the checkpoint only; with FP8_BLOCKS=128 as an FP8 checkpoint, Qwen's layout)
#   bench       pagoda_cuda_bench (batch-1 decode eager and graph, prefill 2,048; QUANT=fp8 also quantized at load,
#               weight-only and W8A8 (--fp8-activations);
#               QUANT=awq also an AWQ int4 copy of the model, $MODEL-awq, made once by bench/gpu/make_awq_checkpoint.py
#               (group 128, round-to-nearest, on the GPU: a minute or two at 8B, so an earlier call may make it), its
#               roofline counting the int4 bytes it reads), per-op GPU time of prefill and decode steps
#               (PAGODA_CUDA_PROFILE=1), `pagoda serve` start to /health 200; LONG_PREFILL=N also times an N-token
#               prefill (here and in the peer part)
#   qaccuracy   issue 18's real-shape check (needs the model part's references): pagoda's logits of the AWQ copy
#               ($MODEL-awq, made once), of --quantization fp8 and of that with --fp8-activations (W8A8) against
#               transformers' fp32 run of the same quantized weights (and rounded inputs; quant_reference.py), judged
#               by transformers' bf16 run of them, and each quantization's cost against the bf16 model: KL divergence
#               and top-1 agreement beside transformers' own (compare_quantized.py)
#   throughput  bench/gpu/offline_throughput.py against `pagoda serve` (256 x 1000 in / 1000 out), and the run against
#               its bound (offline_bound.py, when the bench part measured this GPU); THROUGHPUT_PEER=1
#               also against llama-server on the peer part's GGUF (one slot a request, 2,048 tokens each)
#   golden-drift transformers' bf16 logits of the tiny golden models against their fp32 references
#   profile     a shorter profiled serving run (PROFILE_N (256) x 1000 in / 300 out, eager steps) whose per-op
#               table shows where a large-batch step's time goes
#   model2      makes a Qwen2.5-7B-shaped checkpoint and compares our logits with transformers' (no speed baseline)
#   kernels     every kernel of a short decode run timed alone under ncu (bench/gpu/kernel_times.py)
#   timeline    a replayed decode step kernel by kernel inside its CUDA graph (a CUPTI trace, kernel_trace.cpp;
#               bench/gpu/graph_timeline.py): each node's share of the step and the gap or overlap before it
#   ops-ab      the op bench's Qwen3-8B cases matching AB_FILTER ('paged_attention decode') as built and with AB_ENV
#               (PAGODA_FP8_DECODE=widened) set, in turn, twice: a kernel switch's A/B in one call (142 s, session 38)
#   ab          bench/gpu/ab_check.sh: the code before a change (OLD, a carried folder: its kernel library, or its
#               binaries) against BIN's, in turn, twice: the op bench's AB_OPS cases (--cold) and pagoda_cuda_bench
#               (prefill 2,048, batch-1 decode) on MODEL, with AB_BENCH's arguments (e.g. "--quantization fp8")
#   gemv        bench/gpu/gemv_experiments.sh's GEMV_PARTS (tests,ops,e2e,ncu) with BIN's binaries on MODEL, its
#               settings (VARIANTS, OPS_FILTERS: 'T=1 N=' here, E2E_MODELS, E2E_ROUNDS, NCU_FILTERS, and OLD: the
#               folder of the older kernel library the variant `old` runs, which the call must carry) from the stage
#   opsprof     the op bench's Qwen3-8B cases matching OPS_FILTER (lora) under ncu, the first NCU_COUNT (40) launches of
#               kernels matching NCU_KERNELS (lora): duration, DRAM and L2 throughput, SM throughput and issue slots,
#               occupancy, registers and the warp stall breakdown of each (where a kernel's microseconds go; no model)
#   sanitize    compute-sanitizer memcheck, racecheck and synccheck over backend_ops_test
#   peer-build  starts building llama.cpp from build-llama-carry/llama.cpp.tar.xz in the background (the tree of
#               llama-cpp-python 0.3.36's vendor/llama.cpp without models/, docs/, media/, benches/, tests/,
#               examples/ and the ggml backends other than ggml-cpu and ggml-cuda, xz -9e: 6.4 MB; configured
#               and dry-run (ninja -n llama-server llama-bench llama-quantize) with CUDA on here)
#   peer        llama.cpp's llama-bench on the same checkpoint as GGUF (waits for peer-build); PEER_QUANT=Q4_K_M
#               (or Q8_0) also on the GGUF quantized by llama-quantize: the quantized rows' peer
#   lora        multi-LoRA (issue 19): LORA_COUNT (100) random rank-16 adapters on every projection
#               (make_lora_adapters.py; 8 distinct weight files), served with --max-loras 8 and all held in host
#               memory: the slots' memory from the start-up log, a cold adapter's first request against its second,
#               64 streams of 1,000 in / 256 out over 8 adapters against the same load on the base model of a server
#               without LoRA, and one stream with an adapter against one without, and 8 cold adapters' first requests
#               while 16 streams decode (their TTFT, and the streams' longest gap between two tokens: the paging
#               against LORA_ENV=PAGODA_LORA_PAGING=0's installs inside the step; LORA_COLD=0 leaves the cold
#               adapters out; LORA_WARMUP=0 leaves out the short load of other prompts each server serves before
#               its 64 streams); LORA_PROFILE=1 also the 64 streams
#               on an eager server with PAGODA_CUDA_PROFILE=1 (the decode steps' per-op table); LORA_ENV adds environment settings to the
#               servers with adapters (e.g. PAGODA_LORA_MMA=0: the CUDA-core LoRA kernels)
#   streams     STREAMS (64) streamed requests of 1,000 in / 256 out through `pagoda serve` with no size flags, then
#               through llama-server on the same checkpoint when the peer part has made its GGUF: output tok/s and
#               TTFT / TPOT medians from the same client (offline_throughput.py --stream); STREAMS_ENV adds
#               environment settings to pagoda's server (e.g. PAGODA_WARMUP_BUCKETS=1 or PAGODA_GEMM_TUNING=0)
#   async       async scheduling A/B (issue 17): offline ASYNC_N (256) x 1,000 / ASYNC_OUTPUT (300) and one stream of
#               100 / 256 through `pagoda serve` without, then with --async-scheduling
#   prefix      a real-shape serving run with prefix-cache hits, its completions compared with a cache-off run
#               (compare_completions.py: where they part, and whether at near-ties)
# or `all` (every part) or `check` (model,profile). bench, throughput, profile and prefix need the model (model part,
# or an earlier call on the same machine). `all` takes longer than one 600 s device call: split it (benchmarks.md).
# Files may travel xz-compressed as $BIN/NAME.xz (the carry limit is 64 MiB): binaries, and the libraries the GPU
# machine lacks (ICU). They are unpacked first.
set -uo pipefail
BIN=${BIN:-build-cuda-carry}
OUT=${OUT:-/tmp/pagoda-cuda-bench}
WHAT=${1:-all}
[[ $WHAT == check ]] && WHAT=model,profile
want() { [[ $WHAT == all || ",$WHAT," == *",$1,"* ]]; }
# SHAPE picks the random checkpoint the model part makes (hf_qwen3_8b.py --shape; LAYERS keeps the first N layers).
SHAPE=${SHAPE:-qwen3-8b}
MODEL=${MODEL:-/tmp/$SHAPE-random}
LLAMA=/tmp/llama.cpp  # the peer's tree, built there by the peer-build part
mkdir -p "$OUT"
export PAGODA_SOURCE_DIR=$PWD
# Our binaries may need the libgomp carried beside them; Python keeps its own environment.
LIBS="$BIN:${LD_LIBRARY_PATH:-}"
for packed in "$BIN"/*.xz "$BIN"/tok/*.xz; do
    [[ -e $packed ]] || continue
    xz -dc "$packed" > "${packed%.xz}"
    chmod +x "${packed%.xz}"
done
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt" 2>&1
# The binaries the parts run from BIN: one missing stops the script before any part runs, with exit 3 (stages.sh
# leaves such a stage unmarked and stops the call). Without this check, a call whose BIN lacked pagoda (session 36:
# a chained call that did not copy build-serve into build-all again) ran its serving parts against no server.
declare -A needs=([tests]="backend_ops_test cuda_golden_test" [bench]="pagoda_cuda_bench"
    [ab]=pagoda_cuda_bench [ops]=pagoda_op_bench [gemv]="backend_ops_test pagoda_op_bench pagoda_cuda_bench" [kernels]=pagoda_cuda_bench [timeline]=pagoda_cuda_bench [opsprof]=pagoda_op_bench
    [qaccuracy]=pagoda [throughput]=pagoda [async]=pagoda [profile]=pagoda [prefix]=pagoda [lora]=pagoda
    [streams]=pagoda)
[[ ${BENCH_EXTRAS:-1} == 1 ]] && needs[bench]+=" pagoda"  # the serving probes
[[ ${SAVE_ONLY:-0} == 1 ]] || needs[model]=pagoda         # the logits against transformers'
needs[model2]=pagoda
missing=()
for part in "${!needs[@]}"; do
    want "$part" || continue
    for bin in ${needs[$part]}; do [[ -x $BIN/$bin ]] || missing+=("$BIN/$bin ($part)"); done
done
# OLD (the ab part's, and gemv's variant `old`): the code before a change, a folder this call must carry.
if want ab && [[ -z ${OLD:-} ]]; then
    missing+=("OLD (the ab part's folder of the code before the change)")
elif [[ -n ${OLD:-} ]] && { want gemv || want ab; } && ! compgen -G "$OLD/libpagoda_kernels_cuda.so*" > /dev/null; then
    missing+=("$OLD/libpagoda_kernels_cuda.so (the code before the change)")
fi
if ((${#missing[@]})); then
    echo "not run: missing ${missing[*]}" | tee -a "$OUT/summary.txt"
    exit 3
fi
summary=()
# Each summary line is also appended to $OUT/summary.txt as soon as it is added (checked before every top-level
# command), so a call stopped at the device's time limit still brings back what was measured by then.
summary_written=0
trap 'if (( ${#summary[@]} > summary_written )); then printf "%s\n" "${summary[@]:summary_written}" \
    >> "$OUT/summary.txt"; summary_written=${#summary[@]}; fi' DEBUG
# Waits up to 300 s for peer-build's llama.cpp build to end, or for the file $1 it makes when given; false if neither.
wait_for_llama_build() {
    for _ in $(seq 1 150); do [[ -f /tmp/llama_build.done || ( -n ${1:-} && -x $1 ) ]] && return 0; sleep 2; done
    return 1
}
# A llama.cpp build that an earlier call's peer-build part left running (in the background: it outlives its call) takes
# the host's cores from the timed parts' host threads: in session 36 batch-1 decode read 8.000 ms for every step
# (median and mean) against 6.19 ms of GPU time while it built. So when a timed part is asked for, wait for it to end
# first (up to 300 s) and say so; past that, say that the timings ran beside it. (A peer-build part of this same call
# starts its build after the other parts, near the end of the script.)
timed=0
for part in bench ops ab gemv throughput async profile streams lora arch; do want "$part" && timed=1; done
if ((timed)) && [[ -f /tmp/llama_build.log && ! -f /tmp/llama_build.done ]]; then
    waited=$SECONDS
    if wait_for_llama_build; then
        summary+=("(waited $((SECONDS - waited)) s for the llama.cpp build to end before timing)")
    else
        summary+=("(the llama.cpp build still runs after 300 s: this call's timings ran beside it and are not valid)")
    fi
fi
# The per-op tables in full, then the one-line summary. The logs travel back as one archive (the device tool returns
# only a few files).
finish() {
    trap - DEBUG
    for f in "$OUT"/profile_*.log "$OUT"/serve_profile.log; do
        [[ -f $f ]] && { echo "--- $(basename "$f")"; grep -E 'cuda profile|KV' "$f"; }
    done
    echo "=== $(date -u +%F) $(cat "$OUT/gpu.txt")"
    for line in "${summary[@]}"; do echo "$line"; done
    (cd "$OUT" && tar czf logs.tgz --remove-files -- *.log gpu.txt 2> /dev/null)
}

if want tests; then
    # TEST_BINS: the kernel tests to run (a call whose BIN lacks some runs the rest in a later call with the others).
    # TEST_SECONDS (300) a binary: backend_ops_test alone ran past 120 s on an H100 in session 45 (260 of its 300
    # tests in 119 s; EarlyLoadsTest 52 s of it).
    seconds=${TEST_SECONDS:-300}
    for t in ${TEST_BINS-backend_ops_test delta_net_kernels_test cuda_golden_test cuda_sampler_test cuda_lora_test \
        cuda_tensor_parallel_test}; do
        [[ -x $BIN/$t ]] || { summary+=("$t: not in $BIN"); continue; }
        LD_LIBRARY_PATH=$LIBS timeout "$seconds" "$BIN/$t" > "$OUT/$t.log" 2>&1
        rc=$?
        result=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) |sampling 256' "$OUT/$t.log" | tr '\n' ' ')
        if ((rc == 124)); then  # how far a run the timeout stopped got, where gtest printed no total
            passed=$(grep -c '^\[       OK' "$OUT/$t.log")
            failed=$(grep -c '^\[  FAILED  \]' "$OUT/$t.log")
            running=$(grep -E '^\[ RUN' "$OUT/$t.log" | tail -1 | cut -c14-)
            result="timed out after $seconds s: $passed tests OK, $failed failed, in $running"
        fi
        summary+=("$t rc=$rc: $result")
    done
    # The decode attention kernel's other block shapes against the CPU too (pagoda_op_bench compares speeds).
    for shape in ${ATTENTION_SHAPES-4x3 2x4 8x2}; do
        PAGODA_DECODE_ATTENTION=$shape LD_LIBRARY_PATH=$LIBS timeout 120 "$BIN/backend_ops_test" \
            --gtest_filter='*paged_attention*' > "$OUT/backend_ops_test_attention_$shape.log" 2>&1
        summary+=("backend_ops_test attention $shape rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' \
            "$OUT/backend_ops_test_attention_$shape.log" | tr '\n' ' ')")
    done
    # The e4m3 cache's decode paths other than the default, direct (PAGODA_FP8_DECODE: widened, registers; commas or
    # spaces between them) against the CPU.
    FP8_DECODE_VARIANTS=${FP8_DECODE_VARIANTS-widened registers}
    for variant in ${FP8_DECODE_VARIANTS//,/ }; do
        PAGODA_FP8_DECODE=$variant LD_LIBRARY_PATH=$LIBS timeout 120 "$BIN/backend_ops_test" \
            --gtest_filter='*paged_attention*' > "$OUT/backend_ops_test_fp8_decode_$variant.log" 2>&1
        summary+=("backend_ops_test fp8 decode $variant rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' \
            "$OUT/backend_ops_test_fp8_decode_$variant.log" | tr '\n' ' ')")
    done
    # The prefill attention kernels other than the default (PAGODA_PREFILL_ATTENTION; mma: the mma.sync one, which GPUs
    # other than Hopper take; wgmma says so where the GPU has no code for it) against the CPU.
    for variant in ${PREFILL_ATTENTION_VARIANTS-mma}; do
        PAGODA_PREFILL_ATTENTION=$variant LD_LIBRARY_PATH=$LIBS timeout 120 "$BIN/backend_ops_test" \
            --gtest_filter='*paged_attention*' > "$OUT/backend_ops_test_prefill_$variant.log" 2>&1
        summary+=("backend_ops_test prefill attention $variant rc=$?: $(grep -E \
            '^\[  (PASSED|FAILED) |^PAGODA_PREFILL_ATTENTION' "$OUT/backend_ops_test_prefill_$variant.log" | tr '\n' ' ')")
    done
    # The engine's own tests (batch invariance, prefix hit = miss, preemption) on the GPU, the models CUDA runs.
    if [[ -x $BIN/executor_test ]]; then
        PAGODA_TEST_DEVICE=cuda LD_LIBRARY_PATH=$LIBS timeout 120 "$BIN/executor_test" \
            --gtest_filter='Golden/EngineRunnerTest.*' \
            > "$OUT/executor_test.log" 2>&1
        rc=$?
        summary+=("executor_test (cuda) rc=$rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/executor_test.log" | tr '\n' ' ')")
        # Again with async scheduling: the runner's steps on the PipelinedRunner's worker thread (CUDA graphs too).
        PAGODA_TEST_DEVICE=cuda PAGODA_TEST_ASYNC_SCHEDULING=1 LD_LIBRARY_PATH=$LIBS timeout 120 "$BIN/executor_test" \
            --gtest_filter='Golden/EngineRunnerTest.*' > "$OUT/executor_test_async.log" 2>&1
        summary+=("executor_test (cuda, async scheduling) rc=$?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' \
            "$OUT/executor_test_async.log" | tr '\n' ' ')")
    fi
    # Decode steps with LoRA adapters as CUDA graphs against eager ones.
    if [[ -x $BIN/lora_engine_test ]]; then
        PAGODA_TEST_DEVICE=cuda LD_LIBRARY_PATH=$LIBS timeout 120 "$BIN/lora_engine_test" \
            --gtest_filter='*CudaGraphs*' > "$OUT/lora_engine_test.log" 2>&1
        summary+=("lora_engine_test (cuda graphs) rc=$?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' \
            "$OUT/lora_engine_test.log" | tr '\n' ' ')")
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

if want arch; then
    # What an A100 (sm_80) and sm_86 / sm_89 parts get, run on this GPU: the kernels' tiles capped at those parts'
    # shared memory (PAGODA_CUDA_KERNELS), then the kernels as compute_80 PTX compiled by the driver, which has no
    # instruction newer than sm_80.
    # ARCH_FAMILIES= (empty) leaves the tile runs out: the compute_80 PTX runs below take sm80's tiles too.
    for fam in ${ARCH_FAMILIES-sm80 sm86}; do
        for t in backend_ops_test delta_net_kernels_test cuda_golden_test; do
            PAGODA_CUDA_KERNELS=$fam LD_LIBRARY_PATH=$LIBS timeout 120 "$BIN/$t" > "$OUT/arch_${fam}_$t.log" 2>&1
            summary+=("$fam tiles: $t rc=$?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/arch_${fam}_$t.log" | tr '\n' ' ')")
        done
    done
    # CUDA_FORCE_PTX_JIT=1 cannot do this: it applies to cuBLASLt too, whose kernels ship without PTX, and
    # cublasLtCreate fails. $PTX_BIN holds the same tests built with CMAKE_CUDA_ARCHITECTURES=80-virtual instead (our
    # kernels as compute_80 PTX only, compiled by the driver at load; cuBLAS as shipped). Its folder comes first on the
    # library path: built with the kernels in a shared library, its binaries must load that library, not $BIN's.
    PTX_BIN=${PTX_BIN:-build-ptx80-carry}
    export CUDA_CACHE_MAXSIZE=4294967296  # the JIT's cache keeps every kernel once compiled
    for packed in "$PTX_BIN"/*.xz; do
        [[ -e $packed ]] || continue
        xz -dc "$packed" > "$PTX_BIN/$(basename "$packed" .xz)"
        chmod +x "$PTX_BIN/$(basename "$packed" .xz)"
    done
    for t in backend_ops_test delta_net_kernels_test cuda_golden_test cuda_sampler_test; do
        [[ -x $PTX_BIN/$t ]] || continue
        start=$(date +%s)
        PAGODA_CUDA_KERNELS=sm80 LD_LIBRARY_PATH=$PTX_BIN:$LIBS timeout 300 "$PTX_BIN/$t" > "$OUT/arch_ptx_$t.log" 2>&1
        summary+=("compute_80 PTX: $t rc=$? ($(( $(date +%s) - start )) s): $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' \
            "$OUT/arch_ptx_$t.log" | tr '\n' ' ')")
    done
    if [[ -x $PTX_BIN/executor_test ]]; then
        PAGODA_CUDA_KERNELS=sm80 PAGODA_TEST_DEVICE=cuda LD_LIBRARY_PATH=$PTX_BIN:$LIBS timeout 200 \
            "$PTX_BIN/executor_test" --gtest_filter='Golden/EngineRunnerTest.*' > "$OUT/arch_ptx_executor_test.log" 2>&1
        summary+=("compute_80 PTX: executor_test (cuda) rc=$?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' \
            "$OUT/arch_ptx_executor_test.log" | tr '\n' ' ')")
    fi
fi

if want ops && [[ -x $BIN/pagoda_delta_net_bench ]]; then
    # The Gated DeltaNet kernels at Qwen3.5-9B sizes (kernels/cuda/delta_net).
    LD_LIBRARY_PATH=$LIBS timeout 120 "$BIN/pagoda_delta_net_bench" > "$OUT/delta_net_bench.log" 2>&1
    summary+=("delta_net bench rc=$?:")
    while read -r line; do summary+=("  $line"); done < <(tail -12 "$OUT/delta_net_bench.log")
fi
if want ops; then
    # The Qwen3-8B shapes go into the summary; the whole table's times are in op_bench_all.log.
    LD_LIBRARY_PATH=$LIBS timeout 200 "$BIN/pagoda_op_bench" --table qwen3-8b > "$OUT/op_bench.log" 2>&1
    summary+=("op bench rc=$?:")
    while read -r line; do summary+=("  $line"); done < "$OUT/op_bench.log"
    LD_LIBRARY_PATH=$LIBS timeout 200 "$BIN/pagoda_op_bench" --table ops > "$OUT/op_bench_all.log" 2>&1
    # The MoE router and experts at Qwen3-30B-A3B shapes (decode and prefill token counts).
    LD_LIBRARY_PATH=$LIBS timeout 120 "$BIN/pagoda_op_bench" --table qwen3-30b-a3b > "$OUT/op_bench_moe.log" 2>&1
    summary+=("op bench MoE rc=$?:")
    while read -r line; do summary+=("  $line"); done < "$OUT/op_bench_moe.log"
    # The decode attention kernel's other block shapes (warps x pipeline stages; the default is in the table above),
    # and ncu's view of the default; OPS_VARIANTS=0 skips both.
    [[ ${OPS_VARIANTS:-1} == 0 ]] && shapes=() || shapes=(4x3 2x4 8x2)
    for shape in "${shapes[@]}"; do
        PAGODA_DECODE_ATTENTION=$shape LD_LIBRARY_PATH=$LIBS timeout 60 "$BIN/pagoda_op_bench" --table qwen3-8b \
            --filter 'paged_attention decode' > "$OUT/ops_attention_$shape.log" 2>&1
        while read -r line; do summary+=("  $shape: $line"); done < <(grep '^paged_attention' "$OUT/ops_attention_$shape.log")
    done
    # The other prefill attention kernels on the Qwen3-8B prefill shapes (the default kernel's are in the table above).
    variants=()
    [[ ${OPS_VARIANTS:-1} == 0 ]] || read -ra variants <<< "${PREFILL_ATTENTION_VARIANTS-mma}"
    for variant in "${variants[@]}"; do
        PAGODA_PREFILL_ATTENTION=$variant LD_LIBRARY_PATH=$LIBS timeout 60 "$BIN/pagoda_op_bench" --table qwen3-8b \
            --filter 'paged_attention' > "$OUT/ops_prefill_attention_$variant.log" 2>&1
        while read -r line; do summary+=("  prefill $variant: $line"); done < \
            <(grep -E '^paged_attention (prefill|chunk)|^PAGODA_PREFILL_ATTENTION' "$OUT/ops_prefill_attention_$variant.log")
    done
    if [[ ${OPS_VARIANTS:-1} != 0 ]] && command -v ncu > /dev/null; then
        # The decode attention kernel at batch 256: DRAM throughput as a share of the peak, and what bounds it.
        LD_LIBRARY_PATH=$LIBS timeout 200 ncu --kernel-name regex:decode_attention --launch-count 1 \
            --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
            "$BIN/pagoda_op_bench" --table qwen3-8b --filter 'paged_attention decode 256 seqs' \
            > "$OUT/ncu_decode_attention.log" 2>&1
        summary+=("ncu decode attention rc=$?: $(grep -E 'DRAM Throughput|Memory Throughput|Achieved Occupancy|Duration|Stall' \
            "$OUT/ncu_decode_attention.log" | tr -s ' ' | tr '\n' ';')")
    fi
fi
# Correctness at a real shape: our logits on the GPU against transformers' fp32 logits of the checkpoint in $1
# (bench/gpu/hf_qwen3_8b.py saved them beside it), next to transformers' own bf16 deviation.
compare_logits_at() {
    local dir=$1 label=$2 json="$OUT/pagoda_logits_$2.json"
    [[ -f $dir/reference_ids.txt ]] || { summary+=("logits ($label): no reference, see $OUT/hf*.log"); return; }
    # With transformers' hidden states saved, each layer's too (compare_hidden.py: where the runs part).
    local hidden=""
    [[ -f $dir/reference_hidden.npy ]] && hidden=--hidden
    LD_LIBRARY_PATH=$LIBS timeout 120 "$BIN/pagoda" logits --model "$dir" --device cuda --json --last 8 $hidden \
        --ids "$(cat "$dir/reference_ids.txt")" > "$json" 2> "$OUT/pagoda_logits_$label.log"
    summary+=("logits vs transformers fp32 ($label shape): $(python3 bench/gpu/compare_logits.py \
        "$dir/reference_logits.npy" "$json" "$dir/reference_logits_bf16.npy" 2>&1 | tail -1)")
    [[ -n $hidden ]] && python3 bench/gpu/compare_hidden.py "$dir" "$json" > "$OUT/hidden_$label.log" 2>&1
    rm -f "$json"
}
# The AWQ int4 copy of $MODEL, $MODEL-awq (group 128, round to nearest), made once on the GPU.
make_awq_copy() {
    [[ -f $MODEL-awq/config.json ]] && return
    timeout 500 python3 bench/gpu/make_awq_checkpoint.py "$MODEL" "$MODEL-awq" > "$OUT/make_awq.log" 2>&1
    summary+=("make_awq_checkpoint rc=$?: $(tail -1 "$OUT/make_awq.log")")
}
if want golden-drift; then
    # transformers' own bf16 error on each tiny golden model (what cuda_golden_test's bound is derived from).
    timeout 200 python3 bench/gpu/golden_bf16_drift.py tests/golden > "$OUT/golden_drift.log" 2>&1
    summary+=("golden bf16 drift rc=$?:")
    while read -r line; do summary+=("  $line"); done < <(grep '^{' "$OUT/golden_drift.log")
fi
if want model; then
    # SAVE_ONLY=1: the checkpoint alone, no transformers timing or logits check (qwen3.5-27b: its fp32 run would not fit);
    # with FP8_BLOCKS=128 saved as Qwen's FP8 releases are (e4m3 in 128 x 128 blocks; no bf16 copy on disk).
    PYTHONUNBUFFERED=1 timeout 280 python3 bench/gpu/hf_qwen3_8b.py "$MODEL" --shape "$SHAPE" \
        ${LAYERS:+--layers $LAYERS} ${ROUTER_SCALE:+--router-scale $ROUTER_SCALE} \
        $([[ ${SAVE_ONLY:-0} == 1 ]] && echo --save-only) ${FP8_BLOCKS:+--fp8-blocks $FP8_BLOCKS} > "$OUT/hf.log" 2>&1
    if [[ ${SAVE_ONLY:-0} == 1 ]]; then
        summary+=("checkpoint ($SHAPE) made: $(ls "$MODEL" | tr '\n' ' ')")
    else
        summary+=("transformers ($SHAPE): $(grep hf_prefill_ms "$OUT/hf.log" | tail -1)")
        compare_logits_at "$MODEL" "$SHAPE"
    fi
fi
if want model2; then
    # The Qwen2.5-7B shape (q/k/v biases, 7 query heads per KV head), logits only.
    MODEL2=${MODEL2:-/tmp/qwen2.5-7b-random}
    PYTHONUNBUFFERED=1 timeout 280 python3 bench/gpu/hf_qwen3_8b.py "$MODEL2" --shape qwen2.5-7b --reference-only \
        > "$OUT/hf_qwen2.log" 2>&1
    compare_logits_at "$MODEL2" Qwen2.5-7B
fi
if want sanitize; then
    # compute-sanitizer: memcheck over every op test (SANITIZE_OPS: a gtest filter, e.g. the Gated DeltaNet cases),
    # racecheck (shared memory) over the attention and prologue kernels, synccheck over the same; then the three over
    # the Gated DeltaNet kernels' own tests (their 1,000- and 4,097-token cases left to memcheck: racecheck is slow).
    sanitize() {
        local tool=$1 name=$2 filter=$3
        LD_LIBRARY_PATH=$LIBS timeout "${SANITIZE_TIMEOUT:-400}" compute-sanitizer --tool "$tool" --error-exitcode 9 \
            "$BIN/$name" --gtest_filter="$filter" > "$OUT/sanitize_${tool}_$name.log" 2>&1
        summary+=("compute-sanitizer $tool $name rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED) ' \
            "$OUT/sanitize_${tool}_$name.log" | tr '\n' ' ')")
    }
    sanitize memcheck backend_ops_test "${SANITIZE_OPS:-*}"
    sanitize racecheck backend_ops_test '*paged_attention*:*qk_norm*'
    sanitize synccheck backend_ops_test '*paged_attention*:*qk_norm*'
    if [[ -x $BIN/delta_net_kernels_test ]]; then
        sanitize memcheck delta_net_kernels_test '*'
        sanitize racecheck delta_net_kernels_test '-*4097*:*1000*'
        sanitize synccheck delta_net_kernels_test '-*4097*:*1000*'
    fi
fi
# BENCH_BF16=0 skips the bf16 runs (a QUANT run whose bf16 baseline an earlier call of the same visit measured),
# PDL_AB=0 the run with programmatic dependent launch off; HANDOFF_AB=1 adds four prefill-only runs, the bf16 handoff
# to the next GEMM (CudaOps::hand_off_bf16) on, off, on, off (PAGODA_BF16_HANDOFF); PREFILL_AB=1 four more, the
# mma.sync prefill attention kernel (PAGODA_PREFILL_ATTENTION=mma) and the default (Hopper's wgmma one) in turn.
if want bench && [[ ${BENCH_BF16:-1} == 1 ]]; then
    LD_LIBRARY_PATH=$LIBS timeout 150 "$BIN/pagoda_cuda_bench" --model "$MODEL" --prefill 2048 --context 512 --decode 128 \
        > "$OUT/pagoda_bench.log" 2>&1
    summary+=("pagoda: $(tail -1 "$OUT/pagoda_bench.log")")
    # Beside the checkpoint, for the throughput part's bound (offline_bound.py): this GPU's bandwidth and peak.
    cp "$OUT/pagoda_bench.log" "/tmp/$SHAPE-bench.log"
    # The same binary with programmatic dependent launch off (kernels/cuda/common.cuh): what it gains, same call.
    if [[ ${PDL_AB:-1} == 1 ]]; then
        PAGODA_CUDA_PDL=0 LD_LIBRARY_PATH=$LIBS timeout 150 "$BIN/pagoda_cuda_bench" --model "$MODEL" --prefill 2048 \
            --context 512 --decode 128 > "$OUT/pagoda_bench_pdl_off.log" 2>&1
        summary+=("pagoda, PDL off: $(tail -1 "$OUT/pagoda_bench_pdl_off.log")")
    fi
    if [[ ${HANDOFF_AB:-0} == 1 ]]; then
        for handoff in 1 0 1 0; do
            log=$OUT/pagoda_bench_handoff_$handoff.log
            PAGODA_BF16_HANDOFF=$handoff LD_LIBRARY_PATH=$LIBS timeout 150 "$BIN/pagoda_cuda_bench" --model "$MODEL" \
                --prefill 2048 --context 16 --decode 4 >> "$log" 2>&1
            summary+=("pagoda, PAGODA_BF16_HANDOFF=$handoff: $(tail -1 "$log" | grep -oE '"prefill_(ms|mfu)": [0-9.]+' | tr '\n' ' ')")
        done
    fi
    if [[ ${PREFILL_AB:-0} == 1 ]]; then
        for variant in mma default mma default; do
            log=$OUT/pagoda_bench_prefill_attention_$variant.log
            PAGODA_PREFILL_ATTENTION=$variant LD_LIBRARY_PATH=$LIBS timeout 150 "$BIN/pagoda_cuda_bench" --model "$MODEL" \
                --prefill 2048 --context 16 --decode 4 >> "$log" 2>&1
            summary+=("pagoda, PAGODA_PREFILL_ATTENTION=$variant: $(tail -1 "$log" | grep -oE '"prefill_(ms|mfu)": [0-9.]+' | tr '\n' ' ')")
        done
    fi
fi
if want bench; then
    if [[ -n ${LONG_PREFILL:-} ]]; then  # a long prompt too (LONG_PREFILL=16384); the peer part runs it as well
        LD_LIBRARY_PATH=$LIBS timeout 200 "$BIN/pagoda_cuda_bench" --model "$MODEL" --prefill "$LONG_PREFILL" \
            --context 16 --decode 4 > "$OUT/pagoda_bench_long.log" 2>&1
        summary+=("pagoda, prefill $LONG_PREFILL: $(tail -1 "$OUT/pagoda_bench_long.log" | grep -oE '"prefill_(ms|mfu)": [0-9.]+' | tr '\n' ' ')")
    fi
    if grep -q '"num_experts"' "$MODEL/config.json"; then  # MoE: the grouped passes at batch 1 instead of the pair ones
        PAGODA_MOE_PAIR_PASSES=0 LD_LIBRARY_PATH=$LIBS timeout 150 "$BIN/pagoda_cuda_bench" --model "$MODEL" \
            --prefill 2048 --context 512 --decode 128 > "$OUT/pagoda_bench_grouped.log" 2>&1
        summary+=("pagoda, grouped MoE passes at batch 1: $(tail -1 "$OUT/pagoda_bench_grouped.log")")
    fi
    if [[ ${QUANT:-} == awq ]]; then  # an AWQ int4 copy of the same checkpoint (made once), beside the bf16 run
        make_awq_copy
        LD_LIBRARY_PATH=$LIBS timeout 150 "$BIN/pagoda_cuda_bench" --model "$MODEL-awq" --prefill 2048 --context 512 \
            --decode 128 > "$OUT/pagoda_bench_awq.log" 2>&1
        summary+=("pagoda, AWQ int4 ($MODEL-awq): $(tail -1 "$OUT/pagoda_bench_awq.log")")
    elif [[ -n ${QUANT:-} ]]; then  # the same checkpoint quantized at load (QUANT=fp8), beside the bf16 run
        LD_LIBRARY_PATH=$LIBS timeout 150 "$BIN/pagoda_cuda_bench" --model "$MODEL" --prefill 2048 --context 512 \
            --decode 128 --quantization "$QUANT" > "$OUT/pagoda_bench_$QUANT.log" 2>&1
        summary+=("pagoda, --quantization $QUANT: $(tail -1 "$OUT/pagoda_bench_$QUANT.log")")
        if [[ $QUANT == fp8 ]]; then  # W8A8: the inputs rounded to fp8 per token, cuBLASLt's fp8 GEMM on Hopper
            LD_LIBRARY_PATH=$LIBS timeout 150 "$BIN/pagoda_cuda_bench" --model "$MODEL" --prefill 2048 --context 512 \
                --decode 128 --quantization fp8 --fp8-activations 1 > "$OUT/pagoda_bench_w8a8.log" 2>&1
            summary+=("pagoda, --quantization fp8 --fp8-activations: $(tail -1 "$OUT/pagoda_bench_w8a8.log")")
        fi
    fi
fi
if want kernels && command -v ncu > /dev/null; then
    # Each kernel of a short run (prefill 16, 8 decode steps, eager and replayed) alone under ncu: where a step's
    # GPU time goes kernel by kernel (ncu serialises them, so launch boundaries and PDL overlap are not in it).
    LD_LIBRARY_PATH=$LIBS timeout 300 ncu --graph-profiling node --metrics gpu__time_duration.sum --csv \
        "$BIN/pagoda_cuda_bench" --model "$MODEL" --prefill 16 --context 512 --decode 8 > "$OUT/ncu_kernels.csv" 2>&1
    summary+=("ncu kernels rc=$?:")
    python3 bench/gpu/kernel_times.py "$OUT/ncu_kernels.csv" > "$OUT/kernel_times.log" 2>&1
    while read -r line; do summary+=("  $line"); done < <(head -40 "$OUT/kernel_times.log")
fi
if want timeline && [[ -f $BIN/libpagoda_kernel_trace.so ]]; then
    # Where programmatic dependent launch overlaps neighbours, a kernel's time alone (the kernels part) overstates its
    # share of a step: this reads the replays themselves, from a CUPTI trace (the GPU machine's nsys cannot import
    # its own reports: kernel_trace.cpp).
    CUDA_INJECTION64_PATH=$BIN/libpagoda_kernel_trace.so PAGODA_KERNEL_TRACE=$OUT/timeline.tsv LD_LIBRARY_PATH=$LIBS \
        timeout 200 "$BIN/pagoda_cuda_bench" --model "$MODEL" --prefill 16 --context 512 --decode 32 \
        > "$OUT/timeline.log" 2>&1
    summary+=("graph timeline rc=$?:")
    while read -r line; do summary+=("  $line"); done < <(python3 bench/gpu/graph_timeline.py "$OUT/timeline.tsv" 2>&1 |
        head -60)
    xz -f "$OUT/timeline.tsv"
fi
if want ops-ab; then
    summary+=("op bench A/B, '${AB_FILTER:-paged_attention decode}' cases, as built and with ${AB_ENV:-PAGODA_FP8_DECODE=widened}:")
    for round in 1 2; do
        for setting in "" "${AB_ENV:-PAGODA_FP8_DECODE=widened}"; do
            # shellcheck disable=SC2086  # the setting is one VAR=VALUE word, or none
            env $setting LD_LIBRARY_PATH="$LIBS" timeout 60 "$BIN/pagoda_op_bench" --table qwen3-8b \
                --filter "${AB_FILTER:-paged_attention decode}" > "$OUT/ops_ab.log" 2>&1
            while read -r line; do summary+=("  ${setting:-as built} ($round): $line"); done < \
                <(grep -F "${AB_FILTER:-paged_attention decode}" "$OUT/ops_ab.log")
        done
    done
fi
if want ab; then
    NEW=$BIN OLD=$OLD OUT=$OUT/ab TESTS=" " OPS=${AB_OPS:-} OPS_ARGS=--cold SHAPES=$MODEL BENCH=${AB_BENCH:-} \
        BUDGET=${AB_BUDGET:-300} timeout 500 bash bench/gpu/ab_check.sh > "$OUT/ab.log" 2>&1
    rc=$?
    summary+=("ab_check.sh against $OLD ($(cat "$OLD/REVISION" 2> /dev/null || echo "revision not recorded")) rc=$rc:")
    while read -r line; do summary+=("  $line"); done < "$OUT/ab/summary.txt"
fi
if want gemv; then
    NEW=$BIN OUT=$OUT/gemv MODEL=$MODEL PARTS=${GEMV_PARTS:-tests,ops} OPS_FILTERS=${OPS_FILTERS:-T=1 N=} \
        timeout 500 bash bench/gpu/gemv_experiments.sh > "$OUT/gemv.log" 2>&1
    summary+=("gemv_experiments.sh (${GEMV_PARTS:-tests,ops}; ${VARIANTS:-its default variants}) rc=$?:")
    while read -r line; do summary+=("  $line"); done < "$OUT/gemv/summary.txt"
fi
if want opsprof && command -v ncu > /dev/null; then
    LD_LIBRARY_PATH=$LIBS timeout 300 ncu -c "${NCU_COUNT:-40}" -k "regex:${NCU_KERNELS:-lora}" --section SpeedOfLight \
        --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
        --section ComputeWorkloadAnalysis --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
        "$BIN/pagoda_op_bench" --table qwen3-8b --filter "${OPS_FILTER:-lora}" > "$OUT/ncu_ops.log" 2>&1
    summary+=("ncu over the op bench's '${OPS_FILTER:-lora}' cases rc=$? (all of it in ncu_ops.log):")
    keep='Context [0-9]+, Stream|Duration|DRAM Throughput|L2 Cache Throughput|Achieved Occupancy|Registers Per Thr|Stall'
    keep+='|Compute \(SM\) Throughput|Issue Slots Busy|Executed Ipc Active|SM Active Cycles|Elapsed Cycles'
    keep+='|stalled_[a-z_]+_per_issue_active'  # warps stalled a issued instruction, by reason (those of 0.05 or more)
    while read -r line; do summary+=("  $line"); done < <(grep -E "$keep" "$OUT/ncu_ops.log" |
        awk '!/stalled/ || $NF + 0 >= 0.05' | tr -s ' ' | head -120)
fi
if want arch && [[ -f $MODEL/config.json && -x ${PTX_BIN:-build-ptx80-carry}/pagoda_cuda_bench ]]; then
    # The A100 build's code (compute_80 PTX, sm80 tiles) at the real shape on this GPU, as the bench part runs it.
    PAGODA_CUDA_KERNELS=sm80 CUDA_CACHE_MAXSIZE=4294967296 LD_LIBRARY_PATH=${PTX_BIN:-build-ptx80-carry}:$LIBS \
        timeout 200 "${PTX_BIN:-build-ptx80-carry}/pagoda_cuda_bench" --model "$MODEL" --prefill 2048 --context 512 --decode 128 \
        > "$OUT/arch_ptx_bench.log" 2>&1
    summary+=("compute_80 PTX, sm80 tiles: $(tail -1 "$OUT/arch_ptx_bench.log")")
fi
# BENCH_EXTRAS=0 keeps the bench part to the speed runs above (no per-op profiles, nsys or serve probe).
if want bench && [[ ${BENCH_EXTRAS:-1} == 1 ]]; then
    # Per-op GPU time: prefill steps (2,048 tokens), then decode steps at batch 1 (512-token context).
    # (pagoda_cuda_bench needs 4 decode steps or more; the prefill steps include the first, which tunes the GEMMs.)
    profiles=("prefill 2048 --context 16 --decode 4" "decode 16 --context 512 --decode 64")
    for what in "${profiles[@]}"; do
        set -- $what
        PAGODA_CUDA_PROFILE=1 LD_LIBRARY_PATH=$LIBS timeout 150 "$BIN/pagoda_cuda_bench" --model "$MODEL" \
            --prefill "${@:2}" > "$OUT/profile_$1.log" 2>&1
        summary+=("profile ($1): $(grep -E 'steps: GPU' "$OUT/profile_$1.log" | tr '\n' ' ')")
    done
fi
if want bench && [[ ${BENCH_EXTRAS:-1} == 1 ]]; then
    if [[ ${NSYS:-1} == 1 ]] && command -v nsys > /dev/null; then
        LD_LIBRARY_PATH=$LIBS timeout 120 nsys profile -t cuda -o "$OUT/decode" --force-overwrite true --stats=true \
            "$BIN/pagoda_cuda_bench" --model "$MODEL" --prefill 16 --context 512 --decode 32 > "$OUT/nsys.log" 2>&1
        summary+=("nsys: rc=$? (kernel table in nsys.log)")
    fi
    if [[ -x $BIN/pagoda && -f $BIN/tok/vocab.json ]]; then
        cp "$BIN"/tok/* "$MODEL"/
        start=$(date +%s.%N)
        # No size flags: the newcomer's start, with the sizes chosen from the GPU and the model (said in the log).
        LD_LIBRARY_PATH=$LIBS "$BIN/pagoda" serve "$MODEL" --device cuda --port 8011 > "$OUT/serve.log" 2>&1 &
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
        summary+=("serve with no flags: $(grep -E 'engine sizes|KV pool|max_model_len [0-9]+ \(was' "$OUT/serve.log" | tr '\n' ' ')")
    fi
fi

# Offline throughput through the server; its KV pool and every step's per-op time are in serve_*.log.
# serve_and LOG PORT EXTRA_ENV COMMAND...: starts pagoda serve (with $SERVE_EXTRA's flags), waits for /health, runs
# COMMAND, stops it.
serve_and() {
    local log=$1 port=$2 env=$3
    shift 3
    cp "$BIN"/tok/* "$MODEL"/
    # The server appends too (>>): the metrics appended below must not be overwritten by its last messages.
    : > "$log"
    env $env LD_LIBRARY_PATH=$LIBS "$BIN/pagoda" serve "$MODEL" --device cuda --port "$port" \
        ${SERVE_SIZES---max-model-len 4096 --max-num-seqs 256} --shutdown-timeout 5 ${SERVE_EXTRA:-} >> "$log" 2>&1 &
    local pid=$!
    for _ in $(seq 600); do
        python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=1)" \
            2> /dev/null && break
        kill -0 $pid 2> /dev/null || break  # it exited: no use waiting
        sleep 0.1
    done
    if ! kill -0 $pid 2> /dev/null; then
        wait $pid
        summary+=("pagoda serve exited with $? before answering /health: $(tail -3 "$log" | tr '\n' ' ')")
        return 1
    fi
    "$@"
    python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$port/metrics').read().decode())" \
        | grep -E '^pagoda:(num_preemptions|generation_tokens|prompt_tokens|prefix_cache|engine_steps)' >> "$log"
    kill -TERM $pid
    wait $pid
}
# llama-server on the peer part's GGUF, for the serving loads: LOG, parallel slots, tokens a slot, then the client.
llama_server_ready() { [[ -x $LLAMA/build/bin/llama-server && -f /tmp/$SHAPE.gguf ]]; }
llama_serve_and() {
    local log=$1 slots=$2 per_slot=$3
    shift 3
    $LLAMA/build/bin/llama-server -m "/tmp/$SHAPE.gguf" -ngl 999 -fa on -c $((slots * per_slot)) -np "$slots" \
        --port 8016 > "$log" 2>&1 &
    local pid=$!
    for _ in $(seq 1200); do  # 503 while it loads: urlopen raises until it answers 200
        python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8016/health', timeout=1)" \
            2> /dev/null && break
        sleep 0.1
    done
    "$@"
    kill -TERM $pid
    wait $pid
}
if want qaccuracy; then
    # Issue 18: each quantized variant's logits on the GPU against transformers' fp32 run of the same quantized weights
    # (the verdict), and what the quantization costs against the bf16 model (KL, top-1), pagoda's beside transformers'.
    make_awq_copy
    for variant in awq fp8 w8a8; do
        if [[ $variant == awq ]]; then
            qdir=$MODEL-awq qargs=(--awq "$MODEL-awq") pargs=()
        elif [[ $variant == fp8 ]]; then
            qdir=$MODEL qargs=(--fp8-channel) pargs=(--quantization fp8)
        else  # W8A8: the inputs rounded to fp8 per token too
            qdir=$MODEL qargs=(--fp8-channel --fp8-activations) pargs=(--quantization fp8 --fp8-activations)
        fi
        timeout 300 python3 bench/gpu/quant_reference.py "$MODEL" "$OUT/ref_$variant.npy" "${qargs[@]}" \
            > "$OUT/quant_reference_$variant.log" 2>&1
        # transformers' bf16 run of the same quantized model: the bound pagoda's deviation is judged by.
        timeout 300 python3 bench/gpu/quant_reference.py "$MODEL" "$OUT/ref_${variant}_bf16.npy" "${qargs[@]}" \
            --dtype bf16 > "$OUT/quant_reference_${variant}_bf16.log" 2>&1
        LD_LIBRARY_PATH=$LIBS timeout 120 "$BIN/pagoda" logits --model "$qdir" --device cuda --json --last 8 \
            "${pargs[@]}" --ids "$(cat "$MODEL/reference_ids.txt")" > "$OUT/logits_$variant.json" \
            2> "$OUT/pagoda_logits_$variant.log"
        summary+=("quantized ($variant) vs transformers: $(tail -1 "$OUT/quant_reference_$variant.log" | cut -c1-160);\
 $(python3 bench/gpu/compare_quantized.py "$MODEL/reference_logits.npy" "$OUT/ref_$variant.npy" \
            "$OUT/logits_$variant.json" "$MODEL/reference_logits_bf16.npy" "$OUT/ref_${variant}_bf16.npy" 2>&1 | tail -1)")
        rm -f "$OUT/logits_$variant.json" "$OUT/ref_$variant.npy" "$OUT/ref_${variant}_bf16.npy"
    done
fi
if want throughput; then
    # THROUGHPUT_N requests (256); SERVE_SIZES="" serves with the sizes chosen from the GPU instead of 256 sequences.
    n=${THROUGHPUT_N:-256}
    serve_and "$OUT/serve_throughput.log" 8012 PAGODA_QUIET=1 \
        python3 bench/gpu/offline_throughput.py --url http://127.0.0.1:8012 --model "$MODEL" \
        -n "$n" --input 1000 --output 1000 --deadline "${THROUGHPUT_DEADLINE:-200}" > "$OUT/throughput.log" 2>&1
    summary+=("offline throughput $n x (1000 in, 1000 out), serve ${SERVE_SIZES---max-model-len 4096 --max-num-seqs 256}: $(tail -1 "$OUT/throughput.log")")
    summary+=("  $(grep -E 'engine sizes|KV pool|num_preemptions' "$OUT/serve_throughput.log" | tr '\n' ' ')")
    # Against what the run must move at least (issue 17 asks 90% of it), with the bench part's measured bandwidth.
    steps=$(awk '/^pagoda:engine_steps_total/ {print $2}' "$OUT/serve_throughput.log")
    if [[ -f /tmp/$SHAPE-bench.log && -n $steps ]]; then
        kv=bf16
        [[ ${SERVE_EXTRA:-} == *kv-cache-dtype*fp8* ]] && kv=fp8
        summary+=("  bound: $(python3 bench/gpu/offline_bound.py --config "$MODEL/config.json" --bench \
            "/tmp/$SHAPE-bench.log" --run "$OUT/throughput.log" --steps "$steps" --kv-dtype $kv 2>&1 | tail -1)")
    fi
    if [[ ${THROUGHPUT_PEER:-0} == 1 ]] && llama_server_ready; then  # the same load on llama-server (peer part's GGUF)
        llama_serve_and "$OUT/llama_server_throughput.log" "$n" 2048 python3 bench/gpu/offline_throughput.py \
            --url http://127.0.0.1:8016 --model "$MODEL" -n "$n" --input 1000 --output 1000 \
            --deadline "${THROUGHPUT_DEADLINE:-200}" > "$OUT/throughput_llama.log" 2>&1
        summary+=("llama-server, offline $n x (1000 in, 1000 out): $(tail -1 "$OUT/throughput_llama.log")")
    elif [[ ${THROUGHPUT_PEER:-0} == 1 ]]; then
        summary+=("llama-server, offline $n: not run: no llama-server build or no /tmp/$SHAPE.gguf (run peer first)")
    fi
fi
if want async; then
    # Async scheduling A/B (issue 17): the same loads through one server without and one with --async-scheduling:
    # ASYNC_N (256) x ASYNC_INPUT (1,000) in / ASYNC_OUTPUT (300) out offline, then one stream of 100 in / 256 out.
    for mode in sync async; do
        extra=""
        [[ $mode == async ]] && extra=--async-scheduling
        SERVE_EXTRA="${SERVE_EXTRA:-} $extra" serve_and "$OUT/serve_async_$mode.log" 8016 PAGODA_QUIET=1 \
            bash -c "python3 bench/gpu/offline_throughput.py --url http://127.0.0.1:8016 --model '$MODEL' \
                -n ${ASYNC_N:-256} --input ${ASYNC_INPUT:-1000} --output ${ASYNC_OUTPUT:-300} --deadline 150 \
                > '$OUT/async_$mode.log' 2>&1;
                python3 bench/gpu/offline_throughput.py --url http://127.0.0.1:8016 --model '$MODEL' -n 1 \
                --input 100 --output 256 --stream > '$OUT/async_${mode}_b1.log' 2>&1"
        summary+=("$mode: ${ASYNC_N:-256} x (${ASYNC_INPUT:-1000} in, ${ASYNC_OUTPUT:-300} out): $(tail -1 "$OUT/async_$mode.log"); \
batch 1: $(tail -1 "$OUT/async_${mode}_b1.log"); $(grep -E '^pagoda:engine_steps' "$OUT/serve_async_$mode.log" | tr '\n' ' ')")
    done
fi
if want profile; then
    # Eager steps: a replayed CUDA graph would show as one op. SERVE_EXTRA's flags too (the fp8 KV cache's profile).
    SERVE_EXTRA="--enforce-eager ${SERVE_EXTRA:-}" serve_and "$OUT/serve_profile.log" 8013 PAGODA_CUDA_PROFILE=1 \
        python3 bench/gpu/offline_throughput.py --url http://127.0.0.1:8013 --model "$MODEL" \
        -n "${PROFILE_N:-256}" --input 1000 --output 300 --deadline 90 > "$OUT/throughput_profiled.log" 2>&1
    summary+=("profiled (${PROFILE_N:-256} x 1000 in, 300 out): $(tail -1 "$OUT/throughput_profiled.log")")
    summary+=("  $(grep -E 'steps: GPU' "$OUT/serve_profile.log" | tr '\n' ' ')")
fi

if want prefix; then
    # A real-shape engine run with prefix-cache hits (64 requests sharing a 512-token prefix, 1,000 in, 200 out,
    # greedy), then the same prompts with the cache off. A hit's short prefill and a miss's long one round
    # differently in bf16, so completions may part at near-ties: compare_completions.py reports where they part
    # and at what margin.
    for cache in on off; do
        extra=""
        [[ $cache == off ]] && extra=--no-enable-prefix-caching
        SERVE_EXTRA=$extra serve_and "$OUT/serve_prefix_$cache.log" 8014 PAGODA_QUIET=1 \
            python3 bench/gpu/offline_throughput.py --url http://127.0.0.1:8014 --model "$MODEL" -n 64 --input 1000 \
            --output 200 --shared-prefix 512 --save "$OUT/prefix_$cache.json" > "$OUT/prefix_$cache.log" 2>&1
    done
    summary+=("prefix-cache run: $(tail -1 "$OUT/prefix_on.log") $(grep -E 'prefix_cache_hits' "$OUT/serve_prefix_on.log")")
    summary+=("cache on vs off: $(python3 bench/gpu/compare_completions.py "$OUT/prefix_on.json" \
        "$OUT/prefix_off.json" 2>&1 | tail -1)")
fi

# llama.cpp, the peer (GPU.md): built here from the source carried in build-llama-carry (peer-build starts the build in
# the background, so that it overlaps the model part; peer waits for it), then the same checkpoint as GGUF, llama-bench
# at batch 1 (tg128) and a 2,048-token prefill (pp2048).
if want peer-build && [[ ! -x $LLAMA/build/bin/llama-bench ]]; then
    tar xJf build-llama-carry/llama.cpp.tar.xz -C /tmp
    rm -f /tmp/llama_build.done  # a failed build's, which would end every wait for this one at once
    # In its own session (setsid): the build goes on after this script, and after the device call, ends.
    setsid -f bash -c "cd $LLAMA && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES=90a -DLLAMA_CURL=OFF -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF \
        && nice -n 19 ninja -C build llama-server llama-bench llama-quantize; echo \"exit \$?\" > /tmp/llama_build.done" \
        > /tmp/llama_build.log 2>&1
fi
if want peer; then
    wait_for_llama_build "$LLAMA/build/bin/llama-bench"
    cp /tmp/llama_build.log "$OUT/" 2> /dev/null
    GGUF=/tmp/$SHAPE.gguf
    # The converter names the pre-tokenizer from the tokenizer files: the real Qwen ones (the serve probe copies them
    # too; with BENCH_EXTRAS=0 nothing else does).
    [[ -f $BIN/tok/vocab.json && ! -f $MODEL/vocab.json ]] && cp "$BIN"/tok/* "$MODEL"/
    # Without them the converter stops with "BPE pre-tokenizer was not recognized" and llama-bench finds no GGUF
    # (session 44: a call that carried no build-serve); say so instead of timing nothing.
    if [[ ! -f $GGUF && ! -f $MODEL/vocab.json ]]; then
        summary+=("llama.cpp ($SHAPE): not run: no tokenizer files in $MODEL or $BIN/tok (carry build-serve)")
    else
        [[ -f $GGUF ]] || (cd $LLAMA && PYTHONPATH=gguf-py timeout 300 python3 convert_hf_to_gguf.py "$MODEL" \
            --outtype bf16 --outfile "$GGUF" $([[ $SHAPE == qwen3.5* || $SHAPE == qwen3-next* ]] && echo --no-mtp)) \
            > "$OUT/llama_convert.log" 2>&1
        timeout 300 $LLAMA/build/bin/llama-bench -m "$GGUF" -ngl 99 -fa 1 -p 2048${LONG_PREFILL:+,$LONG_PREFILL} -n 128 \
            -o json > "$OUT/llama_bench.json" 2> "$OUT/llama_bench.log"
        summary+=("llama.cpp ($SHAPE) rc=$?: $(python3 bench/gpu/llama_bench_summary.py "$OUT/llama_bench.json" 2>&1 |
            tail -c 300)")
        if [[ -n ${PEER_QUANT:-} ]]; then  # the same GGUF quantized by llama.cpp (PEER_QUANT=Q4_K_M: issue 18's int4 peer)
            timeout 300 $LLAMA/build/bin/llama-quantize "$GGUF" "$GGUF.$PEER_QUANT" "$PEER_QUANT" \
                > "$OUT/llama_quantize.log" 2>&1
            timeout 300 $LLAMA/build/bin/llama-bench -m "$GGUF.$PEER_QUANT" -ngl 99 -fa 1 -p 2048 -n 128 -o json \
                > "$OUT/llama_bench_quant.json" 2> "$OUT/llama_bench_quant.log"
            summary+=("llama.cpp $PEER_QUANT rc=$?: $(python3 bench/gpu/llama_bench_summary.py \
                "$OUT/llama_bench_quant.json" 2>&1 | tail -c 300)")
        fi
    fi
fi

if want lora; then
    LORAS=/tmp/lora-adapters
    [[ -f $LORAS/modules.txt ]] || python3 bench/gpu/make_lora_adapters.py "$MODEL" "$LORAS" --count "${LORA_COUNT:-100}" \
        > "$OUT/lora_make.log" 2>&1
    one=(python3 bench/gpu/offline_throughput.py -n 1 --input 1000 --output 256 --stream)
    many=(python3 bench/gpu/offline_throughput.py -n 64 --input 1000 --output 256 --stream --deadline 240)
    # Both servers first serve the same short load of other prompts (--seed 1) on the models of their 64 streams, so
    # that neither 64-stream run pays for first uses (shapes, the 8 adapters' installs: the cold-adapter requests
    # measure those) and neither finds its prompts cached (LORA_WARMUP=0: no warm-up, as before session 28).
    warm_up() {
        [[ ${LORA_WARMUP:-1} == 1 ]] || return 0
        python3 bench/gpu/offline_throughput.py -n 16 --input 1000 --output 16 --stream --seed 1 --url "$1" \
            --model "$2" >> "$OUT/lora_warmup.log" 2>&1
    }
    # The base model on a server without LoRA: the load the adapters are compared with.
    base_runs() {
        warm_up http://127.0.0.1:8017 "$MODEL"
        "${many[@]}" --url http://127.0.0.1:8017 --model "$MODEL" > "$OUT/lora_off_64.log" 2>&1
        "${one[@]}" --url http://127.0.0.1:8017 --model "$MODEL" > "$OUT/lora_off_1.log" 2>&1
    }
    SERVE_SIZES="" serve_and "$OUT/serve_lora_off.log" 8017 PAGODA_QUIET=1 base_runs
    eight=$(head -8 "$LORAS/modules.txt" | cut -d= -f1 | paste -sd,)
    lora_runs() {
        [[ ${LORA_COLD:-1} == 1 ]] && lora_cold_runs
        warm_up http://127.0.0.1:8018 "$eight"
        "${many[@]}" --url http://127.0.0.1:8018 --model "$eight" > "$OUT/lora_on_64.log" 2>&1
        "${one[@]}" --url http://127.0.0.1:8018 --model "${eight%%,*}" > "$OUT/lora_on_1.log" 2>&1
        "${one[@]}" --url http://127.0.0.1:8018 --model "$MODEL" > "$OUT/lora_on_base_1.log" 2>&1
    }
    lora_cold_runs() {
        # A cold adapter (in host memory, in no slot yet): its first short request, then the same again; first the
        # same request on the base model, so that the first one does not also pay for the shapes' first use (cuBLASLt's
        # algorithm choice): the difference is the adapter's install.
        python3 bench/gpu/offline_throughput.py -n 1 --input 16 --output 1 --stream --url http://127.0.0.1:8018 \
            --model "$MODEL" > "$OUT/lora_cold_0.log" 2>&1
        for i in 1 2; do
            python3 bench/gpu/offline_throughput.py -n 1 --input 16 --output 1 --stream --url http://127.0.0.1:8018 \
                --model "$(tail -1 "$LORAS/modules.txt" | cut -d= -f1)" > "$OUT/lora_cold_$i.log" 2>&1
        done
        # Cold adapters under load: 16 streams of one adapter decode while 8 adapters in no slot get a short request
        # each, one after another. The streams' longest gap between two tokens says whether an adapter's arrival
        # stopped them (LORA_ENV=PAGODA_LORA_PAGING=0: the steps install adapters themselves).
        python3 bench/gpu/offline_throughput.py -n 16 --input 1000 --output 1024 --stream --url http://127.0.0.1:8018 \
            --model "${eight%%,*}" > "$OUT/lora_load_16.log" 2>&1 &
        local streams=$!
        sleep 8
        for i in $(seq 21 28); do
            python3 bench/gpu/offline_throughput.py -n 1 --input 16 --output 1 --stream --url http://127.0.0.1:8018 \
                --model "$(sed -n "${i}p" "$LORAS/modules.txt" | cut -d= -f1)" >> "$OUT/lora_cold_load.log" 2>&1
        done
        wait "$streams"
    }
    n=$(wc -l < "$LORAS/modules.txt")
    SERVE_SIZES="" SERVE_EXTRA="--enable-lora --max-loras 8 --max-lora-rank 16 --max-cpu-loras $n --lora-modules \
        $(tr '\n' ' ' < "$LORAS/modules.txt")" serve_and "$OUT/serve_lora_on.log" 8018 "PAGODA_QUIET=1 ${LORA_ENV:-}" lora_runs
    summary+=("LoRA: $(tail -1 "$OUT/lora_make.log" 2> /dev/null | cut -c1-80) $(grep -E 'LoRA: |KV cache' \
        "$OUT/serve_lora_on.log" | tr '\n' ' ' | cut -c1-400)")
    summary+=("  server without LoRA, KV: $(grep -E 'KV cache' "$OUT/serve_lora_off.log" | tr '\n' ' ' | cut -c1-200)")
    summary+=("  base model, then a cold adapter's first / second request: $(for i in 0 1 2; do
        tail -1 "$OUT/lora_cold_$i.log" | grep -o '"ttft_ms_median": [0-9.]*'; done | tr '\n' ' ')")
    summary+=("  8 cold adapters' TTFT while 16 streams decode: $(grep -o '"ttft_ms_median": [0-9.]*' \
        "$OUT/lora_cold_load.log" | cut -d' ' -f2 | paste -sd' ') ms; the streams: $(tail -1 "$OUT/lora_load_16.log")")
    for f in lora_off_64 lora_on_64 lora_off_1 lora_on_1 lora_on_base_1; do
        summary+=("  $f: $(tail -1 "$OUT/$f.log")")
    done
    if [[ ${LORA_PROFILE:-0} == 1 ]]; then
        # Where the 64 streams' adapter cost goes: the same load on an eager, profiled server (a replayed graph shows
        # as one op); the per-op table of its decode steps (`linear (lora)` against the rest) goes into the summary.
        SERVE_SIZES="" SERVE_EXTRA="--enforce-eager --enable-lora --max-loras 8 --max-lora-rank 16 --max-cpu-loras $n \
            --lora-modules $(tr '\n' ' ' < "$LORAS/modules.txt")" serve_and "$OUT/serve_lora_profile.log" 8019 \
            "PAGODA_CUDA_PROFILE=1 ${LORA_ENV:-}" "${many[@]}" --url http://127.0.0.1:8019 --model "$eight" > "$OUT/lora_profile_64.log" 2>&1
        summary+=("  profiled (eager) 64 streams over 8 adapters: $(tail -1 "$OUT/lora_profile_64.log")")
        while read -r line; do summary+=("    $line"); done < <(grep -A14 'decode steps:' "$OUT/serve_lora_profile.log" | tail -15)
    fi
fi
if want streams; then
    n=${STREAMS:-64}
    load=(python3 bench/gpu/offline_throughput.py --model "$MODEL" -n "$n" --input 1000 --output 256 --stream
        --deadline 240)
    SERVE_SIZES="" serve_and "$OUT/serve_streams.log" 8015 "PAGODA_QUIET=1 ${STREAMS_ENV:-}" "${load[@]}" \
        --url http://127.0.0.1:8015 > "$OUT/streams_pagoda.log" 2>&1
    summary+=("pagoda serve ${STREAMS_ENV:-}, $n streams x (1000 in, 256 out): $(tail -1 "$OUT/streams_pagoda.log")")
    if llama_server_ready; then
        # n slots of 1,280 tokens each (llama-server splits -c over its -np slots).
        llama_serve_and "$OUT/llama_server.log" "$n" 1280 "${load[@]}" --url http://127.0.0.1:8016 \
            > "$OUT/streams_llama.log" 2>&1
        summary+=("llama-server, $n streams x (1000 in, 256 out): $(tail -1 "$OUT/streams_llama.log")")
    elif [[ -x $LLAMA/build/bin/llama-server ]]; then
        # Session 45's plan ran streams before peer, and this part skipped llama-server without a word.
        summary+=("llama-server, $n streams: not run: no /tmp/$SHAPE.gguf (the peer part converts it: run peer first)")
    fi
fi

finish
