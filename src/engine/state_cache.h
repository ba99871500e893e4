// StateCache: linear-attention state slots (conv + recurrent state of Gated DeltaNet layers) as ids. A running
// sequence holds one slot; snapshots of states at block-aligned checkpoints live in a bounded LRU keyed by the block
// hash of the prefix they summarise, so a later request with that prefix (the next turn of a chat) restores the
// state instead of recomputing it. The runner performs the copies; this class only decides slot ids.
// Engine thread only.
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/block_hash.h"

namespace pagoda::engine {

struct StateCacheStats {
    int64_t queried = 0;  // snapshot lookups
    int64_t hits = 0;
    int64_t evicted = 0;
};

class StateCache {
  public:
    // `num_slots` is the whole pool (sequences, their checkpoints and snapshots); at most `max_snapshots` of them
    // hold snapshots at once.
    StateCache(int32_t num_slots, int32_t max_snapshots);

    int32_t num_slots() const { return num_slots_; }
    int32_t num_free_slots() const { return static_cast<int32_t>(free_.size()) + static_cast<int32_t>(lru_.size()); }
    int32_t num_snapshots() const { return static_cast<int32_t>(lru_.size()); }
    int32_t num_held_slots() const { return num_slots_ - static_cast<int32_t>(free_.size()) - num_snapshots(); }

    // A slot for a sequence (or its checkpoint), evicting the least recently used snapshot when needed; -1 if none.
    int32_t allocate_slot();
    void free_slot(int32_t slot);

    // The slot holding the state after the prefix whose last block hashes to `hash`, or -1. Marks it recently used
    // and pins it (never evicted) until unpin_all(), so that a copy out of it planned for this step stays valid.
    int32_t find_snapshot(const BlockHash& hash);
    void unpin_all();
    bool has_snapshot(const BlockHash& hash) const { return map_.count(hash) != 0; }
    // Hands `slot` (holding the state after that prefix) over to the cache. A duplicate frees the slot instead.
    void publish_snapshot(const BlockHash& hash, int32_t slot);

    // Drops every snapshot (after a failed step that may have published one before it ran); their slots are free.
    void reset_snapshots();

    const StateCacheStats& stats() const { return stats_; }

  private:
    using Lru = std::list<std::pair<BlockHash, int32_t>>;
    int32_t num_slots_;
    int32_t max_snapshots_;
    std::vector<int32_t> free_;
    Lru lru_;  // front = least recently used
    std::unordered_map<BlockHash, Lru::iterator, BlockHashHasher> map_;
    std::vector<uint8_t> pinned_;
    std::vector<int32_t> pinned_list_;
    StateCacheStats stats_;
};

}  // namespace pagoda::engine
