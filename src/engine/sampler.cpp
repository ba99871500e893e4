// The CPU sampler. Order follows vLLM V1: bias and min_tokens mask, penalties, temperature (0 = greedy argmax),
// min_p, top_k, top_p, then an inverse-CDF draw with the request's RNG.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/check.h"

namespace pagoda::engine {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

float max_of(std::span<const float> v) {
    float m = kNegInf;
    for (float x : v)
        m = std::max(m, x);
    return m;
}

}  // namespace

double uniform_for(uint64_t seed, uint64_t index) {
    const uint64_t bits = splitmix64(splitmix64(seed) ^ (index * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull));
    return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

float log_softmax_at(std::span<const float> logits, int32_t token) {
    const float m = max_of(logits);
    double sum = 0.0;
    for (float x : logits)
        sum += std::exp(static_cast<double>(x) - m);
    return static_cast<float>(static_cast<double>(logits[token]) - m - std::log(sum));
}

int32_t logit_rank(std::span<const float> logits, int32_t token) {
    const float x = logits[token];
    int32_t above = 0;
    for (int32_t v = 0; v < static_cast<int32_t>(logits.size()); ++v)
        above += logits[v] > x || (logits[v] == x && v < token);
    return above + 1;
}

int32_t top_logprobs(std::span<const float> logits, int32_t k, std::span<TokenLogprob> out) {
    k = std::min<int32_t>({k, static_cast<int32_t>(out.size()), static_cast<int32_t>(logits.size())});
    if (k <= 0) return 0;
    // Insertion into a small sorted array: O(V * k) with k <= 20 beats sorting the vocabulary.
    int32_t n = 0;
    for (int32_t v = 0; v < static_cast<int32_t>(logits.size()); ++v) {
        const float x = logits[v];
        if (x == kNegInf) continue;  // masked out (structured output): not a candidate, and -inf is not JSON
        if (n == k && !(x > out[n - 1].logprob)) continue;
        int32_t i = (n < k) ? n++ : k - 1;
        while (i > 0 && out[i - 1].logprob < x) {
            out[i] = out[i - 1];
            --i;
        }
        out[i] = {v, x};
    }
    const float m = max_of(logits);
    double sum = 0.0;
    for (float x : logits)
        sum += std::exp(static_cast<double>(x) - m);
    const double lse = m + std::log(sum);
    for (int32_t i = 0; i < n; ++i)
        out[i].logprob = static_cast<float>(out[i].logprob - lse);
    return n;
}

Sampler::Sampler(int32_t vocab_size)
    : vocab_size_(vocab_size), work_(vocab_size), counts_(vocab_size, 0), in_context_(vocab_size, 0) {
    order_.reserve(vocab_size);
}

std::span<const float> Sampler::process(std::span<const float> logits, const SamplingContext& ctx) {
    PAGODA_CHECK(static_cast<int32_t>(logits.size()) == vocab_size_);
    const SamplingParams& p = *ctx.params;
    std::copy(logits.begin(), logits.end(), work_.begin());

    for (const auto& [token, bias] : p.logit_bias)
        work_[token] += bias;

    if (static_cast<int32_t>(ctx.output_tokens.size()) < p.min_tokens) {
        for (int32_t t : p.stop_token_ids)
            work_[t] = kNegInf;
        if (!p.ignore_eos)
            for (int32_t t : ctx.eos_token_ids)
                work_[t] = kNegInf;
    }

    // The penalties index by token: one outside the vocabulary (a placeholder of async scheduling never filled in)
    // would write outside the buffers. Checked where each token is first used as an index.
    auto check = [this](int32_t t) {
        PAGODA_CHECK_MSG(t >= 0 && t < vocab_size_, "sampling: a context token is outside the vocabulary");
    };
    const float rep = p.repetition_penalty_value();
    if (rep != 1.0f) {
        // vLLM semantics: each distinct token seen in prompt or output once; positive logits shrink, negative grow.
        auto penalise = [&](int32_t t) {
            check(t);
            if (in_context_[t]) return;
            in_context_[t] = 1;
            work_[t] = work_[t] > 0.0f ? work_[t] / rep : work_[t] * rep;
        };
        for (int32_t t : ctx.prompt_tokens)
            penalise(t);
        for (int32_t t : ctx.output_tokens)
            penalise(t);
        for (int32_t t : ctx.prompt_tokens)
            in_context_[t] = 0;
        for (int32_t t : ctx.output_tokens)
            in_context_[t] = 0;
    }
    if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
        for (int32_t t : ctx.output_tokens) {
            check(t);
            ++counts_[t];
        }
        for (int32_t t : ctx.output_tokens) {
            if (counts_[t] == 0) continue;  // already applied for this token
            work_[t] -= p.frequency_penalty * static_cast<float>(counts_[t]) + p.presence_penalty;
            counts_[t] = 0;
        }
    }
    return work_;
}

