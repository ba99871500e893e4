// Prometheus metrics of the serving path under vLLM's names and meanings (vllm/v1/metrics/loggers.py), so that
// dashboards and autoscalers built for vLLM work with `--metrics-prefix vllm`. Request handlers record into
// ServingMetrics from any thread without locks; /metrics renders the text exposition format (version 0.0.4).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"

namespace pagoda::server::metrics {

// A histogram with fixed upper bounds (ascending; +Inf is implied). observe() is lock-free and allocation-free.
class Histogram {
  public:
    explicit Histogram(std::vector<double> upper_bounds);
    void observe(double value);

    std::span<const double> upper_bounds() const { return bounds_; }
    // Cumulative counts per bound, then +Inf (the total count); size upper_bounds().size() + 1.
    std::vector<uint64_t> cumulative_counts() const;
    double sum() const { return sum_.load(std::memory_order_relaxed); }

  private:
    std::vector<double> bounds_;
    std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // per bucket, not cumulative; last = above every bound
    std::atomic<double> sum_{0.0};
};

// vLLM's finished_reason label values (vllm.v1.engine.FinishReason).
enum class FinishedReason { kStop, kLength, kAbort };
inline constexpr int kNumFinishedReasons = 3;
const char* label_value(FinishedReason reason);

// Latencies of one finished engine request, in seconds; a negative value means the milestone was never reached
// (aborted while waiting: no queue time end, no first token), and that histogram is left alone.
struct RequestLatencies {
    double e2e = -1.0;      // server arrival -> the server saw the request end
    double queue = -1.0;    // engine arrival -> first scheduled (WAITING)
    double prefill = -1.0;  // first scheduled -> first token (PREFILL)
    double decode = -1.0;   // first token -> last token (DECODE)
};

class ServingMetrics {
  public:
    ServingMetrics();

    void add_prompt_tokens(int64_t n) { prompt_tokens_.fetch_add(n, std::memory_order_relaxed); }
    void add_generation_tokens(int64_t n) { generation_tokens_.fetch_add(n, std::memory_order_relaxed); }
    void count_finished(FinishedReason reason) {
        finished_[static_cast<int>(reason)].fetch_add(1, std::memory_order_relaxed);
    }
    void observe_time_to_first_token(double s) { ttft_.observe(s); }
    void observe_inter_token_latency(double s) { itl_.observe(s); }
    void observe_request(const RequestLatencies& l);

    // The whole exposition: engine gauges and counters from `engine` plus what was recorded here. `prefix` is
    // "pagoda" or "vllm" (without the colon); every series carries model_name and engine="0" labels as vLLM's do.
    std::string render(const engine::EngineStats& engine, std::string_view prefix, std::string_view model_name) const;

  private:
    std::atomic<int64_t> prompt_tokens_{0};
    std::atomic<int64_t> generation_tokens_{0};
    std::atomic<int64_t> finished_[kNumFinishedReasons] = {};
    Histogram ttft_, itl_, e2e_, queue_, prefill_, decode_;
};

}  // namespace pagoda::server::metrics
