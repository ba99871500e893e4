// RoPE frequency tables. Every step that transformers takes in fp32 is taken in fp32 here, in the same order, so the
// tables agree with its inv_freq buffers to the last bit or so; the range arithmetic it does in Python is double.
#include "runtime/rope_table.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "common/check.h"

namespace pagoda {
namespace {

// theta^(2j/rotary_dim) for each pair: the period multiplier both tables start from.
std::vector<float> pair_periods(float theta, int rotary_dim) {
    PAGODA_CHECK(rotary_dim > 0 && rotary_dim % 2 == 0);
    std::vector<float> p(static_cast<size_t>(rotary_dim / 2));
    for (size_t j = 0; j < p.size(); ++j)
        p[j] = std::pow(theta, static_cast<float>(2 * j) / static_cast<float>(rotary_dim));
    return p;
}

// The (fractional) pair index at which a pair turns `rotations` times over `context` positions.
double correction_dim(double rotations, double dim, double theta, double context) {
    return dim * std::log(context / (rotations * 2 * std::numbers::pi)) / (2 * std::log(theta));
}

}  // namespace

RopeTable default_rope_table(float theta, int rotary_dim) {
    RopeTable t;
    t.inv_freq = pair_periods(theta, rotary_dim);
    for (float& f : t.inv_freq)
        f = 1.0f / f;
    return t;
}

RopeTable yarn_rope_table(const YarnParams& p) {
    const std::vector<float> periods = pair_periods(static_cast<float>(p.theta), p.rotary_dim);
    const double dim = p.rotary_dim;
    double low = correction_dim(p.beta_fast, dim, p.theta, p.original_max_position_embeddings);
    double high = correction_dim(p.beta_slow, dim, p.theta, p.original_max_position_embeddings);
    if (p.truncate) low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0), high = std::min(high, dim - 1);
    if (low == high) high += 0.001;  // a one-point ramp would divide by zero
    const auto from = static_cast<float>(low), width = static_cast<float>(high - low);
    const auto factor = static_cast<float>(p.factor);
    RopeTable t;
    t.attention_factor = static_cast<float>(p.attention_factor);
    t.inv_freq.resize(periods.size());
    for (size_t j = 0; j < periods.size(); ++j) {
        const float ramp = std::clamp((static_cast<float>(j) - from) / width, 0.0f, 1.0f);
        const float keep = 1.0f - ramp;  // the weight of the unscaled frequency
        const float extrapolated = 1.0f / periods[j], interpolated = 1.0f / (factor * periods[j]);
        t.inv_freq[j] = interpolated * (1.0f - keep) + extrapolated * keep;
    }
    return t;
}

double yarn_mscale(double factor, double mscale) {
    return factor <= 1.0 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}

}  // namespace pagoda
