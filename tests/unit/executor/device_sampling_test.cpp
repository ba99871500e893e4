// DeviceSamplingBatch: its edits, applied as a device applies them, must give exactly Sampler::process's logits, and
// its rows must carry the resolved parameters and the request's draw. (The CUDA kernel itself is compared with the
// CPU sampler in tests/unit/cuda/cuda_sampler_test.cpp, on the GPU machine.)
#include "executor/device_sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "engine/sampling_params.h"

namespace pagoda::executor {

using engine::kMaxTopLogprobs;
using engine::Sampler;
using engine::SampleResult;
using engine::SamplingContext;
using engine::SamplingParams;
using engine::uniform_for;
namespace {

constexpr int32_t kVocab = 300;

struct Case {
    SamplingParams params;
    std::vector<int32_t> prompt, output, eos{7, 9};
    uint64_t seed = 0;
};

Case random_case(std::mt19937& rng) {
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    auto coin = [&] { return pick(0, 1) == 1; };
    Case c;
    SamplingParams& p = c.params;
    if (coin()) p.temperature = coin() ? 0.0f : 0.3f + 0.1f * static_cast<float>(pick(0, 10));
    if (coin()) p.top_k = pick(0, 50);
    if (coin()) p.top_p = 0.05f * static_cast<float>(pick(1, 20));
    if (coin()) p.min_p = 0.02f * static_cast<float>(pick(0, 10));
    if (coin()) p.repetition_penalty = 0.5f + 0.1f * static_cast<float>(pick(0, 15));
    if (coin()) p.frequency_penalty = 0.25f * static_cast<float>(pick(-8, 8));
    if (coin()) p.presence_penalty = 0.25f * static_cast<float>(pick(-8, 8));
    for (int i = pick(0, 4); i > 0; --i) {
        const int32_t token = pick(0, kVocab - 1);
        bool seen = false;  // validate() refuses a token twice
        for (const auto& entry : p.logit_bias)
            seen = seen || entry.first == token;
        if (!seen) p.logit_bias.emplace_back(token, static_cast<float>(pick(-100, 100)) / 3.0f);
    }
    for (int i = pick(0, 2); i > 0; --i)
        p.stop_token_ids.push_back(pick(0, kVocab - 1));
    p.ignore_eos = coin();
    p.min_tokens = pick(0, 6);
    if (coin()) {
        p.logprobs = true;
        p.top_logprobs = pick(0, 20);
    }
    apply_generation_config(p, {});
    EXPECT_TRUE(validate(p, kVocab).ok());
    // Small token range so that prompt and output repeat tokens and overlap.
    for (int i = pick(0, 40); i > 0; --i)
        c.prompt.push_back(pick(0, 60));
    for (int i = pick(0, 12); i > 0; --i)
        c.output.push_back(pick(0, 60));
    c.seed = rng();
    return c;
}

SamplingContext context_of(const Case& c) {
    SamplingContext ctx;
    ctx.params = &c.params;
    ctx.prompt_tokens = c.prompt;
    ctx.output_tokens = c.output;
    ctx.eos_token_ids = c.eos;
    ctx.seed = c.seed;
    return ctx;
}

TEST(DeviceSampling, EditsEqualTheCpuProcessing) {
    std::mt19937 rng(99);
    std::normal_distribution<float> logit(0.0f, 3.0f);
    Sampler sampler(kVocab);
    DeviceSamplingBatch batch(kVocab);
    int edited_rows = 0;
    for (int trial = 0; trial < 400; ++trial) {
        // Several rows per batch: each row's edits must be its own (the per-token index is reset between rows).
        batch.clear();
        std::vector<Case> cases;
        for (int r = 0; r < 4; ++r)
            cases.push_back(random_case(rng));
        for (int r = 0; r < 4; ++r)
            batch.add(context_of(cases[r]), 10 + r);
        ASSERT_EQ(batch.rows().size(), 4u);
        for (int r = 0; r < 4; ++r) {
            const kernels::SampleRow& row = batch.rows()[r];
            const Case& c = cases[r];
            std::vector<float> raw(kVocab);
            for (float& x : raw)
                x = logit(rng);
            const std::span<const float> want = sampler.process(raw, context_of(c));
            std::vector<float> got = raw;
            const auto edits = batch.edits().subspan(row.edit_begin, row.edit_end - row.edit_begin);
            apply_edits(got, edits);
            for (int32_t v = 0; v < kVocab; ++v)
                ASSERT_EQ(got[v], want[v]) << "trial " << trial << " row " << r << " token " << v;
            std::set<int32_t> tokens;
            for (const kernels::LogitEdit& e : edits)
                EXPECT_TRUE(tokens.insert(e.token).second) << "token " << e.token << " edited twice in one row";
            edited_rows += !edits.empty();

            EXPECT_EQ(row.logits_row, 10 + r);
            EXPECT_EQ(row.temperature, c.params.temperature_value());
            EXPECT_EQ(row.top_k, c.params.top_k_value());
            EXPECT_EQ(row.top_p, c.params.top_p_value());
            EXPECT_EQ(row.min_p, c.params.min_p_value());
            if (row.min_p > 0) {
                EXPECT_EQ(row.min_p_log, std::log(row.min_p));
            }
            EXPECT_EQ(row.num_top, c.params.logprobs ? c.params.top_logprobs : -1);
            EXPECT_EQ(row.uniform, uniform_for(c.seed, c.output.size()));
        }
    }
    EXPECT_GT(edited_rows, 1000);
}

TEST(DeviceSampling, ResultConversion) {
    kernels::SampledToken t;
    t.token = 42;
    t.logprob = -1.5f;
    t.num_top = 2;
    t.top_ids[0] = 42, t.top_logprobs[0] = -1.5f;
    t.top_ids[1] = 7, t.top_logprobs[1] = -2.0f;
    const SampleResult r = to_sample_result(t);
    EXPECT_EQ(r.token, 42);
    EXPECT_EQ(r.logprob, -1.5f);
    ASSERT_EQ(r.num_top, 2);
    EXPECT_EQ(r.top[1].token, 7);
    EXPECT_EQ(r.top[1].logprob, -2.0f);
    t.num_top = 1000;  // a corrupt count is clamped, never read past the array
    EXPECT_EQ(to_sample_result(t).num_top, kMaxTopLogprobs);
}

// Structured output: a row with allowed_tokens carries its mask row, and the masks are the rows' own words in order.
TEST(DeviceSampling, MasksFollowTheirRows) {
    DeviceSamplingBatch batch(kVocab);
    const size_t words = (kVocab + 31) / 32;
    ASSERT_EQ(batch.mask_words(), words);
    SamplingParams p;
    engine::apply_generation_config(p, {});
    std::vector<uint32_t> a(words, 0), b(words, 0);
    a[0] = 0x5u, b[words - 1] = 0x80000000u >> (words * 32 - kVocab);
    SamplingContext with_a, plain, with_b;
    with_a.params = plain.params = with_b.params = &p;
    with_a.allowed_tokens = a;
    with_b.allowed_tokens = b;
    batch.add(with_a, 0);
    batch.add(plain, 1);
    batch.add(with_b, 2);
    ASSERT_EQ(batch.rows().size(), 3u);
    EXPECT_EQ(batch.rows()[0].mask_row, 0);
    EXPECT_EQ(batch.rows()[1].mask_row, -1);
    EXPECT_EQ(batch.rows()[2].mask_row, 1);
    ASSERT_EQ(batch.masks().size(), 2 * words);
    EXPECT_TRUE(std::equal(a.begin(), a.end(), batch.masks().begin()));
    EXPECT_TRUE(std::equal(b.begin(), b.end(), batch.masks().begin() + words));
    batch.clear();
    EXPECT_TRUE(batch.masks().empty());
}

}  // namespace
}  // namespace pagoda::executor
