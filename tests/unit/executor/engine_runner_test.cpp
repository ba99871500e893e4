// The engine over real (tiny, random) checkpoints: tests/golden/<name>/ from transformers. Greedy output must follow
// transformers' greedy continuation; the tokens of a request must not depend on what else runs in its batch, on a
// prefix-cache hit (including the linear-attention state snapshots of hybrid models), or on preemption.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "async_scheduling.h"
#include "common/file.h"
#include "engine/engine.h"
#include "executor/create_engine.h"
#include "executor/model_engine_runner.h"
#include "golden/golden_reference.h"
#include "model/rope.h"

namespace pagoda::executor {
namespace {

using engine::FinishReason;
using engine::Request;
using engine::RequestStream;
using engine::StreamChunk;

using golden::Reference;

struct Outcome {
    std::vector<int32_t> tokens;
    std::vector<engine::TokenLogprobs> logprobs;  // of each token, with the two most likely ones
    FinishReason reason = FinishReason::kNone;
    std::string message;
    int32_t cached_tokens = 0;
};

Outcome collect(RequestStream& stream) {
    Outcome o;
    StreamChunk chunk;
    while (stream.read(chunk)) {
        if (chunk.choices.empty()) continue;
        const auto& d = chunk.choices[0];
        o.tokens.insert(o.tokens.end(), d.token_ids.begin(), d.token_ids.end());
        o.logprobs.insert(o.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
        if (d.finish_reason != FinishReason::kNone) {
            o.reason = d.finish_reason;
            o.message = d.finish_message;
        }
        o.cached_tokens = chunk.usage.cached_tokens;
    }
    return o;
}

// Greedy, or seeded sampling at temperature 0.8 when `seed` is given.
Request make_request(std::vector<int32_t> prompt, int32_t max_tokens, std::optional<uint64_t> seed = std::nullopt) {
    Request r;
    r.prompt_tokens = std::move(prompt);
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    r.params.temperature = seed ? 0.8f : 0.0f;
    r.params.seed = seed;
    r.params.logprobs = true;
    r.params.top_logprobs = 2;
    return r;
}

bool on_gpu() {
    const char* device = std::getenv("PAGODA_TEST_DEVICE");
    return device != nullptr && std::string(device) == "cuda";
}

// The same request run twice, in different company (batch, CUDA graph or not). On the CPU the tokens are equal. On
// a GPU the matmuls' algorithms, and so their rounding, change with the number of rows, so two runs may part where
// the choice was close: they must agree up to the first step where a greedy request's two best tokens were within
// kNearTie of each other (or, for a sampled request, anywhere after its first kSampledPrefix tokens), and up to there
// their logprobs must agree within kLogprobNoise (bf16 rounding). Hybrid and MoE models amplify rounding more (a
// decay gate, a top-k routing choice): their bound is 5% of what transformers' own bf16 forward moves the model's
// logits (reference.json, bench/gpu/golden_bf16_drift.py) where that is more: 0.13 for qwen3_next, 0.02 for qwen3.
constexpr float kNearTie = 0.02f, kLogprobNoise = 0.02f, kDriftShare = 0.05f;
float g_model_noise = kLogprobNoise;  // this model's bound, set by the fixture
constexpr size_t kSampledPrefix = 4;
// What an fp8 KV cache's rounding may move a logprob by when one run recomputes what the other decoded, on a model
// that amplifies rounding no more than a dense one (g_model_noise = kLogprobNoise); a hybrid or MoE model amplifies an
// e4m3 step as it amplifies a bf16 one, so the bound scales with g_model_noise / kLogprobNoise (qwen3_next: 1.6; on an
// H200 its recompute moved a logprob by 0.55 once the MoE passes' GEMV/GEMM crossing moved from 4 to 2 pairs an
// expert and the runs' steps took different passes).
constexpr float kFp8RecomputeNoise = 0.25f;
// kExact on the CPU; kUpToNearTies as on a GPU, where the runs' rounding may differ; kUpToNoise where a run's
// logprobs may move by g_model_noise (an fp8 recompute): a sampled token then may change at any step, not only past
// the first kSampledPrefix (a sample is a draw against the whole distribution, and all of it moves).
enum class Compare { kExactOnCpu, kUpToNearTies, kUpToNoise };
void expect_same_run(const Outcome& got, const Outcome& want, bool greedy, const std::string& what,
                     Compare compare = Compare::kExactOnCpu) {
    ASSERT_EQ(got.tokens.size(), want.tokens.size()) << what;
    if (!on_gpu() && compare == Compare::kExactOnCpu) {
        EXPECT_EQ(got.tokens, want.tokens) << what;
        return;
    }
    ASSERT_EQ(got.logprobs.size(), got.tokens.size()) << what;
    ASSERT_EQ(want.logprobs.size(), want.tokens.size()) << what;
    for (size_t i = 0; i < want.tokens.size(); ++i) {
        if (got.tokens[i] != want.tokens[i]) {
            const engine::TokenLogprobs& w = want.logprobs[i];
            if (greedy) {
                ASSERT_GE(w.num_top, 2) << what;
                EXPECT_LT(w.top[0].logprob - w.top[1].logprob, std::max(kNearTie, g_model_noise))
                    << what << ": step " << i << " differs but its choice was clear";
            } else {
                if (compare != Compare::kUpToNoise) {
                    EXPECT_GE(i, kSampledPrefix) << what << ": sampled tokens differ from step " << i;
                }
            }
            return;
        }
        EXPECT_NEAR(got.logprobs[i].logprob, want.logprobs[i].logprob, g_model_noise) << what << ": step " << i;
    }
}

class EngineRunnerTest : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        dir_ = golden::dir(GetParam());
        if (!file_exists(dir_ + "/config.json")) GTEST_SKIP() << "no golden data in " << dir_;
        ref_ = golden::load(dir_, /*with_tensors=*/false);
        ASSERT_GT(ref_.prompt_len, 0);
        auto spec = model::load_model_spec(dir_ + "/config.json");
        ASSERT_TRUE(spec.ok()) << spec.message();
        context_ = static_cast<int32_t>(model::max_context_length(*spec));  // 128 for the YaRN models
        g_model_noise = std::max(kLogprobNoise, kDriftShare * static_cast<float>(ref_.transformers_bf16_max_abs_diff));
    }

