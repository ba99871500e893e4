// Sampler and SamplingParams against references computed here independently (long double softmax, sorted masks).
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "engine/sampling_params.h"

namespace pagoda::engine {
namespace {

constexpr int32_t kVocab = 40;

std::vector<float> random_logits(uint32_t seed, int32_t vocab = kVocab) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-3.0f, 3.0f);
    std::vector<float> v(vocab);
    for (float& x : v)
        x = d(rng);
    return v;
}

SamplingParams resolved(SamplingParams p) {
    apply_generation_config(p, {});
    return p;
}

// Reference distribution: softmax(logits / t) restricted to `keep`.
std::vector<long double> reference_probs(const std::vector<float>& logits, float t, const std::vector<bool>& keep) {
    std::vector<long double> p(logits.size(), 0.0L);
    long double m = -INFINITY;
    for (size_t i = 0; i < logits.size(); ++i)
        if (keep[i]) m = std::max(m, static_cast<long double>(logits[i]) / t);
    long double sum = 0;
    for (size_t i = 0; i < logits.size(); ++i)
        if (keep[i]) sum += p[i] = std::exp(static_cast<long double>(logits[i]) / t - m);
    for (auto& x : p)
        x /= sum;
    return p;
}

// Draws `n` tokens with seeds 0..n-1 and compares frequencies with `want` within 5 standard deviations.
void expect_distribution(const std::vector<float>& logits, const SamplingParams& p,
                         const std::vector<long double>& want, int n = 40000) {
    Sampler sampler(static_cast<int32_t>(logits.size()));
    std::vector<int> counts(logits.size(), 0);
    for (int i = 0; i < n; ++i) {
        SamplingContext ctx;
        ctx.params = &p;
        ctx.seed = static_cast<uint64_t>(i) * 7919u + 1;
        ++counts[sampler.sample(logits, ctx).token];
    }
    for (size_t v = 0; v < logits.size(); ++v) {
        const double pr = static_cast<double>(want[v]);
        if (pr == 0.0) {
            EXPECT_EQ(counts[v], 0) << "token " << v << " is masked out but was drawn";
            continue;
        }
        const double freq = static_cast<double>(counts[v]) / n;
        const double sd = std::sqrt(pr * (1 - pr) / n);
        EXPECT_NEAR(freq, pr, 5 * sd + 1e-4) << "token " << v;
    }
}

TEST(SamplingParams, GenerationConfigFillsOnlyUnsetFields) {
    GenerationConfig g;
    g.temperature = 0.7f;
    g.top_p = 0.8f;
    g.top_k = 20;
    g.repetition_penalty = 1.05f;
    SamplingParams p;
    p.temperature = 0.2f;  // the request's value wins
    apply_generation_config(p, g);
    EXPECT_FLOAT_EQ(*p.temperature, 0.2f);
    EXPECT_FLOAT_EQ(*p.top_p, 0.8f);
    EXPECT_EQ(*p.top_k, 20);
    EXPECT_FLOAT_EQ(*p.min_p, 0.0f);  // neither: the OpenAI default
    EXPECT_FLOAT_EQ(*p.repetition_penalty, 1.05f);
}

