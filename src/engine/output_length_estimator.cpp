// Output-length survival curve for admission control.
#include "engine/output_length_estimator.h"

#include <algorithm>

#include "common/check.h"

namespace pagoda::engine {

namespace {
// Bins 8 tokens wide for short outputs, then 15% wider each: about 80 bins up to 2^21 tokens, fine where short
// answers end and coarse where only the few long ones are.
constexpr int32_t kFirstWidth = 8;
constexpr double kGrowth = 1.15;
constexpr int32_t kLastEdge = 1 << 21;
}  // namespace

OutputLengthEstimator::OutputLengthEstimator() {
    int32_t e = 0;
    edges_.push_back(e);
    while (e < kLastEdge) {
        e = std::max(e + kFirstWidth, static_cast<int32_t>(e * kGrowth + 0.5));
        edges_.push_back(e);
    }
    const size_t bins = edges_.size() - 1;
    direct_bin_.resize(kDirectLengths);
    for (int32_t length = 0, b = 0; length < kDirectLengths; ++length) {
        while (edges_[b + 1] <= length)
            ++b;
        direct_bin_[length] = static_cast<uint8_t>(b);
    }
    ended_.assign(bins, 0.0);
    cut_.assign(bins, 0.0);
    running_.assign(bins, 0.0);
    hazard_.assign(bins, 0.0);
    s_.assign(bins + 1, 1.0);
    area_.resize(bins + 1);
    end_pass();
}

int32_t OutputLengthEstimator::bin_of(int32_t length) const {
    length = std::max(length, 0);
    if (length < kDirectLengths) return direct_bin_[length];
    const auto it = std::upper_bound(edges_.begin(), edges_.end(), length);
    const int32_t b = static_cast<int32_t>(it - edges_.begin()) - 1;
    return std::min(b, static_cast<int32_t>(ended_.size()) - 1);
}

void OutputLengthEstimator::record(int32_t output_len, bool ended_by_model) {
    for (size_t b = 0; b < ended_.size(); ++b) {
        ended_[b] *= kDecay;
        cut_[b] *= kDecay;
    }
    (ended_by_model ? ended_ : cut_)[bin_of(output_len)] += 1.0;
}

void OutputLengthEstimator::begin_pass() {
    std::fill(running_.begin(), running_.end(), 0.0);
}

void OutputLengthEstimator::add_running(int32_t output_len) {
    running_[bin_of(output_len)] += 1.0;
}

void OutputLengthEstimator::end_pass() {
    // Actuarial Kaplan-Meier: a bin's hazard is the ended samples over those that entered it, counting the censored
    // ones of the bin as half there. A bin nobody reached has hazard 0: the curve stays flat where nothing is known.
    const size_t bins = ended_.size();
    double entered = 0.0;
    for (size_t b = bins; b-- > 0;) {
        const double censored = cut_[b] + running_[b];
        entered += ended_[b] + censored;
        const double exposed = entered - censored / 2.0;
        hazard_[b] = exposed > 0.0 ? std::min(1.0, ended_[b] / exposed) : 0.0;
    }
    s_[0] = 1.0;
    area_[0] = 0.0;
    for (size_t b = 0; b < bins; ++b) {
        s_[b + 1] = s_[b] * (1.0 - hazard_[b]);
        area_[b + 1] = area_[b] + (edges_[b + 1] - edges_[b]) * (s_[b] + s_[b + 1]) / 2.0;
    }
}

double OutputLengthEstimator::survival_in(int32_t b, int32_t length) const {
    const double frac = std::clamp(static_cast<double>(length - edges_[b]) / (edges_[b + 1] - edges_[b]), 0.0, 1.0);
    return s_[b] + frac * (s_[b + 1] - s_[b]);
}

double OutputLengthEstimator::integral_in(int32_t b, int32_t length, double survival) const {
    return area_[b] + std::max(0, length - edges_[b]) * (s_[b] + survival) / 2.0;
}

double OutputLengthEstimator::survival(int32_t length) const {
    return survival_in(bin_of(length), length);
}

double OutputLengthEstimator::expected_remaining(int32_t produced, int32_t limit) const {
    if (produced >= limit) return 0.0;
    const int32_t from = bin_of(produced);
    const double alive = survival_in(from, produced);
    const double most = static_cast<double>(limit - produced);
    // Every sample ended before `produced`, yet this sequence runs on: nothing is known about it.
    if (alive < 1e-9) return most;
    const int32_t to = bin_of(limit);
    const double area = integral_in(to, limit, survival_in(to, limit)) - integral_in(from, produced, alive);
    return std::clamp(area / alive, 0.0, most);
}

}  // namespace pagoda::engine
