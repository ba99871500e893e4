// SamplingParams: what a request asks of the sampler and the stop conditions, on token ids only (stop strings live
// in the server, which calls Engine::cancel when it finds one). Defaults come from generation_config.json.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "common/status.h"

namespace pagoda::grammar {
class CompiledGrammar;
}

namespace pagoda::engine {

// The sampling defaults a model ships in generation_config.json. Unset fields fall back to the OpenAI defaults.
struct GenerationConfig {
    std::optional<float> temperature;
    std::optional<float> top_p;
    std::optional<int32_t> top_k;
    std::optional<float> min_p;
    std::optional<float> repetition_penalty;
};

inline constexpr int32_t kMaxTopLogprobs = 20;

struct SamplingParams {
    int32_t n = 1;  // independent completions of one prompt; they share the prompt's KV blocks

    // Unset = take generation_config.json's value, else the OpenAI default (1, 1, disabled, 0, 1).
    // apply_generation_config() fills them; the sampler requires them set.
    std::optional<float> temperature;         // 0 = greedy
    std::optional<float> top_p;               // (0, 1]
    std::optional<int32_t> top_k;             // <= 0 = disabled
    std::optional<float> min_p;               // [0, 1]
    std::optional<float> repetition_penalty;  // > 0; 1 = off; over prompt and output tokens (vLLM semantics)

    float presence_penalty = 0.0f;                      // [-2, 2], over output tokens (OpenAI semantics)
    float frequency_penalty = 0.0f;                     // [-2, 2], over output tokens
    std::vector<std::pair<int32_t, float>> logit_bias;  // token id -> bias added to the raw logit, [-100, 100]

    std::optional<uint64_t> seed;  // same seed, same tokens, whatever else runs in the batch

    std::vector<int32_t> stop_token_ids;  // finish with "stop" when sampled (the token is part of the output)
    bool ignore_eos = false;              // the model's EOS ids do not stop the request
    int32_t min_tokens = 0;               // EOS and stop ids are masked out until this many tokens were generated
    std::optional<int32_t> max_tokens;    // unset = up to max_model_len

    // Log-probabilities of the sampled token and of the `top_logprobs` most likely ones. They are the log-softmax of
    // the RAW model logits (before bias, penalties, temperature and truncation), as vLLM returns by default.
    bool logprobs = false;
    int32_t top_logprobs = 0;  // [0, 20]

    // Structured output: every choice's tokens must follow this grammar (null: free text). Before each draw the
    // tokens the grammar does not allow next are set to -inf, so the logprobs above are those of the masked
    // distribution, as vLLM's are; EOS is allowed only where the grammar may end. Shared by requests with the same
    // grammar (its mask cache is shared too).
    std::shared_ptr<const grammar::CompiledGrammar> grammar;
    // Reasoning models: the grammar applies only after this token (Qwen's </think>) has been generated; before it
    // the output is free (vLLM's reasoning-aware structured output). Unset: from the first token.
    std::optional<int32_t> grammar_after_token;

    // Number of top log-probabilities per prompt token. A request that asks for them bypasses the prefix cache,
    // since cached tokens produce no logits.
    std::optional<int32_t> prompt_logprobs;

    // Resolved values (after apply_generation_config).
    float temperature_value() const { return temperature.value_or(1.0f); }
    float top_p_value() const { return top_p.value_or(1.0f); }
    int32_t top_k_value() const { return top_k.value_or(0); }
    float min_p_value() const { return min_p.value_or(0.0f); }
    float repetition_penalty_value() const { return repetition_penalty.value_or(1.0f); }
    // The penalties read the tokens generated so far, not just their number (async scheduling waits for them).
    bool reads_output_tokens() const {
        return repetition_penalty_value() != 1.0f || frequency_penalty != 0.0f || presence_penalty != 0.0f;
    }
};

// Fills the unset fields from the model's generation config (request values win), then from the OpenAI defaults.
void apply_generation_config(SamplingParams& params, const GenerationConfig& config);

// Checks ranges; `vocab_size` bounds token ids in logit_bias and stop_token_ids. Messages name the field.
Status validate(const SamplingParams& params, int32_t vocab_size);

}  // namespace pagoda::engine
