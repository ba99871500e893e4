// KvCacheManager: paged KV blocks as ids with reference counts, and the automatic prefix cache (hash -> block, with
// unreferenced cached blocks in an LRU list evicted on demand). The memory itself belongs to the runtime.
// Engine thread only.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/block_hash.h"

namespace pagoda::engine {

// The blocks of one sequence, in order; block i holds tokens [i*B, (i+1)*B).
struct SeqBlocks {
    std::vector<int32_t> table;
    int32_t num_published = 0;  // leading full blocks already offered to the prefix cache
};

struct PrefixCacheStats {
    int64_t queried_tokens = 0;  // prompt tokens looked up
    int64_t hit_tokens = 0;      // of which found in the cache
    int64_t evicted_blocks = 0;
};

class KvCacheManager {
  public:
    KvCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching);

    int32_t block_size() const { return block_size_; }
    int32_t num_blocks() const { return static_cast<int32_t>(ref_.size()); }
    bool prefix_caching() const { return prefix_caching_; }
    // Blocks that can be handed out now: never-cached free ones plus unreferenced cached ones.
    int32_t num_free_blocks() const { return static_cast<int32_t>(free_.size()) + lru_size_; }
    int32_t num_cached_blocks() const { return static_cast<int32_t>(map_.size()); }
    int32_t ref_count(int32_t block) const { return ref_[block]; }
    int32_t blocks_for(int32_t num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }

    // Appends to `out` the blocks of the longest cached run hashes[0..k) and returns k. Takes no reference.
    int32_t find_cached_prefix(std::span<const BlockHash> hashes, std::vector<int32_t>& out) const;
    int32_t find_cached_block(const BlockHash& hash) const;  // -1 when absent

    // How many of `blocks` have at least `min_refs` references (1: held by some sequence; 2: shared).
    int32_t count_referenced(std::span<const int32_t> blocks, int32_t min_refs) const;
    // A new (or resumed) sequence: takes references on `cached` (its prefix hit, from find_cached_prefix) and
    // allocates fresh blocks so that it covers `num_tokens`. All or nothing: false leaves everything unchanged.
    bool allocate_for_prefill(SeqBlocks& seq, std::span<const int32_t> cached, int32_t num_tokens);
    // Grows a running sequence so that it covers `num_tokens` (decode: one more slot; prefill: the next chunk).
    bool append_slots(SeqBlocks& seq, int32_t num_tokens);
    // Drops the sequence's references, last block first so that a prefix outlives its tails in the LRU.
    void free(SeqBlocks& seq);

    // Offers the sequence's full blocks up to `hashes.size()` to the prefix cache (hashes[i] is block i's hash).
    void publish_full_blocks(SeqBlocks& seq, std::span<const BlockHash> hashes);

    // Forgets every cached prefix (after a failed step whose blocks may have been offered before it ran): cached
    // blocks nobody holds become free, held ones stay with their sequences, unpublished.
    void reset_prefix_cache();

    void record_lookup(int64_t queried_tokens, int64_t hit_tokens) {
        stats_.queried_tokens += queried_tokens;
        stats_.hit_tokens += hit_tokens;
    }
    const PrefixCacheStats& stats() const { return stats_; }

    // Invariant check for tests: refcounts match `expected_refs`, lists are consistent. Aborts when broken.
    void check_consistency(std::span<const int32_t> expected_refs) const;

  private:
    bool reserve(int32_t n_new, std::span<const int32_t> cached);
    int32_t take_block();
    void lru_push_back(int32_t b);
    void lru_remove(int32_t b);

    int32_t block_size_;
    bool prefix_caching_;
    std::vector<int32_t> ref_;
    std::vector<BlockHash> hash_;
    std::vector<uint8_t> published_;  // block is the map's entry for hash_[b]
    std::vector<int32_t> lru_prev_, lru_next_;
    std::vector<uint8_t> in_lru_;
    int32_t lru_head_ = -1, lru_tail_ = -1, lru_size_ = 0;
    std::vector<int32_t> free_;  // unreferenced, not published
    std::unordered_map<BlockHash, int32_t, BlockHashHasher> map_;
    PrefixCacheStats stats_;
};

}  // namespace pagoda::engine
