#include "executor/device_sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/check.h"

namespace pagoda::executor {

using engine::SampleResult;
using engine::SamplingContext;
using engine::SamplingParams;
using engine::uniform_for;

DeviceSamplingBatch::DeviceSamplingBatch(int32_t vocab_size)
    : mask_words_((static_cast<size_t>(vocab_size) + 31) / 32), edit_of_(vocab_size, -1), counts_(vocab_size, 0) {}

void DeviceSamplingBatch::clear() {
    rows_.clear();
    edits_.clear();
    masks_.clear();
}

kernels::LogitEdit& DeviceSamplingBatch::edit(int32_t token) {
    PAGODA_CHECK(token >= 0 && token < static_cast<int32_t>(edit_of_.size()));
    if (edit_of_[token] < 0) {
        edit_of_[token] = static_cast<int32_t>(edits_.size());
        edits_.push_back({});
        edits_.back().token = token;
    }
    return edits_[edit_of_[token]];
}

void DeviceSamplingBatch::add(const SamplingContext& ctx, int32_t logits_row) {
    const SamplingParams& p = *ctx.params;
    kernels::SampleRow r;
    r.logits_row = logits_row;
    r.temperature = p.temperature_value();
    r.top_k = p.top_k_value();
    r.top_p = p.top_p_value();
    r.min_p = p.min_p_value();
    r.min_p_log = r.min_p > 0.0f ? std::log(r.min_p) : 0.0f;  // the CPU sampler's std::log(float)
    r.num_top = p.logprobs ? std::min(p.top_logprobs, kernels::kSampleMaxTop) : -1;
    r.uniform = uniform_for(ctx.seed, ctx.output_tokens.size());
    r.edit_begin = static_cast<int32_t>(edits_.size());
    if (!ctx.allowed_tokens.empty()) {
        PAGODA_CHECK(ctx.allowed_tokens.size() >= mask_words_);
        r.mask_row = static_cast<int32_t>(masks_.size() / mask_words_);
        masks_.insert(masks_.end(), ctx.allowed_tokens.begin(), ctx.allowed_tokens.begin() + mask_words_);
    }

    // The same steps as Sampler::process, recorded per token instead of applied.
    for (const auto& [token, bias] : p.logit_bias)
        edit(token).bias += bias;
    if (static_cast<int32_t>(ctx.output_tokens.size()) < p.min_tokens) {
        for (int32_t t : p.stop_token_ids)
            edit(t).masked = 1;
        if (!p.ignore_eos)
            for (int32_t t : ctx.eos_token_ids)
                edit(t).masked = 1;
    }
    if (const float rep = p.repetition_penalty_value(); rep != 1.0f) {
        for (int32_t t : ctx.prompt_tokens)
            edit(t).repetition_penalty = rep;
        for (int32_t t : ctx.output_tokens)
            edit(t).repetition_penalty = rep;
    }
    if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
        for (int32_t t : ctx.output_tokens)
            ++counts_[t];
        for (int32_t t : ctx.output_tokens) {
            if (counts_[t] == 0) continue;
            edit(t).subtract = p.frequency_penalty * static_cast<float>(counts_[t]) + p.presence_penalty;
            counts_[t] = 0;
        }
    }
    r.edit_end = static_cast<int32_t>(edits_.size());
    for (int32_t e = r.edit_begin; e < r.edit_end; ++e)
        edit_of_[edits_[e].token] = -1;
    rows_.push_back(r);
}

SampleResult to_sample_result(const kernels::SampledToken& t) {
    SampleResult r;
    r.token = t.token;
    r.logprob = t.logprob;
    r.num_top = std::clamp(t.num_top, 0, engine::kMaxTopLogprobs);
    for (int32_t i = 0; i < r.num_top; ++i)
        r.top[i] = {t.top_ids[i], t.top_logprobs[i]};
    return r;
}

void apply_edits(std::span<float> logits, std::span<const kernels::LogitEdit> edits) {
    for (const kernels::LogitEdit& e : edits) {
        float x = logits[e.token] + e.bias;
        if (e.masked) x = -std::numeric_limits<float>::infinity();
        if (e.repetition_penalty != 1.0f) x = x > 0.0f ? x / e.repetition_penalty : x * e.repetition_penalty;
        logits[e.token] = x - e.subtract;
    }
}

}  // namespace pagoda::executor
