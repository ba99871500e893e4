// The rotation RoPE applies, worked out once per model from its config: pair j (dims j and j + rotary_dim/2) turns
// by position * inv_freq[j], and cos/sin are scaled by attention_factor. The ops take this table rather than a theta,
// so a rope scaling (YaRN) is computed in one place and every backend applies exactly the same frequencies.
#pragma once

#include <vector>

namespace pagoda {

struct RopeTable {
    std::vector<float> inv_freq;    // rotary_dim / 2 entries
    float attention_factor = 1.0f;  // multiplies cos and sin (YaRN's mscale; 1 for plain RoPE)

    int rotary_dim() const { return 2 * static_cast<int>(inv_freq.size()); }
};

// Plain RoPE: inv_freq[j] = theta^(-2j/rotary_dim), formed in fp32 as transformers forms it (long positions round
// alike).
RopeTable default_rope_table(float theta, int rotary_dim);

// YaRN (arXiv 2309.00071), as transformers' _compute_yarn_parameters: pairs that turn more than beta_fast times
// within the original context keep their frequency (extrapolation), pairs that turn less than beta_slow times are
// slowed by `factor` (interpolation), and a linear ramp over the pairs in between blends the two.
struct YarnParams {
    double theta = 10000.0;
    int rotary_dim = 0;  // the rotating dims only (partial RoPE counts its own)
    double factor = 1.0;
    double original_max_position_embeddings = 0;
    double beta_fast = 32.0, beta_slow = 1.0;
    bool truncate = true;           // widen the ramp's range to whole dims
    double attention_factor = 1.0;  // already resolved (yarn_mscale)
};
RopeTable yarn_rope_table(const YarnParams& p);

// YaRN's attention scale: 0.1 * mscale * ln(factor) + 1 when factor > 1, else 1.
double yarn_mscale(double factor, double mscale = 1.0);

}  // namespace pagoda
