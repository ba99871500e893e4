// pagoda_cuda_bench: batch-1 decode and long-prefill speed of one model on the CUDA backend, with the machine's
// ceilings measured in the same run (device copy bandwidth, cuBLASLt bf16 GEMM peak). Prints one JSON line.
//   pagoda_cuda_bench --model DIR [--prefill 2048] [--context 512] [--decode 128]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/runner.h"
#include "runtime/cuda_backend.h"
#include "runtime/forward_batch.h"
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

    // Decode at batch 1 after a `context`-token prompt, greedy; per-step wall time (forward + logits to host +
    // argmax on the host, as SequenceRunner does it).
    r.reset(1);
    auto first = r.feed(1, random_ids(context), false);
    if (!first.ok()) return fail(first.message());
    int32_t next = static_cast<int32_t>(std::max_element(first->begin(), first->end()) - first->begin());
    std::vector<double> steps;
    for (int i = 0; i < decode; ++i) {
        const auto t = Clock::now();
        auto out = r.feed(1, std::span<const int32_t>(&next, 1), false);
        if (!out.ok()) return fail(out.message());
        next = static_cast<int32_t>(std::max_element(out->begin(), out->end()) - out->begin());
        steps.push_back(seconds_since(t));
    }
    std::vector<double> sorted = steps;
    std::sort(sorted.begin(), sorted.end());
    const double median_step = sorted[sorted.size() / 2];
    double mean_step = 0;
    for (double s : steps)
        mean_step += s;
    mean_step /= static_cast<double>(steps.size());

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
    auto dq = queued(context + decode / 2, std::span<const int32_t>(&next, 1));
    if (!dq.ok()) return fail("decode profile: " + dq.message());
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
        "\"prefill_enqueue_ms\": %.2f, \"prefill_gpu_ms\": %.2f}\n",
        dir.c_str(), (*backend)->name().c_str(), load_s, copy_gbps, gemm_tflops, context, decode, median_step * 1e3,
        mean_step * 1e3, tok_s, roof_tok_s, roof_tok_s > 0 ? tok_s / roof_tok_s : 0.0, prefill, prefill_s * 1e3,
        flops / prefill_s / 1e12, mfu, dq->enqueue_ms, dq->gpu_ms, bytes_per_token / (copy_gbps * 1e9) * 1e3,
        pq->enqueue_ms, pq->gpu_ms);
    return 0;
}
