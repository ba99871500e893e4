// KvProjection: the KV blocks the running sequences will want over the coming steps, for admission control. Each
// sequence is projected to grow by one token a step until its expected end, when its own blocks return to the pool;
// the largest demand over time (just before some sequence ends: it grows until then) must fit the free blocks.
// Counting peaks instead of every sequence at its end at once lets a new sequence start while older ones are about
// to finish. Engine thread only.
#pragma once

#include <cstdint>
#include <vector>

namespace pagoda::engine {

class KvProjection {
  public:
    struct Item {
        int32_t tokens = 0;     // KV tokens the sequence needs now (computed or scheduled: its whole token list)
        int32_t held = 0;       // blocks it holds that are not free (its table, or a hit's blocks already in use)
        int32_t exclusive = 0;  // of those, the blocks that return to the pool when it ends (no other holder)
        int32_t steps = 1;      // steps it is expected to run: tokens + steps - 1 KV tokens at its last one
    };

    explicit KvProjection(int32_t block_size) : block_size_(block_size) {}

    void clear();
    void add(const Item& item);  // then build() before the next peak_with
    void build();

    // The most blocks beyond those held that the items and `extra` want at once over the coming steps (>= 0).
    int64_t peak_with(const Item& extra) const;

  private:
    int64_t demand_at(int64_t step) const;  // the items' blocks wanted beyond held, net of blocks ended ones return

    int32_t block_size_;
    std::vector<Item> items_;  // sorted by steps after build()
    // Over items_ in that order: suffix sums of tokens and held (the ones still running), prefix sums of exclusive
    // (the ones ended).
    std::vector<int64_t> tokens_after_, held_after_, exclusive_before_;
};

}  // namespace pagoda::engine