    std::unique_ptr<ServingEngine> start(EngineOptions options = {}) {
        if (options.max_model_len == 0) options.max_model_len = std::min(160, context_);
        if (options.max_num_seqs == 0) options.max_num_seqs = 8;
        if (options.num_threads == 0) options.num_threads = 1;
        // PAGODA_TEST_DEVICE=cuda runs these on the GPU (the GPU machine's script sets it).
        if (const char* device = std::getenv("PAGODA_TEST_DEVICE")) options.device = device;
        options.async_scheduling = engine::testing::testing_async_scheduling();
        auto s = create_engine(dir_, options);
        EXPECT_TRUE(s.ok()) << s.message();
        return s.ok() ? std::move(s).value() : nullptr;
    }

    // Submits every request before reading any, so that they share steps.
    static std::vector<Outcome> run_all(ServingEngine& s, const std::vector<Request>& requests) {
        // Paused while they arrive, so that they run together however loaded the machine is.
        s.engine().pause();
        std::vector<std::shared_ptr<RequestStream>> streams;
        for (const Request& r : requests) {
            auto stream = s.engine().submit(r);
            EXPECT_TRUE(stream.ok()) << stream.message();
            if (!stream.ok()) break;
            streams.push_back(std::move(stream).value());
        }
        s.engine().resume();
        if (streams.size() != requests.size()) return {};
        std::vector<Outcome> out;
        for (auto& stream : streams) {
            out.push_back(collect(*stream));
            EXPECT_EQ(out.back().reason, FinishReason::kLength) << out.back().message;
        }
        return out;
    }
    static Outcome run_one(ServingEngine& s, const Request& r) { return run_all(s, {r}).at(0); }

