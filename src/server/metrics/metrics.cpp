// ServingMetrics: lock-free recording and the Prometheus text exposition. Metric names, help texts, meanings and
// bucket boundaries follow vLLM's V1 Prometheus logger; only the prefix differs ("pagoda:" unless asked otherwise).
#include "server/metrics/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "common/check.h"

namespace pagoda::server::metrics {

namespace {

// vLLM's boundaries (seconds).
const std::vector<double> kTimeToFirstTokenBuckets = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                                      0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                                      20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kInterTokenLatencyBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                                       0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kRequestLatencyBuckets = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                                    5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                                    60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kParamsNBuckets = {1.0, 2.0, 5.0, 10.0, 20.0};

// Numbers as Python's prometheus_client writes them: shortest round-trip form, integers with ".0".
void append_number(std::string& out, double v) {
    if (std::isinf(v)) {
        out += v > 0 ? "+Inf" : "-Inf";
        return;
    }
    if (std::isnan(v)) {
        out += "NaN";
        return;
    }
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof(buf), v);
    std::string_view s(buf, static_cast<size_t>(r.ptr - buf));
    out += s;
    if (s.find_first_of(".eEn") == std::string_view::npos) out += ".0";
}

void append_label_value(std::string& out, std::string_view v) {
    for (char c : v) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '"') {
            out += "\\\"";
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out += c;
        }
    }
}

// Builds the exposition: one family at a time, each series with the common labels first.
class Writer {
  public:
    Writer(std::string_view prefix, std::string_view model_name) : prefix_(prefix) {
        labels_ = "engine=\"0\",model_name=\"";
        append_label_value(labels_, model_name);
        labels_ += '"';
    }

    void family(std::string_view name, std::string_view type, std::string_view help) {
        out_ += "# HELP ";
        append_name(name);
        out_ += ' ';
        out_ += help;
        out_ += "\n# TYPE ";
        append_name(name);
        out_ += ' ';
        out_ += type;
        out_ += '\n';
    }

    // name{labels[,extra]} value
    void sample(std::string_view name, double value, std::string_view extra_labels = {}) {
        append_name(name);
        out_ += '{';
        out_ += labels_;
        if (!extra_labels.empty()) {
            out_ += ',';
            out_ += extra_labels;
        }
        out_ += "} ";
        append_number(out_, value);
        out_ += '\n';
    }

    void gauge(std::string_view name, std::string_view help, double value) {
        family(name, "gauge", help);
        sample(name, value);
    }

    // Counters are written under their _total name, as prometheus_client does in this format.
    void counter(std::string_view total_name, std::string_view help, double value) {
        family(total_name, "counter", help);
        sample(total_name, value);
    }

    void histogram(std::string_view name, std::string_view help, const Histogram& h) {
        family(name, "histogram", help);
        const std::vector<uint64_t> counts = h.cumulative_counts();
        const std::string bucket = std::string(name) + "_bucket";
        std::string le;
        for (size_t i = 0; i < counts.size(); ++i) {
            le = "le=\"";
            append_number(le, i < h.upper_bounds().size() ? h.upper_bounds()[i] : INFINITY);
            le += '"';
            sample(bucket, static_cast<double>(counts[i]), le);
        }
        sample(std::string(name) + "_count", static_cast<double>(counts.back()));
        sample(std::string(name) + "_sum", h.sum());
    }

    std::string take() { return std::move(out_); }

  private:
    void append_name(std::string_view name) {
        out_ += prefix_;
        out_ += ':';
        out_ += name;
    }

