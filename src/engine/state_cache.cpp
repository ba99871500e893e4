// State slot pool and snapshot LRU.
#include "engine/state_cache.h"

#include "common/check.h"

namespace pagoda::engine {

StateCache::StateCache(int32_t num_slots, int32_t max_snapshots)
    : num_slots_(num_slots), max_snapshots_(max_snapshots), pinned_(num_slots, 0) {
    PAGODA_CHECK(num_slots >= 0 && max_snapshots >= 0);
    free_.reserve(num_slots);
    for (int32_t s = num_slots - 1; s >= 0; --s)
        free_.push_back(s);
    map_.reserve(max_snapshots);
}

int32_t StateCache::allocate_slot() {
    if (free_.empty()) {
        for (auto it = lru_.begin(); it != lru_.end(); ++it) {
            if (pinned_[it->second]) continue;
            const int32_t slot = it->second;
            map_.erase(it->first);
            lru_.erase(it);
            ++stats_.evicted;
            return slot;
        }
        return -1;
    }
    const int32_t s = free_.back();
    free_.pop_back();
    return s;
}

void StateCache::free_slot(int32_t slot) {
    PAGODA_CHECK(slot >= 0 && slot < num_slots_);
    free_.push_back(slot);
}

int32_t StateCache::find_snapshot(const BlockHash& hash) {
    ++stats_.queried;
    auto it = map_.find(hash);
    if (it == map_.end()) return -1;
    ++stats_.hits;
    lru_.splice(lru_.end(), lru_, it->second);
    const int32_t slot = it->second->second;
    if (!pinned_[slot]) {
        pinned_[slot] = 1;
        pinned_list_.push_back(slot);
    }
    return slot;
}

void StateCache::unpin_all() {
    for (int32_t s : pinned_list_)
        pinned_[s] = 0;
    pinned_list_.clear();
}

void StateCache::publish_snapshot(const BlockHash& hash, int32_t slot) {
    if (max_snapshots_ == 0 || map_.count(hash)) {
        free_slot(slot);
        return;
    }
    if (static_cast<int32_t>(lru_.size()) >= max_snapshots_) {
        auto victim = lru_.begin();
        while (victim != lru_.end() && pinned_[victim->second])
            ++victim;
        if (victim == lru_.end()) {  // every snapshot is in use this step: drop the new one
            free_slot(slot);
            return;
        }
        map_.erase(victim->first);
        free_.push_back(victim->second);
        lru_.erase(victim);
        ++stats_.evicted;
    }
    lru_.emplace_back(hash, slot);
    map_.emplace(hash, std::prev(lru_.end()));
}

void StateCache::reset_snapshots() {
    for (const auto& [hash, slot] : lru_)
        free_.push_back(slot);
    lru_.clear();
    map_.clear();
    unpin_all();
}

}  // namespace pagoda::engine
