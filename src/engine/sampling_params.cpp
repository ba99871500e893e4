// Defaults merging and range checks of SamplingParams.
#include "engine/sampling_params.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace pagoda::engine {

void apply_generation_config(SamplingParams& p, const GenerationConfig& c) {
    if (!p.temperature) p.temperature = c.temperature.value_or(1.0f);
    if (!p.top_p) p.top_p = c.top_p.value_or(1.0f);
    if (!p.top_k) p.top_k = c.top_k.value_or(0);
    if (!p.min_p) p.min_p = c.min_p.value_or(0.0f);
    if (!p.repetition_penalty) p.repetition_penalty = c.repetition_penalty.value_or(1.0f);
}

namespace {
Status range_error(const char* field, const std::string& want, double got) {
    return Status::error(std::string(field) + " must be " + want + ", got " + std::to_string(got));
}
bool finite(float v) {
    return std::isfinite(v);
}
}  // namespace

Status validate(const SamplingParams& p, int32_t vocab_size) {
    if (p.n < 1 || p.n > 128) return range_error("n", "in [1, 128]", p.n);
    const float t = p.temperature_value();
    if (!finite(t) || t < 0.0f) return range_error("temperature", ">= 0", t);
    const float top_p = p.top_p_value();
    if (!finite(top_p) || top_p <= 0.0f || top_p > 1.0f) return range_error("top_p", "in (0, 1]", top_p);
    const int32_t top_k = p.top_k_value();
    if (top_k < -1) return range_error("top_k", "-1, 0 (disabled) or positive", top_k);
    const float min_p = p.min_p_value();
    if (!finite(min_p) || min_p < 0.0f || min_p > 1.0f) return range_error("min_p", "in [0, 1]", min_p);
    const float rep = p.repetition_penalty_value();
    if (!finite(rep) || rep <= 0.0f) return range_error("repetition_penalty", "> 0", rep);
    if (!finite(p.presence_penalty) || p.presence_penalty < -2.0f || p.presence_penalty > 2.0f)
        return range_error("presence_penalty", "in [-2, 2]", p.presence_penalty);
    if (!finite(p.frequency_penalty) || p.frequency_penalty < -2.0f || p.frequency_penalty > 2.0f)
        return range_error("frequency_penalty", "in [-2, 2]", p.frequency_penalty);
    for (const auto& [token, bias] : p.logit_bias) {
        if (token < 0 || token >= vocab_size)
            return Status::error("logit_bias token id " + std::to_string(token) + " is outside the vocabulary [0, " +
                                 std::to_string(vocab_size) + ")");
        if (!finite(bias) || bias < -100.0f || bias > 100.0f)
            return range_error("logit_bias value", "in [-100, 100]", bias);
    }
    // One bias per token ("24" and "024" name the same one): the samplers add a token's bias once.
    std::vector<int32_t> biased;
    for (const auto& entry : p.logit_bias)
        biased.push_back(entry.first);
    std::sort(biased.begin(), biased.end());
    if (auto dup = std::adjacent_find(biased.begin(), biased.end()); dup != biased.end())
        return Status::error("logit_bias lists token id " + std::to_string(*dup) + " more than once");
    for (int32_t token : p.stop_token_ids) {
        if (token < 0 || token >= vocab_size)
            return Status::error("stop_token_ids entry " + std::to_string(token) + " is outside the vocabulary [0, " +
                                 std::to_string(vocab_size) + ")");
    }
    if (p.max_tokens && *p.max_tokens < 1) return range_error("max_tokens", ">= 1", *p.max_tokens);
    if (p.min_tokens < 0) return range_error("min_tokens", ">= 0", p.min_tokens);
    if (p.max_tokens && p.min_tokens > *p.max_tokens)
        return Status::error("min_tokens (" + std::to_string(p.min_tokens) + ") must not exceed max_tokens (" +
                             std::to_string(*p.max_tokens) + ")");
    if (p.top_logprobs < 0 || p.top_logprobs > kMaxTopLogprobs)
        return range_error("top_logprobs", "in [0, 20]", p.top_logprobs);
    if (p.top_logprobs > 0 && !p.logprobs) return Status::error("top_logprobs requires logprobs to be true");
    if (p.prompt_logprobs && (*p.prompt_logprobs < 0 || *p.prompt_logprobs > kMaxTopLogprobs))
        return range_error("prompt_logprobs", "in [0, 20]", *p.prompt_logprobs);
    // The grammar may allow nothing but EOS while min_tokens forbids it: no token would be left to draw.
    if (p.grammar && p.min_tokens > 0) return Status::error("min_tokens cannot be combined with structured output");
    return ok_status();
}

}  // namespace pagoda::engine