SampleResult Sampler::sample(std::span<const float> raw_logits, const SamplingContext& ctx) {
    const SamplingParams& p = *ctx.params;
    SampleResult result;
    std::span<const float> logits = raw_logits;
    if (!ctx.allowed_tokens.empty()) {
        PAGODA_CHECK(ctx.allowed_tokens.size() * 32 >= raw_logits.size());
        masked_.resize(raw_logits.size());
        for (size_t v = 0; v < raw_logits.size(); ++v)
            masked_[v] = (ctx.allowed_tokens[v >> 5] >> (v & 31)) & 1 ? raw_logits[v] : kNegInf;
        logits = masked_;
    }
    if (p.logprobs) result.num_top = top_logprobs(logits, p.top_logprobs, result.top);

    process(logits, ctx);
    const float temperature = p.temperature_value();
    std::span<float> w(work_);
    if (max_of(w) == kNegInf) return result;  // kNoToken

    if (temperature == 0.0f) {
        int32_t best = 0;
        for (int32_t v = 1; v < vocab_size_; ++v)
            if (w[v] > w[best]) best = v;
        result.token = best;
    } else {
        const float inv_t = 1.0f / temperature;
        for (float& x : w)
            x *= inv_t;
        const float m = max_of(w);

        const float min_p = p.min_p_value();
        if (min_p > 0.0f) {
            // p_v < min_p * p_max  <=>  logit_v - max < log(min_p)
            const float cut = std::log(min_p);
            for (float& x : w)
                if (x - m < cut) x = kNegInf;
        }

        order_.clear();
        for (int32_t v = 0; v < vocab_size_; ++v)
            if (w[v] > kNegInf) order_.push_back(v);
        auto by_logit = [&](int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); };

        const int32_t top_k = p.top_k_value();
        if (top_k > 0 && top_k < static_cast<int32_t>(order_.size())) {
            std::nth_element(order_.begin(), order_.begin() + (top_k - 1), order_.end(), by_logit);
            const float kth = w[order_[top_k - 1]];
            // Ties with the k-th value stay in, as in vLLM's threshold mask.
            for (int32_t v : order_)
                if (w[v] < kth) w[v] = kNegInf;
            std::erase_if(order_, [&](int32_t v) { return w[v] == kNegInf; });
        }

        const float top_p = p.top_p_value();
        if (top_p < 1.0f) {
            std::sort(order_.begin(), order_.end(), by_logit);
            double total = 0.0;
            for (int32_t v : order_)
                total += std::exp(static_cast<double>(w[v]) - m);
            // Keep the most likely tokens until their mass reaches top_p; always keep the first.
            double before = 0.0;
            size_t keep = 0;
            for (; keep < order_.size(); ++keep) {
                if (keep > 0 && before >= top_p * total) break;
                before += std::exp(static_cast<double>(w[order_[keep]]) - m);
            }
            for (size_t i = keep; i < order_.size(); ++i)
                w[order_[i]] = kNegInf;
            order_.resize(keep);
        }

        // Inverse CDF over the survivors in id order, so the draw does not depend on sort stability.
        double total = 0.0;
        for (int32_t v = 0; v < vocab_size_; ++v)
            if (w[v] > kNegInf) total += std::exp(static_cast<double>(w[v]) - m);
        const double target = uniform_for(ctx.seed, ctx.output_tokens.size()) * total;
        double acc = 0.0;
        int32_t chosen = -1;
        for (int32_t v = 0; v < vocab_size_; ++v) {
            if (w[v] == kNegInf) continue;
            chosen = v;
            acc += std::exp(static_cast<double>(w[v]) - m);
            if (acc > target) break;
        }
        result.token = chosen;
    }
    if (p.logprobs) result.logprob = log_softmax_at(logits, result.token);
    return result;
}

}  // namespace pagoda::engine