    std::string_view prefix_;
    std::string labels_;
    std::string out_;
};

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
    PAGODA_CHECK(std::is_sorted(bounds_.begin(), bounds_.end()));
    for (size_t i = 0; i <= bounds_.size(); ++i)
        counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::observe(double value) {
    if (std::isnan(value)) return;
    // Prometheus buckets are "less than or equal": the first bound >= value.
    const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    sum_.fetch_add(value, std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::cumulative_counts() const {
    std::vector<uint64_t> out(bounds_.size() + 1);
    uint64_t total = 0;
    for (size_t i = 0; i < out.size(); ++i) {
        total += counts_[i].load(std::memory_order_relaxed);
        out[i] = total;
    }
    return out;
}

const char* label_value(FinishedReason reason) {
    switch (reason) {
        case FinishedReason::kStop:
            return "stop";
        case FinishedReason::kLength:
            return "length";
        case FinishedReason::kAbort:
            return "abort";
    }
    return "abort";
}

std::vector<double> one_two_five_buckets(int64_t max_value) {
    std::vector<double> out;
    for (int64_t scale = 1; scale <= max_value; scale *= 10) {
        for (int64_t m : {1, 2, 5})
            if (m * scale <= max_value) out.push_back(static_cast<double>(m * scale));
        if (scale > max_value / 10) break;
    }
    return out;
}

struct ServingMetrics::TokenHistograms {
    explicit TokenHistograms(int64_t max_model_len)
        : prompt(one_two_five_buckets(max_model_len)),
          generation(one_two_five_buckets(max_model_len)),
          max_tokens(one_two_five_buckets(max_model_len)),
          max_generation(one_two_five_buckets(max_model_len)) {}
    Histogram prompt, generation, max_tokens, max_generation;
};

ServingMetrics::ServingMetrics()
    : ttft_(kTimeToFirstTokenBuckets),
      itl_(kInterTokenLatencyBuckets),
      tpot_(kInterTokenLatencyBuckets),
      request_tpot_(kInterTokenLatencyBuckets),
      e2e_(kRequestLatencyBuckets),
      queue_(kRequestLatencyBuckets),
      prefill_(kRequestLatencyBuckets),
      decode_(kRequestLatencyBuckets),
      params_n_(kParamsNBuckets) {}

ServingMetrics::~ServingMetrics() = default;

void ServingMetrics::set_max_model_len(int64_t max_model_len) {
    if (tokens_claimed_.exchange(true)) return;
    token_storage_ = std::make_unique<TokenHistograms>(max_model_len);
    tokens_.store(token_storage_.get(), std::memory_order_release);
}

void ServingMetrics::observe_finished(const FinishedChoice& c) {
    finished_[static_cast<int>(c.reason)].fetch_add(1, std::memory_order_relaxed);
    if (c.time_per_output_token >= 0.0) request_tpot_.observe(c.time_per_output_token);
    if (TokenHistograms* t = tokens_.load(std::memory_order_acquire)) {
        t->prompt.observe(static_cast<double>(c.prompt_tokens));
        t->generation.observe(static_cast<double>(c.generation_tokens));
        if (c.max_tokens > 0) t->max_tokens.observe(static_cast<double>(c.max_tokens));
    }
}

void ServingMetrics::observe_request(const RequestLatencies& l, int32_t n, int64_t max_generation_tokens) {
    if (l.e2e >= 0.0) e2e_.observe(l.e2e);
    if (l.queue >= 0.0) queue_.observe(l.queue);
    if (l.prefill >= 0.0) prefill_.observe(l.prefill);
    if (l.decode >= 0.0) decode_.observe(l.decode);
    params_n_.observe(static_cast<double>(n));
    if (TokenHistograms* t = tokens_.load(std::memory_order_acquire))
        t->max_generation.observe(static_cast<double>(max_generation_tokens));
}

std::string ServingMetrics::render(const engine::EngineStats& e, std::string_view prefix,
                                   std::string_view model_name) const {
    Writer w(prefix, model_name);
    w.gauge("num_requests_running", "Number of requests in model execution batches.", e.num_running);
    w.gauge("num_requests_waiting", "Number of requests waiting to be processed.", e.num_waiting);
    // vLLM: 1 - free / total, where free counts unreferenced cached blocks (they can be evicted at once).
    const double usage = e.num_kv_blocks > 0 ? 1.0 - static_cast<double>(e.num_free_kv_blocks) / e.num_kv_blocks : 0.0;
    w.gauge("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", usage);
    // vLLM's older name, still emitted by vLLM 0.9 and charted by its Grafana dashboard's cache panel.
    w.gauge("gpu_cache_usage_perc",
            "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use vllm:kv_cache_usage_perc instead.", usage);
    w.counter("prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.",
              static_cast<double>(e.prefix_queried_tokens));
    w.counter("prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.",
              static_cast<double>(e.prefix_hit_tokens));
    w.counter("num_preemptions_total", "Cumulative number of preemption from the engine.",
              static_cast<double>(e.num_preemptions));
    // pagoda's own: a stuck engine shows as this counter standing still while requests wait (deploy/prometheus).
    w.counter("engine_steps_total", "Engine steps (iterations) run.", static_cast<double>(e.num_steps));
    // pagoda's own: with --async-scheduling, the steps that overlapped the reading of the step before them.
    w.counter("engine_steps_launched_ahead_total",
              "Engine steps launched before the step ahead of them was read (--async-scheduling).",
              static_cast<double>(e.num_steps_launched_ahead));
    w.counter("prompt_tokens_total", "Number of prefill tokens processed.",
              static_cast<double>(prompt_tokens_.load(std::memory_order_relaxed)));
    w.counter("generation_tokens_total", "Number of generation tokens processed.",
              static_cast<double>(generation_tokens_.load(std::memory_order_relaxed)));
    w.family("request_success_total", "counter", "Count of successfully processed requests.");
    for (int i = 0; i < kNumFinishedReasons; ++i) {
        const std::string label =
            std::string("finished_reason=\"") + label_value(static_cast<FinishedReason>(i)) + "\"";
        w.sample("request_success_total", static_cast<double>(finished_[i].load(std::memory_order_relaxed)), label);
    }
    w.family("http_responses_total", "counter", "HTTP answers by status class.");
    for (int i = 0; i < 5; ++i) {
        const std::string label = "code=\"" + std::to_string(i + 1) + "xx\"";
        w.sample("http_responses_total", static_cast<double>(http_responses_[i].load(std::memory_order_relaxed)),
                 label);
    }
    w.histogram("time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttft_);
    w.histogram("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itl_);
    w.histogram("time_per_output_token_seconds", "Histogram of time per output token in seconds.", tpot_);
    w.histogram("request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.",
                request_tpot_);
    w.histogram("e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", e2e_);
    w.histogram("request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", queue_);
    w.histogram("request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", prefill_);
    w.histogram("request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", decode_);
    if (const TokenHistograms* t = tokens_.load(std::memory_order_acquire)) {
        w.histogram("request_prompt_tokens", "Number of prefill tokens processed.", t->prompt);
        w.histogram("request_generation_tokens", "Number of generation tokens processed.", t->generation);
        w.histogram("request_params_max_tokens", "Histogram of the max_tokens request parameter.", t->max_tokens);
        w.histogram("request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.",
                    t->max_generation);
    }
    w.histogram("request_params_n", "Histogram of the n request parameter.", params_n_);
    return w.take();
}

std::string render_tenant_counters(std::span<const TenantCounters> tenants, std::string_view prefix,
                                   std::string_view model_name) {
    if (tenants.empty()) return {};
    Writer w(prefix, model_name);
    struct Family {
        const char* name;
        const char* help;
        int64_t TenantCounters::*value;
    };
    const Family families[] = {
        {"tenant_requests_total", "Requests admitted per tenant (past authentication and the request-rate limit).",
         &TenantCounters::requests},
        {"tenant_prompt_tokens_total", "Prompt tokens charged per tenant, at admission.",
         &TenantCounters::prompt_tokens},
        {"tenant_generation_tokens_total", "Generated tokens charged per tenant, as they stream.",
         &TenantCounters::generation_tokens},
        {"tenant_rate_limited_total", "Requests per tenant answered 429 (request or token rate limit).",
         &TenantCounters::rate_limited},
    };
    for (const Family& f : families) {
        w.family(f.name, "counter", f.help);
        for (const TenantCounters& t : tenants) {
            std::string label = "tenant=\"";
            append_label_value(label, t.tenant);
            label += '"';
            w.sample(f.name, static_cast<double>(t.*f.value), label);
        }
    }
    return w.take();
}

std::string render_model_info(const ModelInfo& info, std::string_view prefix) {
    Writer w(prefix, info.name);
    w.family("model_info", "gauge", "The served model: its directory as a label, the unix time it started serving.");
    std::string label = "path=\"";
    append_label_value(label, info.path);
    label += '"';
    w.sample("model_info", static_cast<double>(info.loaded_at), label);
    w.family("model_reloads_total", "counter", "Model reloads (POST /v1/models/reload) by result.");
    w.sample("model_reloads_total", static_cast<double>(info.reloads_ok), "result=\"ok\"");
    w.sample("model_reloads_total", static_cast<double>(info.reloads_failed), "result=\"failed\"");
    w.gauge("model_reload_parked_requests", "Requests waiting for a reload to switch models.",
            static_cast<double>(info.parked));
    w.family("model_reload_parked_requests_total", "counter", "Requests that waited for a reload to switch models.");
    w.sample("model_reload_parked_requests_total", static_cast<double>(info.parked_total));
    return w.take();
}

std::string render_lora_requests_info(const LoraRequestsInfo& info, std::string_view prefix, double unix_time) {
    const std::string name = std::string(prefix) + ":lora_requests_info";
    std::string out = "# HELP " + name + " Running stats on lora requests.\n# TYPE " + name + " gauge\n" + name +
                      "{max_lora=\"" + std::to_string(info.max_lora) + "\"";
    for (const auto& [label, names] :
         {std::pair{"running_lora_adapters", &info.running}, std::pair{"waiting_lora_adapters", &info.waiting}}) {
        out += std::string(",") + label + "=\"";
        for (size_t i = 0; i < names->size(); ++i) {
            if (i > 0) out += ',';
            append_label_value(out, (*names)[i]);
        }
        out += '"';
    }
    out += "} ";
    append_number(out, unix_time);
    out += '\n';
    return out;
}

}  // namespace pagoda::server::metrics
