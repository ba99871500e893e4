// pagoda_cuda_bench: batch-1 decode (eager and replayed from a CUDA graph; decode_* fields are the graph's) and
// long-prefill speed of one model on the CUDA backend, with the machine's ceilings measured in the same run (device
// copy bandwidth, cuBLASLt bf16 GEMM peak). Prints one JSON line.
//   pagoda_cuda_bench --model DIR [--prefill 2048] [--context 512] [--decode 128]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "executor/decode_graphs.h"
#include "model/model.h"
#include "model/runner.h"
#include "runtime/cuda_backend.h"
#include "runtime/forward_batch.h"
#include "runtime/ops.h"
#include "tools/doctor/measure.h"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

int fail(const std::string& m) {
    std::fprintf(stderr, "pagoda_cuda_bench: %s\n", m.c_str());
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace pagoda;
    std::string dir;
    int prefill = 2048, context = 512, decode = 128;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i];
        if (k == "--model")
            dir = argv[i + 1];
        else if (k == "--prefill")
            prefill = std::atoi(argv[i + 1]);
        else if (k == "--context")
            context = std::atoi(argv[i + 1]);
        else if (k == "--decode")
            decode = std::atoi(argv[i + 1]);
        else
            return fail("unknown option " + k);
    }
    if (dir.empty() || prefill <= 0 || context <= 0 || decode <= 0)
        return fail("usage: --model DIR [--prefill N] [--context N] [--decode N]");

    const doctor::Measurements ceil = doctor::run_measurements({});
    double copy_gbps = 0, gemm_tflops = 0;
    if (!ceil.gpus.empty()) {
        copy_gbps = ceil.gpus[0].copy_gbps.value.value_or(0);
        gemm_tflops = ceil.gpus[0].gemm_tflops.value.value_or(0);
    }

    const auto t_load = Clock::now();
    auto backend = make_cuda_backend();
    if (!backend.ok()) return fail(backend.message());
    auto loaded = model::Model::load(dir, **backend);
    if (!loaded.ok()) return fail(loaded.message());
    model::Model& m = **loaded;
    (*backend)->synchronize();
    const double load_s = seconds_since(t_load);
    const model::ModelSpec& spec = m.spec();

    const int max_len = std::max(prefill, context + decode) + 16;
    auto runner = model::SequenceRunner::create(m, 2, max_len);
    if (!runner.ok()) return fail(runner.message());
    model::SequenceRunner& r = *runner;
    std::mt19937 rng(7);
    auto random_ids = [&](int n) {
        std::vector<int32_t> ids(static_cast<size_t>(n));
        for (auto& id : ids)
            id = static_cast<int32_t>(rng() % static_cast<uint32_t>(spec.vocab_size));
        return ids;
    };

    // Prefill: one warm-up (cuBLASLt plans, scratch growth), then the best of three.
    const std::vector<int32_t> long_prompt = random_ids(prefill);
    double prefill_s = 1e30;
    for (int rep = 0; rep < 4; ++rep) {
        r.reset(0);
        const auto t = Clock::now();
        auto out = r.feed(0, long_prompt, false);
        if (!out.ok()) return fail(out.message());
        if (rep > 0) prefill_s = std::min(prefill_s, seconds_since(t));
    }

    // Decode at batch 1 after a `context`-token prompt, greedy, as the server runs it: the logits stay on the
    // device and only the argmax comes back. The same steps twice: eager, then replayed from a recorded CUDA graph
    // (executor/decode_graphs.h). The first two steps of each are warm-up (the graph is recorded in the first).
    const int32_t bs = 16, seq_blocks = (context + decode + bs) / bs;
    auto decode_kv = KvCachePool::create((*backend)->allocator(), m.kv_cache_config(seq_blocks, bs));
    if (!decode_kv.ok()) return fail(decode_kv.message());
    std::vector<int32_t> decode_table(static_cast<size_t>(seq_blocks));
    for (int32_t i = 0; i < seq_blocks; ++i)
        decode_table[static_cast<size_t>(i)] = i;
    auto logits_mem = Buffer::allocate((*backend)->allocator(), static_cast<size_t>(spec.vocab_size) * 4, 256);
    if (!logits_mem.ok()) return fail(logits_mem.message());
    const Tensor step_logits = logits_mem->view(DType::F32, Shape{1, spec.vocab_size});
    Ops& ops = (*backend)->ops();
    int32_t first_token = 0;
    {
        ForwardBatchBuilder prompt(bs);
        const std::vector<int32_t> ids = random_ids(context);
        prompt.add_sequence(ids, 0, decode_table, 0);
        const Status st = m.forward(prompt.view(), &*decode_kv, nullptr, step_logits);
        if (!st.ok()) return fail(st.message());
        ops.argmax(step_logits, std::span<int32_t>(&first_token, 1));
    }
    auto graphs = executor::DecodeGraphs::create(m, {1, max_len, bs});
    if (!graphs.ok()) return fail(graphs.message());
    if (!*graphs) return fail("this backend records no CUDA graphs");
    auto decode_steps = [&](bool use_graphs) -> Result<std::vector<double>> {
        std::vector<double> steps;
        int32_t next = first_token;
        ForwardBatchBuilder step(bs);
        for (int i = 0; i < decode; ++i) {
            const auto t = Clock::now();
            step.clear();
            step.add_sequence(std::span<const int32_t>(&next, 1), context + i, decode_table, 0);
            const ForwardBatch batch = step.view();
            Tensor logits = step_logits;
            if (use_graphs) {
                PAGODA_ASSIGN_OR_RETURN(logits, (*graphs)->forward(batch, &*decode_kv, nullptr));
            } else {
                PAGODA_RETURN_IF_ERROR(m.forward(batch, &*decode_kv, nullptr, step_logits));
            }
            ops.argmax(logits, std::span<int32_t>(&next, 1));
            if (i >= 2) steps.push_back(seconds_since(t));
        }
        return steps;
    };
    struct StepStats {
        double median = 0, mean = 0;
    };
    auto stats_of = [](std::vector<double> v) {
        StepStats st;
        std::sort(v.begin(), v.end());
        st.median = v[v.size() / 2];
        for (double x : v)
            st.mean += x;
        st.mean /= static_cast<double>(v.size());
        return st;
    };
    if (decode < 4) return fail("--decode must be at least 4 (two warm-up steps)");
    auto eager_steps = decode_steps(false);
    if (!eager_steps.ok()) return fail("eager decode: " + eager_steps.message());
    auto graph_steps = decode_steps(true);
    if (!graph_steps.ok()) return fail("graph decode: " + graph_steps.message());
    const StepStats eager = stats_of(*eager_steps), graph = stats_of(*graph_steps);
    const double median_step = graph.median, mean_step = graph.mean;
    if ((*graphs)->recordings() == 0) return fail("the decode graph was not recorded");

    // Profile: one forward queued behind a held stream; the host time to queue it (CPU cost of a step's launches
    // and checks) and its GPU time with no launch gaps. Logits stay on the device (no copy, no sync).
    auto queued = [&](int32_t ctx, std::span<const int32_t> tokens) -> Result<QueuedTiming> {
        const int32_t bs = 16, blocks = (ctx + static_cast<int32_t>(tokens.size()) + bs - 1) / bs;
        PAGODA_ASSIGN_OR_RETURN(KvCachePool kv,
                                KvCachePool::create((*backend)->allocator(), m.kv_cache_config(blocks, bs)));
        std::vector<int32_t> table(static_cast<size_t>(blocks));
        for (int32_t i = 0; i < blocks; ++i)
            table[static_cast<size_t>(i)] = i;
        ForwardBatchBuilder builder(bs);
        builder.add_sequence(tokens, ctx, table, 0, ForwardBatchBuilder::Logits::Last);
        const ForwardBatch batch = builder.view();
        PAGODA_ASSIGN_OR_RETURN(Buffer logits_mem, Buffer::allocate((*backend)->allocator(), spec.vocab_size * 4, 256));
        const Tensor logits = logits_mem.view(DType::F32, Shape{1, spec.vocab_size});
        for (int i = 0; i < 2; ++i)
            PAGODA_RETURN_IF_ERROR(m.forward(batch, &kv, nullptr, logits));  // warm-up
        (*backend)->synchronize();
        Status st = ok_status();
        auto t = cuda_time_queued(**backend, [&] { st = m.forward(batch, &kv, nullptr, logits); });
        PAGODA_RETURN_IF_ERROR(st);
        return t;
    };
    auto dq = queued(context + decode / 2, std::span<const int32_t>(&first_token, 1));
    if (!dq.ok()) return fail("decode profile: " + dq.message());
    // One replayed decode step queued the same way: its GPU time, against the measured step time above, is the
    // GPU's idle share of a step (the host's part: building the batch, staging it, the argmax's round trip).
    ForwardBatchBuilder graph_step(bs);
    graph_step.add_sequence(std::span<const int32_t>(&first_token, 1), context + decode / 2, decode_table, 0);
    const ForwardBatch graph_batch = graph_step.view();
    Status graph_status = ok_status();
    auto gq = cuda_time_queued(**backend,
                               [&] { graph_status = (*graphs)->forward(graph_batch, &*decode_kv, nullptr).status(); });
    if (!gq.ok() || !graph_status.ok())
        return fail("graph profile: " + (gq.ok() ? graph_status : gq.status()).message());
    auto pq = queued(0, long_prompt);
    if (!pq.ok()) return fail("prefill profile: " + pq.message());

    // Bytes one decode step must read: every weight except the embedding table (one row), plus the KV cache.
    const double H = static_cast<double>(spec.hidden_size), I = static_cast<double>(spec.intermediate_size);
    const double L = static_cast<double>(spec.num_hidden_layers), V = static_cast<double>(spec.vocab_size);
    const double hq = static_cast<double>(spec.num_attention_heads),
                 hkv = static_cast<double>(spec.num_key_value_heads);
    const double hd = static_cast<double>(spec.head_dim);
    const double layer_params = H * hd * (2 * hq + 2 * hkv) + 3 * H * I;
    const double matmul_params = L * layer_params + V * H;  // lm_head
    const double avg_ctx = context + decode / 2.0;
    const double kv_bytes = L * 2 * hkv * hd * 2 * avg_ctx;
    const double bytes_per_token = matmul_params * 2 + kv_bytes;
    const double roof_tok_s = copy_gbps * 1e9 / bytes_per_token;
    const double tok_s = 1.0 / mean_step;

    // Prefill FLOPs: the GEMMs (logits of the last row only) and causal attention (QKᵀ and PV over half the square).
    const double P = prefill;
    const double flops = 2 * P * L * layer_params + 2 * V * H + L * 4 * hq * hd * P * P / 2;
    const double mfu = gemm_tflops > 0 ? flops / prefill_s / (gemm_tflops * 1e12) : 0;

    std::printf(
        "{\"model\": \"%s\", \"device\": \"%s\", \"load_s\": %.2f, \"copy_gbps\": %.0f, \"gemm_tflops\": %.0f, "
        "\"decode_context\": %d, \"decode_steps\": %d, \"decode_ms_median\": %.3f, \"decode_ms_mean\": %.3f, "
        "\"decode_tok_s\": %.1f, \"decode_roofline_tok_s\": %.1f, \"decode_roofline_frac\": %.3f, "
        "\"prefill_tokens\": %d, \"prefill_ms\": %.1f, \"prefill_tflops\": %.1f, \"prefill_mfu\": %.3f, "
        "\"decode_step_enqueue_ms\": %.3f, \"decode_step_gpu_ms\": %.3f, \"weights_at_copy_bw_ms\": %.3f, "
        "\"prefill_enqueue_ms\": %.2f, \"prefill_gpu_ms\": %.2f, \"decode_eager_ms_mean\": %.3f, "
        "\"decode_eager_tok_s\": %.1f, \"decode_graph_gpu_ms\": %.3f, \"decode_graph_idle_frac\": %.3f}\n",
        dir.c_str(), (*backend)->name().c_str(), load_s, copy_gbps, gemm_tflops, context, decode, median_step * 1e3,
        mean_step * 1e3, tok_s, roof_tok_s, roof_tok_s > 0 ? tok_s / roof_tok_s : 0.0, prefill, prefill_s * 1e3,
        flops / prefill_s / 1e12, mfu, dq->enqueue_ms, dq->gpu_ms, bytes_per_token / (copy_gbps * 1e9) * 1e3,
        pq->enqueue_ms, pq->gpu_ms, eager.mean * 1e3, 1.0 / eager.mean, gq->gpu_ms,
        1.0 - gq->gpu_ms / (mean_step * 1e3));
    return 0;
}
