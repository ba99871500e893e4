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

// One finished choice: what vLLM records per finished request (each of a request's n choices is one of vLLM's child
// requests).
struct FinishedChoice {
    FinishedReason reason = FinishedReason::kStop;
    int64_t prompt_tokens = 0;
    int64_t generation_tokens = 0;
    int64_t max_tokens = 0;               // the max_tokens the choice ran under; 0: none recorded
    double time_per_output_token = -1.0;  // (last token - first token) / (tokens - 1); negative: fewer than 2 tokens
};

// vLLM's token-count buckets: 1, 2, 5, 10, 20, 50, ... up to max_model_len (vllm build_1_2_5_buckets).
std::vector<double> one_two_five_buckets(int64_t max_value);

// vLLM's lora_requests_info gauge: the adapters of the running and the waiting requests (names, comma-separated) and
// --max-loras as labels, the time of the sample (unix seconds) as its value, as vLLM reports it.
struct LoraRequestsInfo {
    std::vector<std::string> running, waiting;
    int32_t max_lora = 0;
};
std::string render_lora_requests_info(const LoraRequestsInfo& info, std::string_view prefix, double unix_time);

class ServingMetrics {
  public:
    ServingMetrics();
    ~ServingMetrics();

    // The token-count histograms (request_prompt_tokens, request_generation_tokens, request_params_max_tokens) have
    // buckets up to the context length, known once the model is loaded: the first call sets them; they are left out
    // of the exposition, and their observations dropped, before it.
    void set_max_model_len(int64_t max_model_len);

    void add_prompt_tokens(int64_t n) { prompt_tokens_.fetch_add(n, std::memory_order_relaxed); }
    void add_generation_tokens(int64_t n) { generation_tokens_.fetch_add(n, std::memory_order_relaxed); }
    void observe_finished(const FinishedChoice& choice);
    void observe_time_to_first_token(double s) { ttft_.observe(s); }
    // Between two tokens of a choice: inter_token_latency_seconds and vLLM's older name for the same observations,
    // time_per_output_token_seconds (the one its Grafana dashboard charts).
    void observe_inter_token_latency(double s) {
        itl_.observe(s);
        tpot_.observe(s);
    }
    // Once per engine request (a prompt with its n choices; vLLM's parent request): its latencies, n, and the most
    // tokens one of its choices generated.
    void observe_request(const RequestLatencies& l, int32_t n, int64_t max_generation_tokens);
    // Every HTTP answer by status class (1xx..5xx), pagoda's own http_responses_total{code="5xx"}: the 5xx alert.
    void count_http_response(int status) {
        if (status >= 100 && status < 600) http_responses_[status / 100 - 1].fetch_add(1, std::memory_order_relaxed);
    }

    // The whole exposition: engine gauges and counters from `engine` plus what was recorded here. `prefix` is
    // "pagoda" or "vllm" (without the colon); every series carries model_name and engine="0" labels as vLLM's do.
    std::string render(const engine::EngineStats& engine, std::string_view prefix, std::string_view model_name) const;

  private:
    struct TokenHistograms;

    std::atomic<int64_t> prompt_tokens_{0};
    std::atomic<int64_t> generation_tokens_{0};
    std::atomic<int64_t> finished_[kNumFinishedReasons] = {};
    std::atomic<int64_t> http_responses_[5] = {};
    Histogram ttft_, itl_, tpot_, request_tpot_, e2e_, queue_, prefill_, decode_, params_n_;
    std::unique_ptr<TokenHistograms> token_storage_;
    std::atomic<TokenHistograms*> tokens_{nullptr};  // published once by set_max_model_len
    std::atomic<bool> tokens_claimed_{false};
};

// Per-tenant usage (--api-keys-file), pagoda's own series: <prefix>:tenant_requests_total{tenant=...} and the
// prompt / generation token and rate-limited counters, appended to the exposition.
struct TenantCounters {
    std::string tenant;
    int64_t requests = 0, prompt_tokens = 0, generation_tokens = 0, rate_limited = 0;
};
std::string render_tenant_counters(std::span<const TenantCounters> tenants, std::string_view prefix,
                                   std::string_view model_name);

// Which model is served and since when (model hot reload), pagoda's own series: <prefix>:model_info{model_name,path}
// whose value is the unix time it started serving, <prefix>:model_reloads_total{result="ok"|"failed"}, and the
// requests parked while a reload switches models (<prefix>:model_reload_parked_requests, now, and
// <prefix>:model_reload_parked_requests_total since start).
struct ModelInfo {
    std::string name, path;
    int64_t loaded_at = 0;
    uint64_t reloads_ok = 0, reloads_failed = 0;
    size_t parked = 0;
    uint64_t parked_total = 0;
};
std::string render_model_info(const ModelInfo& info, std::string_view prefix);

}  // namespace pagoda::server::metrics
