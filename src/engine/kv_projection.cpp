// Projected KV demand of the running sequences.
#include "engine/kv_projection.h"

#include <algorithm>

#include "common/check.h"

namespace pagoda::engine {

void KvProjection::clear() {
    items_.clear();
}

void KvProjection::add(const Item& item) {
    PAGODA_CHECK(item.steps >= 1 && item.exclusive <= item.held);
    items_.push_back(item);
}

void KvProjection::build() {
    std::sort(items_.begin(), items_.end(), [](const Item& a, const Item& b) { return a.steps < b.steps; });
    const size_t n = items_.size();
    tokens_after_.assign(n + 1, 0);
    held_after_.assign(n + 1, 0);
    exclusive_before_.assign(n + 1, 0);
    for (size_t i = n; i-- > 0;) {
        tokens_after_[i] = tokens_after_[i + 1] + items_[i].tokens;
        held_after_[i] = held_after_[i + 1] + items_[i].held;
    }
    for (size_t i = 0; i < n; ++i)
        exclusive_before_[i + 1] = exclusive_before_[i] + items_[i].exclusive;
}

int64_t KvProjection::demand_at(int64_t step) const {
    // Items [first, n) still run at `step`, each then holding tokens + step KV tokens; the sum of their block counts
    // is bounded by one division of the sum (each rounds up by less than a block).
    const auto it = std::upper_bound(items_.begin(), items_.end(), step,
                                     [](int64_t t, const Item& item) { return t < item.steps; });
    const size_t first = static_cast<size_t>(it - items_.begin());
    const int64_t running = static_cast<int64_t>(items_.size() - first);
    const int64_t blocks = (tokens_after_[first] + running * (step + block_size_ - 1)) / block_size_;
    return blocks - held_after_[first] - exclusive_before_[first];
}

int64_t KvProjection::peak_with(const Item& extra) const {
    PAGODA_CHECK(tokens_after_.size() == items_.size() + 1);  // built
    // Demand grows while the set of running sequences stays the same, so the peak is at the last step of one of them.
    auto total_at = [&](int64_t step) {
        int64_t d = demand_at(step);
        if (step < extra.steps) d += (extra.tokens + step + block_size_ - 1) / block_size_ - extra.held;
        return d;
    };
    int64_t peak = total_at(extra.steps - 1);
    for (size_t i = 0; i < items_.size(); ++i)
        if (i + 1 == items_.size() || items_[i + 1].steps != items_[i].steps)
            peak = std::max(peak, total_at(items_[i].steps - 1));
    return std::max<int64_t>(peak, 0);
}

}  // namespace pagoda::engine
