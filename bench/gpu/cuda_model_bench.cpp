// pagoda_cuda_bench: batch-1 decode (eager and replayed from a CUDA graph; decode_* fields are the graph's) and
// long-prefill speed of one model on the CUDA backend, with the machine's ceilings measured in the same run (device
// copy bandwidth, cuBLASLt bf16 GEMM peak). Prints one JSON line.
//   pagoda_cuda_bench --model DIR [--prefill 2048] [--context 512] [--decode 128] [--quantization fp8]
//                     [--fp8-activations 1]
// --quantization fp8 quantizes a bf16 checkpoint's projections at load (as `pagoda serve --quantization fp8`). The
// decode roofline counts the linear weights as the loaded model holds them (linear_bytes_per_token): bf16 at two bytes
// a parameter, fp8 at one plus its scales, an int4 checkpoint's (AWQ, GPTQ: bench/gpu/make_awq_checkpoint.py makes
// one) at half a byte plus its group scales and zero points.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "executor/decode_graphs.h"
#include "model/arch/arch.h"
#include "model/dummy_checkpoint.h"
#include "model/model.h"
#include "model/runner.h"
#include "runtime/cuda_backend.h"
#include "runtime/forward_batch.h"
#include "runtime/ops.h"
#include "tools/doctor/host_info.h"
#include "tools/doctor/measure.h"
#include "tools/doctor/nvml_source.h"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// What one token costs at the model's shape, for the rooflines: the matmul parameters a token goes through (routed
// experts: only its top-k), and the per-token attention FLOPs per context token (QKᵀ and PV of the full-attention
// layers).
struct TokenCost {
    double active_params = 0;
    double attention_flops_per_context = 0;
};
TokenCost token_cost(const pagoda::model::ModelSpec& s) {
    using pagoda::model::AttentionKind;
    using pagoda::model::MlpKind;
    const double H = static_cast<double>(s.hidden_size), hd = static_cast<double>(s.head_dim);
    const double hq = static_cast<double>(s.num_attention_heads), hkv = static_cast<double>(s.num_key_value_heads);
    const double kd = static_cast<double>(s.linear_num_key_heads * s.linear_key_head_dim);
    const double vd = static_cast<double>(s.linear_num_value_heads * s.linear_value_head_dim);
    const double hv = static_cast<double>(s.linear_num_value_heads);
    TokenCost c;
    for (const auto& layer : s.layers) {
        if (layer.attention == AttentionKind::kFull) {
            c.active_params += H * hd * ((s.attn_output_gate ? 2 : 1) * hq + 2 * hkv) + hq * hd * H;
            c.attention_flops_per_context += 4 * hq * hd;
        } else {  // qkv, z, b, a, out
            c.active_params += H * (2 * kd + vd) + H * vd + 2 * H * hv + vd * H;
        }
        if (layer.mlp == MlpKind::kDense) {
            c.active_params += 3 * H * static_cast<double>(s.intermediate_size);
        } else {
            c.active_params +=
                H * static_cast<double>(s.num_experts) +
                static_cast<double>(s.num_experts_per_tok) * 3 * H * static_cast<double>(s.moe_intermediate_size) +
                3 * H * static_cast<double>(s.shared_expert_intermediate_size);
        }
    }
    c.active_params += static_cast<double>(s.vocab_size) * H;  // lm_head
    return c;
}

double bytes_of(const pagoda::Tensor& t) {
    return t.defined() ? static_cast<double>(t.nbytes()) : 0.0;
}

