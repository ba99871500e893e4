// CPU sampler over one fp32 logits row: logit_bias, min_tokens masking, penalties, temperature, min_p, top_k, top_p,
// then a draw from a counter-based per-request RNG (seed, token index), so a seeded request gives the same tokens
// whatever else shares its batch and however often it was preempted.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampling_params.h"

namespace pagoda::engine {

struct TokenLogprob {
    int32_t token = 0;
    float logprob = 0.0f;
};

// A row whose every token is masked out (a grammar that allows nothing more, the model having no EOS token to end
// with) samples no token; the engine ends that choice, not the step.
inline constexpr int32_t kNoToken = -1;

struct SampleResult {
    int32_t token = kNoToken;
    float logprob = 0.0f;  // raw log-softmax of the sampled token (valid when params.logprobs)
    int32_t num_top = 0;   // entries of `top`, most likely first
    std::array<TokenLogprob, kMaxTopLogprobs> top{};
};

// What the sampler needs to know about one sequence. Spans stay owned by the caller.
struct SamplingContext {
    const SamplingParams* params = nullptr;  // resolved (apply_generation_config done)
    // The token values may be read only when params->reads_output_tokens(): with async scheduling the engine makes
    // the views valid for those rows alone (engine.cpp, prepare_sampling); the others have only the right size.
    std::span<const int32_t> prompt_tokens;  // for repetition_penalty
    std::span<const int32_t> output_tokens;  // for all penalties and min_tokens; its size is the token index
    std::span<const int32_t> eos_token_ids;  // masked while output < min_tokens (unless ignore_eos... see .cpp)
    uint64_t seed = 0;                       // the request's seed (or one the engine drew for it)
    // Structured output: bit t (word t / 32) set = token t may be drawn; the others count as -inf logits from the
    // start, logprobs included. Empty: every token may be drawn.
    std::span<const uint32_t> allowed_tokens;
};

// Uniform double in [0, 1) for token `index` of a request with `seed`: a pure function, the per-request RNG.
double uniform_for(uint64_t seed, uint64_t index);

// log-softmax of `logits` at `token`, and the `k` most likely tokens (ties: lower id first; -inf ones left out).
float log_softmax_at(std::span<const float> logits, int32_t token);
int32_t top_logprobs(std::span<const float> logits, int32_t k, std::span<TokenLogprob> out);
// 1-based rank of `token` by logit, ties ordered as top_logprobs orders them (lower id first): top_logprobs' i-th
// entry has rank i + 1.
int32_t logit_rank(std::span<const float> logits, int32_t token);

class Sampler {
  public:
    explicit Sampler(int32_t vocab_size);

    SampleResult sample(std::span<const float> logits, const SamplingContext& ctx);

    // The logits after bias, masking and penalties (before temperature); exposed for tests.
    std::span<const float> process(std::span<const float> logits, const SamplingContext& ctx);

  private:
    int32_t vocab_size_;
    std::vector<float> masked_;        // the row with the grammar's disallowed tokens at -inf (structured output)
    std::vector<float> work_;          // processed logits of the current row
    std::vector<int32_t> counts_;      // output-token counts, zeroed again after each row
    std::vector<uint8_t> in_context_;  // prompt or output contains the token, zeroed again after each row
    std::vector<int32_t> order_;       // candidate ids for top_k / top_p
};

}  // namespace pagoda::engine