    std::vector<int32_t> prompt(int64_t begin, int64_t end) const {
        return std::vector<int32_t>(ref_.ids.begin() + begin, ref_.ids.begin() + end);
    }
    // Other prompts of several lengths cut from the reference sequence (a different start each).
    std::vector<Request> others(int32_t max_tokens) const {
        return {make_request(prompt(3, 60), max_tokens), make_request(prompt(17, 40), max_tokens, 7),
                make_request(prompt(50, 116), max_tokens), make_request(prompt(1, 2), max_tokens, 11)};
    }

    // The engine-level invariants, with the cache `options` choose (the backend's own, or fp8).
    void check_batch_invariance(EngineOptions options);
    void check_prefix_hit(const EngineOptions& options);
    void check_preemption(const EngineOptions& options, Compare compare = Compare::kExactOnCpu);

    std::string dir_;
    Reference ref_;
    int32_t context_ = 0;  // the longest max_model_len the model allows
};

TEST_P(EngineRunnerTest, GreedyMatchesTransformersWhereTheMarginAllows) {
    auto s = start();
    ASSERT_TRUE(s);
    const Outcome o = run_one(*s, make_request(prompt(0, ref_.prompt_len), static_cast<int32_t>(ref_.greedy.size())));
    ASSERT_EQ(o.tokens.size(), ref_.greedy.size());
    if (on_gpu()) {
        // The bf16 GPU path moves each logit by up to cuda_golden_test's bound, a difference of two by twice that:
        // our tokens follow transformers' until the first step where they part, which must be a choice within that.
        const double bound = std::max(2e-2 * ref_.logits_max_abs, 1.5 * ref_.transformers_bf16_max_abs_diff);
        for (size_t i = 0; i < ref_.greedy.size(); ++i) {
            if (o.tokens[i] == ref_.greedy[i]) continue;
            EXPECT_LT(ref_.margins[i], 2 * bound) << "step " << i << " parts from transformers at a clear choice";
            break;
        }
        return;
    }
    // Our tokens follow our own choices, so compare up to the first near-tie only (as golden_test's tolerance).
    const double tol = 2e-3 * ref_.logits_max_abs;
    size_t checked = 0;
    for (; checked < ref_.greedy.size() && ref_.margins[checked] > tol; ++checked)
        EXPECT_EQ(o.tokens[checked], ref_.greedy[checked]) << "step " << checked;
    EXPECT_GE(checked, 4u) << "too few steps with a clear margin to test anything";
}

// --kv-cache-dtype fp8 with scales calculated from the first prefill (each engine's first request below is the same,
// so two engines get the same scales).
EngineOptions fp8_kv(bool calculate_scales) {
    EngineOptions o;
    o.kv_cache_dtype = KvCacheDtype::kFp8E4M3;
    o.calculate_kv_scales = calculate_scales;
    return o;
}

void EngineRunnerTest::check_batch_invariance(EngineOptions options) {
    options.enable_prefix_caching = false;  // the repeats below must be computed, not served from the cache
    auto s = start(options);
    ASSERT_TRUE(s);
    const Request golden = make_request(prompt(0, ref_.prompt_len), 16);
    const Request sampled = make_request(prompt(5, 90), 16, 1234);
    const Outcome golden_alone = run_one(*s, golden);
    const Outcome sampled_alone = run_one(*s, sampled);
    std::vector<Request> batch = others(16);
    batch.insert(batch.begin() + 1, golden);
    batch.push_back(sampled);
    const std::vector<Outcome> together = run_all(*s, batch);
    ASSERT_EQ(together.size(), batch.size());
    expect_same_run(together[1], golden_alone, true, "greedy request in the batch");
    expect_same_run(together.back(), sampled_alone, false, "seeded request in the batch");
    // And the others alone give what they gave in the batch.
    for (size_t i = 0; i < batch.size(); ++i)
        expect_same_run(run_one(*s, batch[i]), together[i], !batch[i].params.seed.has_value(),
                        "request " + std::to_string(i) + " alone");
    const engine::EngineStats st = s->engine().stats();
    EXPECT_EQ(st.prefix_hit_tokens, 0);
    // With async scheduling most decode steps went out before the step ahead of them was read.
    if (engine::testing::testing_async_scheduling()) {
        EXPECT_GT(st.num_steps_launched_ahead, st.num_steps / 2);
    } else {
        EXPECT_EQ(st.num_steps_launched_ahead, 0);
    }
}

TEST_P(EngineRunnerTest, TokensDoNotDependOnTheBatch) {
    check_batch_invariance({});
}

TEST_P(EngineRunnerTest, TokensDoNotDependOnTheBatchWithAnFp8KvCache) {
    check_batch_invariance(fp8_kv(true));
}

void EngineRunnerTest::check_prefix_hit(const EngineOptions& options) {
    EngineOptions no_cache = options;
    no_cache.enable_prefix_caching = false;
    auto cold = start(no_cache);
    ASSERT_TRUE(cold);
    const Request base = make_request(prompt(0, ref_.prompt_len), 12);
    const Request extended = make_request(prompt(0, ref_.prompt_len + 10), 12);
    const Request sampled = make_request(prompt(0, ref_.prompt_len + 3), 12, 99);
    const Outcome base_miss = run_one(*cold, base);
    const Outcome extended_miss = run_one(*cold, extended);
    const Outcome sampled_miss = run_one(*cold, sampled);
    cold.reset();

    auto s = start(options);
    ASSERT_TRUE(s);
    const Outcome first = run_one(*s, base);
    EXPECT_EQ(first.cached_tokens, 0);
    expect_same_run(first, base_miss, true, "first run");
    const Outcome again = run_one(*s, base);
    EXPECT_GT(again.cached_tokens, 0);
    expect_same_run(again, base_miss, true, "prefix hit");
    const Outcome longer = run_one(*s, extended);
    EXPECT_GT(longer.cached_tokens, 0);
    expect_same_run(longer, extended_miss, true, "longer prompt, prefix hit");
    const Outcome seeded = run_one(*s, sampled);
    EXPECT_GT(seeded.cached_tokens, 0);
    expect_same_run(seeded, sampled_miss, false, "seeded request, prefix hit");
    const engine::EngineStats stats = s->engine().stats();
    EXPECT_GT(stats.prefix_hit_tokens, 0);
    if (s->config().num_state_slots > 0) {
        EXPECT_GT(stats.state_snapshot_hits, 0);
    }
}

TEST_P(EngineRunnerTest, PrefixHitGivesTheSameTokensAsAMiss) {
    check_prefix_hit({});
}

TEST_P(EngineRunnerTest, PrefixHitGivesTheSameTokensAsAMissWithAnFp8KvCache) {
    check_prefix_hit(fp8_kv(true));
}

void EngineRunnerTest::check_preemption(const EngineOptions& options, Compare compare) {
    std::vector<Request> requests;
    for (int i = 0; i < 4; ++i)
        requests.push_back(
            make_request(prompt(10 * i, 10 * i + 40), 40, i % 2 ? std::optional<uint64_t>(5 + i) : std::nullopt));
    auto roomy = start(options);
    ASSERT_TRUE(roomy);
    std::vector<Outcome> alone;
    for (const Request& r : requests)
        alone.push_back(run_one(*roomy, r));
    roomy.reset();

    EngineOptions tight = options;
    tight.max_model_len = 128;
    tight.num_kv_blocks = 8;  // one max_model_len sequence; four 80-token sequences cannot run together
    // Admitted on their prompts alone, so that they are preempted (the default would run them one by one).
    tight.admission = engine::AdmissionPolicy::kPromptOnly;
    auto s = start(tight);
    ASSERT_TRUE(s);
    const std::vector<Outcome> together = run_all(*s, requests);
    ASSERT_EQ(together.size(), requests.size());
    for (size_t i = 0; i < requests.size(); ++i)
        expect_same_run(together[i], alone[i], !requests[i].params.seed.has_value(), "request " + std::to_string(i),
                        compare);
    EXPECT_GT(s->engine().stats().num_preemptions, 0);
}

TEST_P(EngineRunnerTest, PreemptionDoesNotChangeTheTokens) {
    check_preemption({});
}

// Scales of 1.0: calculated ones would come from each engine's first step, which differ here (one request alone,
// four together), and the tokens with them. Recompute prefills the generated tokens that were decoded one by one, and
// even on the CPU a GEMV and a GEMM sum in different orders: K rows differ in their last bits, which e4m3 rounding
// can turn into a whole step (1/16 of a value). So the runs agree up to the first choice within that noise
// (measured on the CPU: qwen3_moe parts at step 24 of 40, the other models not at all; on an H200 a sampled
// qwen3_yarn request at step 2).
TEST_P(EngineRunnerTest, PreemptionDoesNotChangeTheTokensWithAnFp8KvCache) {
    g_model_noise = kFp8RecomputeNoise * g_model_noise / kLogprobNoise;
    check_preemption(fp8_kv(false), Compare::kUpToNoise);
}

// Decode steps replayed from recorded CUDA graphs (padded to a bucket, split-KV planned for max_model_len) give the
// tokens of eager steps (up to near-ties: expect_same_run). GPU only: the CPU backend records nothing.
TEST_P(EngineRunnerTest, CudaGraphsGiveTheTokensOfEagerSteps) {
    if (!on_gpu()) GTEST_SKIP() << "CUDA graphs need PAGODA_TEST_DEVICE=cuda";
    std::vector<Request> batch = others(24);
    batch.push_back(make_request(prompt(0, ref_.prompt_len), 24));
    EngineOptions eager;
    eager.enforce_eager = true;
    eager.enable_prefix_caching = false;
    auto e = start(eager);
    ASSERT_TRUE(e);
    const std::vector<Outcome> eager_out = run_all(*e, batch);
    const Outcome eager_alone = run_one(*e, batch.back());
    EXPECT_EQ(e->recorded_cuda_graphs(), 0u);
    EXPECT_EQ(e->scratch_growths_after_warm_up(), 0u);
    e.reset();

    EngineOptions graphs = eager;
    graphs.enforce_eager = false;
    auto g = start(graphs);
    ASSERT_TRUE(g);
    const std::vector<Outcome> graph_out = run_all(*g, batch);
    const Outcome graph_alone = run_one(*g, batch.back());
    EXPECT_GE(g->recorded_cuda_graphs(), 2u);  // the batch's bucket and the single sequence's at least
    EXPECT_GT(g->replayed_cuda_graphs(), g->recorded_cuda_graphs());  // most steps replayed, not recorded again
    EXPECT_EQ(g->scratch_growths_after_warm_up(), 0u);                // the warm-up step covered every step's scratch
    ASSERT_EQ(graph_out.size(), eager_out.size());
    for (size_t i = 0; i < batch.size(); ++i)
        expect_same_run(graph_out[i], eager_out[i], !batch[i].params.seed.has_value(), "request " + std::to_string(i));
    expect_same_run(graph_alone, eager_alone, true, "greedy request alone");
}

INSTANTIATE_TEST_SUITE_P(Golden, EngineRunnerTest,
                         ::testing::Values("qwen3", "qwen3_5", "qwen2", "qwen2_tied", "qwen3_moe", "qwen3_next",
                                           "qwen3_5_moe", "qwen3_yarn", "qwen3_5_yarn"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// create_engine sizes the pools from the model and reports what cannot work as an error.
TEST(CreateEngineTest, SizesPoolsAndRejectsWhatCannotWork) {
    const std::string hybrid = golden::dir("qwen3_5"), dense = golden::dir("qwen3");
    if (!file_exists(hybrid + "/config.json") || !file_exists(dense + "/config.json")) GTEST_SKIP() << "no golden data";
    EngineOptions options;
    options.max_model_len = 64;
    options.max_num_seqs = 3;
    options.num_threads = 1;
    auto h = create_engine(hybrid, options);
    ASSERT_TRUE(h.ok()) << h.message();
    EXPECT_EQ((*h)->config().max_state_snapshots, 3);
    EXPECT_EQ((*h)->config().num_state_slots, 2 * 3 + 3);
    EXPECT_EQ((*h)->config().num_kv_blocks, 3 * 4);  // three 64-token sequences fit in the default budget
    auto d = create_engine(dense, options);
    ASSERT_TRUE(d.ok()) << d.message();
    EXPECT_EQ((*d)->config().num_state_slots, 0);

    options.num_kv_blocks = 2;  // 32 tokens cannot hold one 64-token sequence
    auto small = create_engine(dense, options);
    ASSERT_FALSE(small.ok());
    EXPECT_NE(small.message().find("max_model_len"), std::string::npos) << small.message();
    auto missing = create_engine(golden::dir("no_such_model"), EngineOptions{});
    EXPECT_FALSE(missing.ok());

    options.num_kv_blocks = 0;
    options.max_model_len = 513;  // the golden models' max_position_embeddings is 512
    auto too_long = create_engine(dense, options);
    ASSERT_FALSE(too_long.ok());
    EXPECT_NE(too_long.message().find("context length (512: max_position_embeddings"), std::string::npos)
        << too_long.message();
    options.max_model_len = 512;
    EXPECT_TRUE(create_engine(dense, options).ok());
    // YaRN: original_max_position_embeddings (32) × factor (4).
    options.max_model_len = 129;
    auto yarn_too_long = create_engine(golden::dir("qwen3_yarn"), options);
    ASSERT_FALSE(yarn_too_long.ok());
    EXPECT_NE(yarn_too_long.message().find("(128: original_max_position_embeddings × the yarn factor"),
              std::string::npos)
        << yarn_too_long.message();
    options.max_model_len = 128;
    EXPECT_TRUE(create_engine(golden::dir("qwen3_yarn"), options).ok());
    // --fp8-activations reaches the model: a bf16 checkpoint has no fp8 projection to apply it to.
    options.max_model_len = 64;
    options.fp8_activations = true;
    auto w8a8 = create_engine(dense, options);
    ASSERT_FALSE(w8a8.ok());
    EXPECT_NE(w8a8.message().find("--fp8-activations"), std::string::npos) << w8a8.message();
    options.quantization = "fp8";
    EXPECT_TRUE(create_engine(dense, options).ok());
}

// The runner turns a bad batch into a step error instead of touching memory outside its pools.
TEST(ModelEngineRunnerTest, BadIdsAreStepErrors) {
    const std::string dir = golden::dir("qwen3_5");
    if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no golden data";
    std::unique_ptr<Backend> backend = make_cpu_backend({1});
    auto model = model::Model::load(dir, *backend);
    ASSERT_TRUE(model.ok()) << model.message();
    engine::EngineConfig config;
    config.num_kv_blocks = 4;
    config.num_state_slots = 2;
    auto runner = ModelEngineRunner::create(**model, config);
    ASSERT_TRUE(runner.ok()) << runner.message();

    const std::vector<int32_t> tokens = {1, 2, 3};
    const std::vector<int32_t> table = {0};
    ForwardBatchBuilder builder(16);
    builder.add_sequence(tokens, 0, table, 0);
    engine::StepInput input;
    input.batch = builder.view();
    engine::StepOutput ok = (*runner)->execute(input);
    ASSERT_TRUE(ok.status.ok()) << ok.status.message();
    EXPECT_EQ(ok.logits.size(), static_cast<size_t>((*model)->vocab_size()));

    const std::vector<int32_t> bad_table = {9};
    builder.clear();
    builder.add_sequence(tokens, 0, bad_table, 0);
    input.batch = builder.view();
    EXPECT_FALSE((*runner)->execute(input).status.ok());

    builder.clear();
    builder.add_sequence(tokens, 0, table, 5);  // state slot outside the pool
    input.batch = builder.view();
    EXPECT_FALSE((*runner)->execute(input).status.ok());

    builder.clear();
    builder.add_sequence(tokens, 0, table, 0);
    input.batch = builder.view();
    const std::vector<engine::StateCopy> copies = {{0, 7}};
    input.state_saves = copies;
    EXPECT_FALSE((*runner)->execute(input).status.ok());

    const std::vector<int32_t> bad_tokens = {1, 1 << 20};
    input.state_saves = {};
    builder.clear();
    builder.add_sequence(bad_tokens, 0, table, 0);
    input.batch = builder.view();
    EXPECT_FALSE((*runner)->execute(input).status.ok());
}

// The warm-up step reaches the scratch peak of every step the engine schedules under its config, so a mixed
// workload (chunked prefills next to decodes) reallocates nothing afterwards; a warm-up of smaller steps does not,
// and the same counter shows it.
TEST(ModelEngineRunnerTest, WarmUpCoversEveryStep) {
    const std::string dir = golden::dir("qwen3");
    if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no golden data";
    auto growths_with_warm_up_tokens = [&](int32_t warm_tokens) -> uint64_t {
        std::unique_ptr<Backend> backend = make_cpu_backend({1});
        auto model = model::Model::load(dir, *backend);
        EXPECT_TRUE(model.ok()) << model.message();
        if (!model.ok()) return 0;
        EngineOptions options;
        options.max_model_len = 160;
        options.max_num_seqs = 4;
        options.max_num_batched_tokens = 64;
        auto config = engine_config_for(**model, options);
        EXPECT_TRUE(config.ok()) << config.message();
        auto runner = ModelEngineRunner::create(**model, *config);
        EXPECT_TRUE(runner.ok()) << runner.message();
        engine::EngineConfig warm = *config;
        warm.max_num_batched_tokens = warm_tokens;
        const Status warmed = (*runner)->warm_up(warm);
        EXPECT_TRUE(warmed.ok()) << warmed.message();
        auto engine = engine::Engine::create(*config, **runner);
        EXPECT_TRUE(engine.ok()) << engine.message();
        std::vector<std::shared_ptr<RequestStream>> streams;
        for (int32_t len : {100, 30, 7, 1}) {
            std::vector<int32_t> prompt(static_cast<size_t>(len));
            for (int32_t i = 0; i < len; ++i)
                prompt[i] = 1 + (i * 37 + len) % 500;
            auto stream = (*engine)->submit(make_request(prompt, 6));
            EXPECT_TRUE(stream.ok()) << stream.message();
            if (stream.ok()) streams.push_back(std::move(stream).value());
        }
        for (auto& stream : streams)
            EXPECT_EQ(collect(*stream).reason, FinishReason::kLength);
        EXPECT_EQ((*engine)->stats().max_step_tokens, options.max_num_batched_tokens);  // full steps ran
        (*engine)->shutdown();
        return (*runner)->scratch_growths_after_warm_up();
    };
    EXPECT_EQ(growths_with_warm_up_tokens(64), 0u);
    EXPECT_GT(growths_with_warm_up_tokens(8), 0u);
}

}  // namespace
}  // namespace pagoda::executor