// Bytes of linear weights one decode token reads, as the loaded model holds them: every projection's data, scales,
// zero points, act-order permutation and bias (an int4 weight's nibbles with the F32 group scales and zeros the loader
// made of its checkpoint's, an fp8 one's bytes and scales, a bf16 one's two bytes a weight); of a stack of routed
// experts, the top-k share; lm_head whole (the embedding when tied), the embedding table itself not (one row).
pagoda::Result<double> linear_bytes_per_token(const pagoda::model::Model& m) {
    const pagoda::model::ModelSpec& s = m.spec();
    // visit_weights takes the struct mutably because loading fills it through the same walk; this walk only reads.
    auto& weights = const_cast<pagoda::model::ModelWeights&>(m.weights());
    double bytes = 0;
    PAGODA_RETURN_IF_ERROR(pagoda::model::visit_weights(weights, s, [&](const pagoda::model::WeightEntry& e) {
        if (e.linear == nullptr || !e.linear->defined()) return pagoda::ok_status();
        const pagoda::LinearWeight& w = *e.linear;
        double b =
            bytes_of(w.data) + bytes_of(w.scales) + bytes_of(w.zeros) + bytes_of(w.input_perm) + bytes_of(w.bias);
        if (w.data.rank() == 3 && s.num_experts > 0)
            b = b / static_cast<double>(s.num_experts) * static_cast<double>(s.num_experts_per_tok);
        bytes += b;
        return pagoda::ok_status();
    }));
    return bytes;
}

// NVML's number for the GPU whose PCI bus id CUDA gave: NVML counts GPUs in PCI order whatever CUDA_VISIBLE_DEVICES
// says, and CUDA's device 0 is its fastest GPU unless CUDA_DEVICE_ORDER=PCI_BUS_ID, so only the bus id is shared.
std::optional<unsigned> nvml_index_of(pagoda::doctor::NvmlSource& nvml, const std::string& cuda_bus_id) {
    auto system = nvml.system();
    if (!system.ok() || cuda_bus_id.empty()) return std::nullopt;
    for (unsigned i = 0; i < system->device_count; ++i) {
        auto gpu = nvml.gpu(i);
        if (gpu.ok() && pagoda::doctor::sysfs_bus_id(gpu->bus_id) == pagoda::doctor::sysfs_bus_id(cuda_bus_id))
            return i;
    }
    return std::nullopt;
}

// What the GPU's clock did over a stretch of the run. The clock and power figures leave out samples NVML flagged GPU
// idle (nothing running, the clock on its way down: before the first kernel, between two reps), so that they are
// those of a GPU at work; the reasons are every sample's, idle included.
struct ClockStats {
    int samples = 0;  // the samples the clock figures are over
    std::optional<double> sm_mhz_mean, sm_mhz_min, power_w_mean;
    std::optional<uint64_t> reasons;  // nvmlClocksEventReason* bits seen in any sample, ORed
};

// Reads the SM clock, power and clock-event reasons of one GPU every 2 ms on a thread of its own, from construction
// to stop(). Without NVML it samples nothing, and the stats are empty.
class ClockSampler {
  public:
    ClockSampler(pagoda::doctor::NvmlSource* nvml, std::optional<unsigned> index) {
        if (!nvml || !index) return;
        samples_.reserve(4096);  // a few seconds' worth, so that the loop does not allocate while the GPU is timed
        thread_ = std::thread([this, nvml, i = *index] {
            while (!stop_.load(std::memory_order_relaxed)) {
                if (auto s = nvml->clocks(i)) samples_.push_back(*s);
                std::this_thread::sleep_for(std::chrono::milliseconds(2));
            }
        });
    }
    ~ClockSampler() { stop(); }
    ClockSampler(const ClockSampler&) = delete;
    ClockSampler& operator=(const ClockSampler&) = delete;

    ClockStats stop() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
        ClockStats st;
        double mhz_sum = 0, power_sum = 0;
        int power_n = 0;
        for (const auto& s : samples_) {
            if (s.clock_event_reasons) st.reasons = st.reasons.value_or(0) | *s.clock_event_reasons;
            if (s.clock_event_reasons.value_or(0) & pagoda::doctor::clock_reason::kGpuIdle) continue;
            if (s.sm_clock_mhz) {
                ++st.samples;
                mhz_sum += *s.sm_clock_mhz;
                st.sm_mhz_min = std::min(st.sm_mhz_min.value_or(1e30), static_cast<double>(*s.sm_clock_mhz));
            }
            if (s.power_mw) {
                ++power_n;
                power_sum += *s.power_mw / 1e3;
            }
        }
        if (st.samples > 0) st.sm_mhz_mean = mhz_sum / st.samples;
        if (power_n > 0) st.power_w_mean = power_sum / power_n;
        return st;
    }

  private:
    std::atomic<bool> stop_{false};
    std::vector<pagoda::doctor::ClockSample> samples_;  // the thread's alone until it is joined
    std::thread thread_;
};

