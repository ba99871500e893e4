// ServingMetrics: histogram bucketing (Prometheus "le" semantics), counters, and the exposition format.
#include "server/metrics/metrics.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace pagoda::server::metrics {
namespace {

TEST(Histogram, BucketsAreLessOrEqualAndCumulative) {
    Histogram h({0.1, 1.0, 10.0});
    for (double v : {0.05, 0.1, 0.5, 1.0, 3.0, 100.0})
        h.observe(v);
    EXPECT_EQ(h.cumulative_counts(), (std::vector<uint64_t>{2, 4, 5, 6}));
    EXPECT_DOUBLE_EQ(h.sum(), 0.05 + 0.1 + 0.5 + 1.0 + 3.0 + 100.0);
}

TEST(Histogram, ConcurrentObservationsAreAllCounted) {
    Histogram h({1.0});
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < 10000; ++i)
                h.observe(0.5);
        });
    for (auto& t : threads)
        t.join();
    EXPECT_EQ(h.cumulative_counts().back(), 40000u);
    EXPECT_DOUBLE_EQ(h.sum(), 20000.0);
}

TEST(ServingMetrics, ExpositionHasVllmNamesBucketsAndLabels) {
    ServingMetrics m;
    m.add_prompt_tokens(7);
    m.add_generation_tokens(3);
    m.observe_finished(FinishedChoice{FinishedReason::kLength, 7, 3, 16, 0.02});
    m.observe_time_to_first_token(0.03);
    m.observe_request(RequestLatencies{2.0, 0.01, -1.0, -1.0}, 1, 3);  // never produced a token: no prefill/decode
    engine::EngineStats e;
    e.num_running = 2;
    e.num_waiting = 1;
    e.num_kv_blocks = 10;
    e.num_free_kv_blocks = 4;
    e.prefix_queried_tokens = 64;
    e.prefix_hit_tokens = 32;
    e.num_preemptions = 5;
    const std::string text = m.render(e, "pagoda", "my \"model\"");
    const std::string l = R"({engine="0",model_name="my \"model\""})";
    for (const std::string& line : {
             "pagoda:num_requests_running" + l + " 2.0",
             "pagoda:num_requests_waiting" + l + " 1.0",
             "pagoda:kv_cache_usage_perc" + l + " 0.6",
             "pagoda:prefix_cache_queries_total" + l + " 64.0",
             "pagoda:prefix_cache_hits_total" + l + " 32.0",
             "pagoda:num_preemptions_total" + l + " 5.0",
             "pagoda:prompt_tokens_total" + l + " 7.0",
             "pagoda:generation_tokens_total" + l + " 3.0",
             std::string(
                 R"(pagoda:request_success_total{engine="0",model_name="my \"model\"",finished_reason="length"} 1.0)"),
             std::string(
                 R"(pagoda:request_success_total{engine="0",model_name="my \"model\"",finished_reason="stop"} 0.0)"),
             std::string(
                 R"(pagoda:time_to_first_token_seconds_bucket{engine="0",model_name="my \"model\"",le="0.02"} 0.0)"),
             std::string(
                 R"(pagoda:time_to_first_token_seconds_bucket{engine="0",model_name="my \"model\"",le="0.04"} 1.0)"),
             std::string(
                 R"(pagoda:time_to_first_token_seconds_bucket{engine="0",model_name="my \"model\"",le="+Inf"} 1.0)"),
             "pagoda:time_to_first_token_seconds_count" + l + " 1.0",
             "pagoda:e2e_request_latency_seconds_sum" + l + " 2.0",
             "pagoda:request_queue_time_seconds_count" + l + " 1.0",
             "pagoda:request_prefill_time_seconds_count" + l + " 0.0",
             std::string(
                 R"(pagoda:request_decode_time_seconds_bucket{engine="0",model_name="my \"model\"",le="7680.0"} 0.0)"),
             std::string(
                 R"(pagoda:inter_token_latency_seconds_bucket{engine="0",model_name="my \"model\"",le="80.0"} 0.0)"),
             std::string("# TYPE pagoda:request_success_total counter"),
             std::string("# TYPE pagoda:e2e_request_latency_seconds histogram"),
         }) {
        EXPECT_NE(text.find(line + "\n"), std::string::npos) << line << "\n---\n" << text;
    }
    EXPECT_EQ(m.render(e, "vllm", "x").find("pagoda:"), std::string::npos);
}

