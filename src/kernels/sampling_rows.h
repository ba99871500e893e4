// The device sampler's plain row description, shared by the CUDA kernel (kernels/cuda/sampling.cu, C++17) and the
// runtime (runtime/device_sampler.h). The engine's per-token adjustments (logit_bias, the min_tokens mask,
// repetition/frequency/presence penalties) arrive flattened into one LogitEdit per touched token, so the kernel needs
// no request state; engine/device_sampling.cpp builds them and says how they equal the CPU sampler's processing.
#pragma once

#include <cstdint>

namespace pagoda::kernels {

inline constexpr int kSampleMaxTop = 20;

struct SampleRow {
    int32_t logits_row = 0;  // row of the logits tensor; its values are overwritten (edits, masks)
    int32_t top_k = 0;       // <= 0: off
    float temperature = 0;   // 0: greedy argmax (lowest id among equal maxima)
    float top_p = 1;         // 1: off
    float min_p_log = 0;     // log(min_p), computed on the host (the CPU sampler's std::log); used when min_p > 0
    float min_p = 0;         // 0: off
    int32_t num_top = -1;    // top logprobs wanted, 0..kSampleMaxTop; -1: no logprobs at all
    int32_t edit_begin = 0;  // this row's edits are [edit_begin, edit_end) of the edit array, one per token
    int32_t edit_end = 0;
    // Structured output: row of the token masks (ceil(V / 32) words each, bit t = token t allowed); the others are
    // -inf before anything else, logprobs included. -1: no mask.
    int32_t mask_row = -1;
    double uniform = 0;  // the request's draw for this token, in [0, 1)
};

// new = raw + bias; -inf when masked; then x > 0 ? x / repetition_penalty : x * repetition_penalty; then - subtract.
struct LogitEdit {
    int32_t token = 0;
    int32_t masked = 0;
    float bias = 0;
    float repetition_penalty = 1;
    float subtract = 0;
};

struct SampledToken {
    int32_t token = -1;   // -1 with error = 1: every token was masked out
    float logprob = 0;    // log-softmax of the raw logits at `token` (when num_top >= 0)
    int32_t num_top = 0;  // entries of top_*, most likely first (ties: lower id first)
    int32_t error = 0;
    int32_t top_ids[kSampleMaxTop] = {};
    float top_logprobs[kSampleMaxTop] = {};
};

}  // namespace pagoda::kernels