// ClockStats as JSON fields named `prefix`_...; null where nothing was sampled.
std::string clock_fields(const std::string& prefix, const ClockStats& s) {
    auto number = [](std::optional<double> v) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.0f", v.value_or(0));
        return v ? std::string(buf) : std::string("null");
    };
    char reasons[32];
    std::snprintf(reasons, sizeof(reasons), "\"0x%" PRIx64 "\"", s.reasons.value_or(0));
    const std::string f = ", \"" + prefix;
    return f + "_clock_samples\": " + std::to_string(s.samples) + f + "_sm_mhz\": " + number(s.sm_mhz_mean) + f +
           "_sm_mhz_min\": " + number(s.sm_mhz_min) + f + "_power_w\": " + number(s.power_w_mean) + f +
           "_clock_reasons\": " + (s.reasons ? reasons : "null");
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
    model::LoadOptions load_options;
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
        else if (k == "--quantization")
            load_options.quantization = argv[i + 1];
        else if (k == "--fp8-activations")  // 1: W8A8 (model::LoadOptions::fp8_activations)
            load_options.fp8_activations = std::string(argv[i + 1]) == "1";
        else if (k == "--load-format") {  // dummy: random weights for config.json alone (dummy_checkpoint.h)
            auto dummy = model::parse_load_format(argv[i + 1]);
            if (!dummy.ok()) return fail(dummy.message());
            load_options.dummy_weights = *dummy;
        } else
            return fail("unknown option " + k);
    }
    if (dir.empty() || prefill <= 0 || context <= 0 || decode <= 0)
        return fail(
            "usage: --model DIR [--prefill N] [--context N] [--decode N] [--quantization fp8] [--fp8-activations 1] "
            "[--load-format dummy]");
    if (!load_options.quantization.empty() && load_options.quantization != "fp8")
        return fail("--quantization: only fp8 (quantized at load) is measured here");

    const doctor::Measurements ceil = doctor::run_measurements({});
    double copy_gbps = 0, gemm_tflops = 0;
    if (!ceil.gpus.empty()) {
        copy_gbps = ceil.gpus[0].copy_gbps.value.value_or(0);
        gemm_tflops = ceil.gpus[0].gemm_tflops.value.value_or(0);
    }
    // NVML for the prefill's clock samples; a machine without it runs the rest and prints nulls for them. The backend
    // below runs on CUDA device 0, whose bus id the measurements read (cudaDeviceGetPCIBusId).
    auto nvml = doctor::load_nvml();
    std::optional<unsigned> nvml_index;
    if (nvml.ok()) {
        for (const auto& g : ceil.gpus)
            if (g.cuda_index == 0) nvml_index = nvml_index_of(**nvml, g.bus_id);
    } else {
        std::fprintf(stderr, "pagoda_cuda_bench: no clock samples: %s\n", nvml.message().c_str());
    }
    if (nvml.ok() && !nvml_index)
        std::fprintf(stderr, "pagoda_cuda_bench: no clock samples: CUDA device 0 not in NVML\n");
    doctor::NvmlSource* clock_source = nvml.ok() ? nvml->get() : nullptr;

    const auto t_load = Clock::now();
    auto backend = make_cuda_backend();
    if (!backend.ok()) return fail(backend.message());
    auto loaded = model::Model::load(dir, **backend, single_communicator(), load_options);
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

    // Prefill: one warm-up (cuBLASLt plans, scratch growth), then the best of three back to back, each also timed on
    // the GPU's stream (prefill_span_ms: the best rep's events before and after it); then one more after the GPU has
    // idled as long as the queued profile's hold (prefill_after_idle_ms). Against the queued profile's GPU time
    // below, they tell host gaps inside a forward (span near the wall time, after-idle as slow) from a GPU that runs
    // back-to-back reps slower (span near the wall time, after-idle near the queued time). Whether that GPU lowered its
    // clock: NVML's SM clock and clock-event reasons, sampled every 2 ms through the four reps (prefill_sm_mhz,
    // prefill_clock_reasons ...) and through the after-idle one (prefill_after_idle_sm_mhz ...). Reason 0x4 (software
    // power cap): the driver lowered the clock to stay under the power limit; 0x20, 0x40: heat. The power is NVML's 1 s
    // average on Hopper: it lags the reps.
    const std::vector<int32_t> long_prompt = random_ids(prefill);
    struct Timed {
        double wall_s, span_ms;
    };
    auto feed_prompt = [&]() -> Result<Timed> {
        r.reset(0);
        Status st = ok_status();
        const auto t = Clock::now();
        auto span = cuda_time_span(**backend, [&] { st = r.feed(0, long_prompt, false).status(); });
        const double wall = seconds_since(t);
        PAGODA_RETURN_IF_ERROR(st);
        PAGODA_RETURN_IF_ERROR(span.status());
        return Timed{wall, *span};
    };
    Timed best{1e30, -1};
    ClockSampler back_to_back(clock_source, nvml_index);
    for (int rep = 0; rep < 4; ++rep) {
        auto timed = feed_prompt();
        if (!timed.ok()) return fail(timed.message());
        if (rep > 0 && timed->wall_s < best.wall_s) best = *timed;
    }
    const ClockStats prefill_clocks = back_to_back.stop();
    const double prefill_s = best.wall_s;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ClockSampler one_after_idle(clock_source, nvml_index);
    auto after_idle = feed_prompt();
    if (!after_idle.ok()) return fail(after_idle.message());
    const ClockStats after_idle_clocks = one_after_idle.stop();

    // Decode at batch 1 after a `context`-token prompt, greedy, as the server runs it: the logits stay on the
    // device and only the argmax comes back. The same steps twice: eager, then replayed from a recorded CUDA graph
    // (executor/decode_graphs.h). The first two steps of each are warm-up (the graph is recorded in the first).
    const int32_t bs = 16, seq_blocks = (context + decode + bs) / bs;
    auto decode_kv = KvCachePool::create((*backend)->allocator(), m.kv_cache_config(seq_blocks, bs));
    if (!decode_kv.ok()) return fail(decode_kv.message());
    // Hybrid models: one state slot for the decoded sequence (slot 0) and one for the profiles below (slot 1).
    std::optional<StateCachePool> states;
    if (spec.num_linear_attention_layers() > 0) {
        auto s = StateCachePool::create((*backend)->allocator(), m.state_cache_config(2));
        if (!s.ok()) return fail(s.message());
        states = std::move(s).value();
    }
    const StateCachePool* st_pool = states ? &*states : nullptr;
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
        const Status st = m.forward(prompt.view(), &*decode_kv, st_pool, step_logits);
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
                PAGODA_ASSIGN_OR_RETURN(logits, (*graphs)->forward(batch, &*decode_kv, st_pool));
            } else {
                PAGODA_RETURN_IF_ERROR(m.forward(batch, &*decode_kv, st_pool, step_logits));
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
        builder.add_sequence(tokens, ctx, table, 1, ForwardBatchBuilder::Logits::Last);
        const ForwardBatch batch = builder.view();
        PAGODA_ASSIGN_OR_RETURN(Buffer logits_mem, Buffer::allocate((*backend)->allocator(), spec.vocab_size * 4, 256));
        const Tensor logits = logits_mem.view(DType::F32, Shape{1, spec.vocab_size});
        for (int i = 0; i < 2; ++i)
            PAGODA_RETURN_IF_ERROR(m.forward(batch, &kv, st_pool, logits));  // warm-up
        (*backend)->synchronize();
        // A forward whose queueing outlasts the hold (a 27B model's prefill did at 200 ms) is queued again behind a
        // longer one; only the last refusal fails the run.
        Result<QueuedTiming> t = Status::error("not run");
        for (const double hold_ms : {200.0, 1000.0, 5000.0}) {
            Status st = ok_status();
            t = cuda_time_queued(
                **backend, [&] { st = m.forward(batch, &kv, st_pool, logits); }, hold_ms);
            PAGODA_RETURN_IF_ERROR(st);
            if (t.ok()) break;
        }
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
                               [&] { graph_status = (*graphs)->forward(graph_batch, &*decode_kv, st_pool).status(); });
    if (!gq.ok() || !graph_status.ok())
        return fail("graph profile: " + (gq.ok() ? graph_status : gq.status()).message());
    // The prefill's profile is the one part a run may lack (its queueing outlasted every hold): then its two fields
    // are -1 and the rest is still reported.
    auto pq = queued(0, long_prompt);
    if (!pq.ok()) std::fprintf(stderr, "pagoda_cuda_bench: prefill profile left out: %s\n", pq.message().c_str());
    const QueuedTiming prefill_queued = pq.ok() ? *pq : QueuedTiming{-1, -1};

    // Bytes one decode step must read: every weight a token goes through except the embedding table (one row), in
    // the format the model holds it, plus the KV cache of the full-attention layers and, in hybrid models, the fp32
    // delta-net state (read and written).
    const TokenCost cost = token_cost(spec);
    const double avg_ctx = context + decode / 2.0;
    const double kv_bytes = static_cast<double>(spec.kv_cache_bytes_per_token(2)) * avg_ctx;
    const double state_bytes = 2.0 * static_cast<double>(spec.linear_state_bytes_per_sequence());
    const double lm_head_params = static_cast<double>(spec.vocab_size * spec.hidden_size);
    const auto weight_bytes = linear_bytes_per_token(m);
    if (!weight_bytes.ok()) return fail("weight bytes: " + weight_bytes.message());
    const double bytes_per_token = *weight_bytes + kv_bytes + state_bytes;
    const double roof_tok_s = copy_gbps * 1e9 / bytes_per_token;
    const double tok_s = 1.0 / mean_step;

    // Prefill FLOPs: the GEMMs of the active parameters (logits of the last row only) and causal attention (QKᵀ and
    // PV over half the square). The delta rule's own FLOPs are left out (small next to the GEMMs).
    const double P = prefill;
    const double flops = 2 * P * (cost.active_params - lm_head_params) + 2 * lm_head_params +
                         cost.attention_flops_per_context * P * P / 2;
    const double mfu = gemm_tflops > 0 ? flops / prefill_s / (gemm_tflops * 1e12) : 0;

    std::printf(
        "{\"model\": \"%s\", \"device\": \"%s\", \"load_s\": %.2f, \"copy_gbps\": %.0f, \"gemm_tflops\": %.0f, "
        "\"decode_context\": %d, \"decode_steps\": %d, \"decode_ms_median\": %.3f, \"decode_ms_mean\": %.3f, "
        "\"decode_tok_s\": %.1f, \"decode_roofline_tok_s\": %.1f, \"decode_roofline_frac\": %.3f, "
        "\"prefill_tokens\": %d, \"prefill_ms\": %.1f, \"prefill_tflops\": %.1f, \"prefill_mfu\": %.3f, "
        "\"decode_step_enqueue_ms\": %.3f, \"decode_step_gpu_ms\": %.3f, \"weights_at_copy_bw_ms\": %.3f, "
        "\"prefill_enqueue_ms\": %.2f, \"prefill_gpu_ms\": %.2f, \"prefill_span_ms\": %.2f, "
        "\"prefill_after_idle_ms\": %.2f, \"prefill_after_idle_span_ms\": %.2f%s%s, \"decode_eager_ms_mean\": %.3f, "
        "\"decode_eager_tok_s\": %.1f, \"decode_graph_gpu_ms\": %.3f, \"decode_graph_idle_frac\": %.3f, "
        "\"weight_mb_per_token\": %.1f}\n",
        dir.c_str(), (*backend)->name().c_str(), load_s, copy_gbps, gemm_tflops, context, decode, median_step * 1e3,
        mean_step * 1e3, tok_s, roof_tok_s, roof_tok_s > 0 ? tok_s / roof_tok_s : 0.0, prefill, prefill_s * 1e3,
        flops / prefill_s / 1e12, mfu, dq->enqueue_ms, dq->gpu_ms, bytes_per_token / (copy_gbps * 1e9) * 1e3,
        prefill_queued.enqueue_ms, prefill_queued.gpu_ms, best.span_ms, after_idle->wall_s * 1e3, after_idle->span_ms,
        clock_fields("prefill", prefill_clocks).c_str(), clock_fields("prefill_after_idle", after_idle_clocks).c_str(),
        eager.mean * 1e3, 1.0 / eager.mean, gq->gpu_ms, 1.0 - gq->gpu_ms / (mean_step * 1e3), *weight_bytes / 1e6);
    return 0;
}