TEST(ServingMetrics, OneTwoFiveBucketsAsVllmBuildsThem) {
    EXPECT_EQ(one_two_five_buckets(100), (std::vector<double>{1, 2, 5, 10, 20, 50, 100}));
    EXPECT_EQ(one_two_five_buckets(4096), (std::vector<double>{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000}));
    EXPECT_TRUE(one_two_five_buckets(0).empty());
}

TEST(ServingMetrics, PerRequestHistogramsOfVllmsDashboard) {
    ServingMetrics m;
    // Before the context length is known the token-count histograms are neither recorded nor shown.
    m.observe_finished(FinishedChoice{FinishedReason::kStop, 1000, 1000, 1000, -1.0});
    m.set_max_model_len(4096);
    m.set_max_model_len(8);  // the first call wins
    m.observe_finished(FinishedChoice{FinishedReason::kStop, 7, 30, 64, 0.02});
    m.observe_finished(FinishedChoice{FinishedReason::kAbort, 7, 1, 0, -1.0});  // one token: no time per token
    m.observe_request(RequestLatencies{}, 2, 30);
    m.observe_inter_token_latency(0.03);
    const std::string text = "\n" + m.render(engine::EngineStats{}, "vllm", "m");
    const std::string l = R"({engine="0",model_name="m")";
    for (const std::string& line : {
             "vllm:request_prompt_tokens_bucket" + l + R"(,le="5.0"} 0.0)",
             "vllm:request_prompt_tokens_bucket" + l + R"(,le="10.0"} 2.0)",
             "vllm:request_prompt_tokens_bucket" + l + R"(,le="2000.0"} 2.0)",
             "vllm:request_prompt_tokens_count" + l + "} 2.0",
             "vllm:request_generation_tokens_bucket" + l + R"(,le="1.0"} 1.0)",
             "vllm:request_generation_tokens_bucket" + l + R"(,le="50.0"} 2.0)",
             "vllm:request_generation_tokens_sum" + l + "} 31.0",
             "vllm:request_params_max_tokens_count" + l + "} 1.0",
             "vllm:request_params_max_tokens_bucket" + l + R"(,le="100.0"} 1.0)",
             "vllm:request_max_num_generation_tokens_bucket" + l + R"(,le="20.0"} 0.0)",
             "vllm:request_max_num_generation_tokens_bucket" + l + R"(,le="50.0"} 1.0)",
             "vllm:gpu_cache_usage_perc" + l + "} 0.0",
             "vllm:request_params_n_bucket" + l + R"(,le="1.0"} 0.0)",
             "vllm:request_params_n_bucket" + l + R"(,le="2.0"} 1.0)",
             "vllm:request_time_per_output_token_seconds_count" + l + "} 1.0",
             "vllm:request_time_per_output_token_seconds_bucket" + l + R"(,le="0.025"} 1.0)",
             "vllm:time_per_output_token_seconds_count" + l + "} 1.0",
             "vllm:time_per_output_token_seconds_bucket" + l + R"(,le="80.0"} 1.0)",
             "vllm:inter_token_latency_seconds_count" + l + "} 1.0",
             std::string("# TYPE vllm:request_prompt_tokens histogram"),
         }) {
        EXPECT_NE(text.find("\n" + line + "\n"), std::string::npos) << line << "\n---\n" << text;
    }
    EXPECT_EQ(text.find(R"(le="5000.0")"), std::string::npos);  // buckets end at max_model_len
}

}  // namespace
}  // namespace pagoda::server::metrics