TEST(SamplingParams, ValidateNamesTheField) {
    auto bad = [](auto mutate, const char* field) {
        SamplingParams p;
        mutate(p);
        apply_generation_config(p, {});
        Status s = validate(p, kVocab);
        ASSERT_FALSE(s.ok()) << field;
        EXPECT_NE(s.message().find(field), std::string::npos) << s.message();
    };
    bad([](SamplingParams& p) { p.temperature = -1; }, "temperature");
    bad([](SamplingParams& p) { p.top_p = 0; }, "top_p");
    bad([](SamplingParams& p) { p.min_p = 1.5f; }, "min_p");
    bad([](SamplingParams& p) { p.repetition_penalty = 0; }, "repetition_penalty");
    bad([](SamplingParams& p) { p.presence_penalty = 3; }, "presence_penalty");
    bad([](SamplingParams& p) { p.logit_bias = {{kVocab, 1.0f}}; }, "logit_bias");
    bad([](SamplingParams& p) { p.logit_bias = {{3, 1.0f}, {4, 1.0f}, {3, 2.0f}}; }, "more than once");
    bad([](SamplingParams& p) { p.stop_token_ids = {-1}; }, "stop_token_ids");
    bad([](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens");
    bad([](SamplingParams& p) { p.min_tokens = 5, p.max_tokens = 4; }, "min_tokens");
    bad([](SamplingParams& p) { p.logprobs = true, p.top_logprobs = 21; }, "top_logprobs");
    bad([](SamplingParams& p) { p.n = 0; }, "n ");
    SamplingParams ok;
    apply_generation_config(ok, {});
    EXPECT_TRUE(validate(ok, kVocab).ok());
}

TEST(Sampler, GreedyIsArgmaxAfterBias) {
    Sampler sampler(kVocab);
    for (uint32_t seed = 0; seed < 50; ++seed) {
        auto logits = random_logits(seed);
        SamplingParams p = resolved([] {
            SamplingParams q;
            q.temperature = 0.0f;
            return q;
        }());
        const int32_t biased = static_cast<int32_t>(seed % kVocab);
        if (seed % 2) p.logit_bias = {{biased, 100.0f}};
        SamplingContext ctx;
        ctx.params = &p;
        ctx.seed = seed;
        const int32_t want =
            seed % 2 ? biased : static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        EXPECT_EQ(sampler.sample(logits, ctx).token, want);
    }
}

TEST(Sampler, PenaltiesMatchTheirDefinitions) {
    const auto logits = random_logits(7);
    SamplingParams p;
    p.repetition_penalty = 1.3f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    p = resolved(p);
    const std::vector<int32_t> prompt = {1, 2, 2, 3};
    const std::vector<int32_t> output = {3, 5, 5, 5, 6};
    Sampler sampler(kVocab);
    SamplingContext ctx;
    ctx.params = &p;
    ctx.prompt_tokens = prompt;
    ctx.output_tokens = output;
    auto got = sampler.process(logits, ctx);
    for (int32_t v = 0; v < kVocab; ++v) {
        float want = logits[v];
        const bool seen = std::count(prompt.begin(), prompt.end(), v) + std::count(output.begin(), output.end(), v) > 0;
        if (seen) want = want > 0 ? want / 1.3f : want * 1.3f;
        const auto count = std::count(output.begin(), output.end(), v);
        want -= 0.25f * static_cast<float>(count) + (count > 0 ? 0.5f : 0.0f);
        EXPECT_NEAR(got[v], want, 1e-5) << "token " << v;
    }
}

TEST(Sampler, MinTokensMasksEosAndStopIds) {
    auto logits = random_logits(3);
    logits[4] = 50.0f;  // EOS, by far the most likely
    logits[9] = 49.0f;  // a stop id
    SamplingParams p;
    p.temperature = 0.0f;
    p.min_tokens = 2;
    p.stop_token_ids = {9};
    p = resolved(p);
    const std::vector<int32_t> eos = {4};
    Sampler sampler(kVocab);
    SamplingContext ctx;
    ctx.params = &p;
    ctx.eos_token_ids = eos;
    std::vector<int32_t> out = {11};
    ctx.output_tokens = out;
    int32_t best_other = 0;
    for (int32_t v = 0; v < kVocab; ++v)
        if (v != 4 && v != 9 && logits[v] > logits[best_other]) best_other = v;
    EXPECT_EQ(sampler.sample(logits, ctx).token, best_other);
    out.push_back(12);  // min_tokens reached
    ctx.output_tokens = out;
    EXPECT_EQ(sampler.sample(logits, ctx).token, 4);
    // ignore_eos: EOS is no stop, so it is not masked; the stop id still is.
    p.ignore_eos = true;
    out.pop_back();
    ctx.output_tokens = out;
    EXPECT_EQ(sampler.sample(logits, ctx).token, 4);
}

TEST(Sampler, TemperatureFollowsSoftmax) {
    const auto logits = random_logits(11, 12);
    SamplingParams p;
    p.temperature = 0.7f;
    p = resolved(p);
    expect_distribution(logits, p, reference_probs(logits, 0.7f, std::vector<bool>(logits.size(), true)));
}

TEST(Sampler, TopKKeepsTheKMostLikely) {
    const auto logits = random_logits(12, 16);
    SamplingParams p;
    p.temperature = 1.3f;
    p.top_k = 5;
    p = resolved(p);
    auto sorted = logits;
    std::sort(sorted.rbegin(), sorted.rend());
    std::vector<bool> keep(logits.size());
    for (size_t v = 0; v < logits.size(); ++v)
        keep[v] = logits[v] >= sorted[4];
    expect_distribution(logits, p, reference_probs(logits, 1.3f, keep));
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
    const auto logits = random_logits(13, 16);
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_p = 0.6f;
    p = resolved(p);
    const auto full = reference_probs(logits, 1.0f, std::vector<bool>(logits.size(), true));
    std::vector<std::pair<long double, int>> by_prob;
    for (size_t v = 0; v < full.size(); ++v)
        by_prob.emplace_back(full[v], static_cast<int>(v));
    std::sort(by_prob.rbegin(), by_prob.rend());
    std::vector<bool> keep(logits.size(), false);
    long double cum = 0;
    for (auto [pr, v] : by_prob) {
        keep[v] = true;
        cum += pr;
        if (cum >= 0.6L) break;
    }
    expect_distribution(logits, p, reference_probs(logits, 1.0f, keep));
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
    const auto logits = random_logits(14, 16);
    SamplingParams p;
    p.temperature = 0.9f;
    p.min_p = 0.2f;
    p = resolved(p);
    const auto full = reference_probs(logits, 0.9f, std::vector<bool>(logits.size(), true));
    const long double pmax = *std::max_element(full.begin(), full.end());
    std::vector<bool> keep(logits.size());
    for (size_t v = 0; v < full.size(); ++v)
        keep[v] = full[v] >= 0.2L * pmax;
    expect_distribution(logits, p, reference_probs(logits, 0.9f, keep));
}

TEST(Sampler, SeededDrawDependsOnlyOnSeedAndIndex) {
    const auto logits = random_logits(15);
    SamplingParams p;
    p.temperature = 1.0f;
    p = resolved(p);
    Sampler a(kVocab), b(kVocab);
    std::vector<int32_t> out;
    SamplingContext ctx;
    ctx.params = &p;
    ctx.seed = 42;
    std::vector<int32_t> first;
    for (int i = 0; i < 30; ++i) {
        ctx.output_tokens = out;
        const int32_t t = a.sample(logits, ctx).token;
        // Another sampler, other work in between: the same token.
        SamplingContext other = ctx;
        other.seed = 7;
        b.sample(logits, other);
        EXPECT_EQ(b.sample(logits, ctx).token, t);
        out.push_back(t);
    }
    // uniform_for looks uniform: mean and a coarse histogram.
    std::vector<int> hist(10, 0);
    double sum = 0;
    for (int i = 0; i < 100000; ++i) {
        const double u = uniform_for(3, i);
        ASSERT_TRUE(u >= 0.0 && u < 1.0);
        sum += u;
        ++hist[static_cast<int>(u * 10)];
    }
    EXPECT_NEAR(sum / 100000, 0.5, 0.005);
    for (int h : hist)
        EXPECT_NEAR(h, 10000, 500);
}

TEST(Sampler, LogprobsAreRawLogSoftmax) {
    const auto logits = random_logits(16);
    SamplingParams p;
    p.temperature = 0.5f;
    p.top_k = 3;
    p.logprobs = true;
    p.top_logprobs = 5;
    p.logit_bias = {{0, 5.0f}};  // processing does not change the reported (raw) logprobs
    p = resolved(p);
    long double lse = 0;
    for (float x : logits)
        lse += std::exp(static_cast<long double>(x));
    lse = std::log(lse);
    Sampler sampler(kVocab);
    SamplingContext ctx;
    ctx.params = &p;
    ctx.seed = 1;
    const SampleResult r = sampler.sample(logits, ctx);
    EXPECT_NEAR(r.logprob, static_cast<double>(logits[r.token] - lse), 1e-5);
    ASSERT_EQ(r.num_top, 5);
    std::vector<int32_t> order(kVocab);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    for (int i = 0; i < 5; ++i) {
        EXPECT_EQ(r.top[i].token, order[i]);
        EXPECT_NEAR(r.top[i].logprob, static_cast<double>(logits[order[i]] - lse), 1e-5);
    }
}

// A structured-output mask that allows nothing (a finished grammar whose model has no EOS token) samples no token,
// greedy or not: the engine ends that choice. It used to abort the process.
TEST(Sampler, AnEmptyMaskSamplesNoToken) {
    const std::vector<float> logits = random_logits(11);
    const std::vector<uint32_t> nothing((kVocab + 31) / 32, 0u);
    Sampler sampler(kVocab);
    for (float t : {0.0f, 1.0f}) {
        SamplingParams p;
        p.temperature = t;
        p.logprobs = true;
        p.top_logprobs = 3;
        p = resolved(p);
        SamplingContext ctx;
        ctx.params = &p;
        ctx.allowed_tokens = nothing;
        const SampleResult r = sampler.sample(logits, ctx);
        EXPECT_EQ(r.token, kNoToken) << "temperature " << t;
        EXPECT_EQ(r.num_top, 0);
    }
}

}  // namespace
}  // namespace pagoda::engine
