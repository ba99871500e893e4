// Paged KV block bookkeeping and the prefix cache.
#include "engine/kv_cache_manager.h"

#include <algorithm>

#include "common/check.h"

namespace pagoda::engine {

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching)
    : block_size_(block_size),
      prefix_caching_(enable_prefix_caching),
      ref_(num_blocks, 0),
      hash_(num_blocks),
      published_(num_blocks, 0),
      lru_prev_(num_blocks, -1),
      lru_next_(num_blocks, -1),
      in_lru_(num_blocks, 0) {
    PAGODA_CHECK(num_blocks > 0 && block_size > 0);
    free_.reserve(num_blocks);
    // Hand out low ids first (a stack: the back is taken first).
    for (int32_t b = num_blocks - 1; b >= 0; --b)
        free_.push_back(b);
    map_.reserve(num_blocks);
}

int32_t KvCacheManager::find_cached_block(const BlockHash& hash) const {
    auto it = map_.find(hash);
    return it == map_.end() ? -1 : it->second;
}

int32_t KvCacheManager::find_cached_prefix(std::span<const BlockHash> hashes, std::vector<int32_t>& out) const {
    if (!prefix_caching_) return 0;
    int32_t k = 0;
    for (const BlockHash& h : hashes) {
        const int32_t b = find_cached_block(h);
        if (b < 0) break;
        out.push_back(b);
        ++k;
    }
    return k;
}

void KvCacheManager::lru_push_back(int32_t b) {
    lru_prev_[b] = lru_tail_;
    lru_next_[b] = -1;
    if (lru_tail_ >= 0)
        lru_next_[lru_tail_] = b;
    else
        lru_head_ = b;
    lru_tail_ = b;
    in_lru_[b] = 1;
    ++lru_size_;
}

void KvCacheManager::lru_remove(int32_t b) {
    PAGODA_CHECK(in_lru_[b]);
    const int32_t p = lru_prev_[b], n = lru_next_[b];
    if (p >= 0)
        lru_next_[p] = n;
    else
        lru_head_ = n;
    if (n >= 0)
        lru_prev_[n] = p;
    else
        lru_tail_ = p;
    in_lru_[b] = 0;
    --lru_size_;
}

int32_t KvCacheManager::take_block() {
    int32_t b;
    if (!free_.empty()) {
        b = free_.back();
        free_.pop_back();
    } else {
        // Evict the least recently released cached block.
        PAGODA_CHECK(lru_head_ >= 0);
        b = lru_head_;
        lru_remove(b);
        PAGODA_CHECK(published_[b]);
        map_.erase(hash_[b]);
        published_[b] = 0;
        ++stats_.evicted_blocks;
    }
    PAGODA_CHECK(ref_[b] == 0);
    ref_[b] = 1;
    return b;
}

int32_t KvCacheManager::count_referenced(std::span<const int32_t> blocks, int32_t min_refs) const {
    int32_t n = 0;
    for (int32_t b : blocks)
        n += ref_[b] >= min_refs ? 1 : 0;
    return n;
}

bool KvCacheManager::reserve(int32_t n_new, std::span<const int32_t> cached) {
    int32_t revived = 0;  // cached blocks that leave the LRU, consuming free capacity
    for (int32_t b : cached)
        revived += ref_[b] == 0 ? 1 : 0;
    return n_new + revived <= num_free_blocks();
}

bool KvCacheManager::allocate_for_prefill(SeqBlocks& seq, std::span<const int32_t> cached, int32_t num_tokens) {
    PAGODA_CHECK(seq.table.empty());
    const int32_t need = std::max(0, blocks_for(num_tokens) - static_cast<int32_t>(cached.size()));
    if (!reserve(need, cached)) return false;
    for (int32_t b : cached) {
        PAGODA_CHECK(published_[b]);
        if (ref_[b]++ == 0) lru_remove(b);
        seq.table.push_back(b);
    }
    seq.num_published = static_cast<int32_t>(cached.size());
    for (int32_t i = 0; i < need; ++i)
        seq.table.push_back(take_block());
    return true;
}

bool KvCacheManager::append_slots(SeqBlocks& seq, int32_t num_tokens) {
    const int32_t need = blocks_for(num_tokens) - static_cast<int32_t>(seq.table.size());
    if (need <= 0) return true;
    if (need > num_free_blocks()) return false;
    for (int32_t i = 0; i < need; ++i)
        seq.table.push_back(take_block());
    return true;
}

void KvCacheManager::free(SeqBlocks& seq) {
    for (auto it = seq.table.rbegin(); it != seq.table.rend(); ++it) {
        const int32_t b = *it;
        PAGODA_CHECK(ref_[b] > 0);
        if (--ref_[b] > 0) continue;
        if (published_[b])
            lru_push_back(b);
        else
            free_.push_back(b);
    }
    seq.table.clear();
    seq.num_published = 0;
}

void KvCacheManager::publish_full_blocks(SeqBlocks& seq, std::span<const BlockHash> hashes) {
    const int32_t upto = std::min<int32_t>(static_cast<int32_t>(hashes.size()), static_cast<int32_t>(seq.table.size()));
    if (!prefix_caching_) {
        seq.num_published = std::max(seq.num_published, upto);
        return;
    }
    for (int32_t i = seq.num_published; i < upto; ++i) {
        const int32_t b = seq.table[i];
        if (published_[b]) continue;  // a shared block, already in the cache
        // When another block already holds these tokens (two sequences computed them at once), keep the first;
        // this one returns to the free list when released.
        if (map_.try_emplace(hashes[i], b).second) {
            hash_[b] = hashes[i];
            published_[b] = 1;
        }
    }
    seq.num_published = std::max(seq.num_published, upto);
}

void KvCacheManager::check_consistency(std::span<const int32_t> expected_refs) const {
    PAGODA_CHECK(expected_refs.size() == ref_.size());
    int32_t lru = 0;
    for (int32_t b = lru_head_; b >= 0; b = lru_next_[b]) {
        PAGODA_CHECK(in_lru_[b] && ref_[b] == 0 && published_[b]);
        ++lru;
    }
    PAGODA_CHECK(lru == lru_size_);
    std::vector<uint8_t> in_free(ref_.size(), 0);
    for (int32_t b : free_) {
        PAGODA_CHECK(!in_free[b] && ref_[b] == 0 && !published_[b] && !in_lru_[b]);
        in_free[b] = 1;
    }
    for (size_t b = 0; b < ref_.size(); ++b) {
        PAGODA_CHECK_MSG(ref_[b] == expected_refs[b], "block reference count differs from the sequences' tables");
        if (ref_[b] == 0) PAGODA_CHECK(in_free[b] || in_lru_[b]);
        if (published_[b]) {
            auto it = map_.find(hash_[b]);
            PAGODA_CHECK(it != map_.end() && it->second == static_cast<int32_t>(b));
        }
    }
    PAGODA_CHECK(map_.size() == static_cast<size_t>(std::count(published_.begin(), published_.end(), 1)));
}

void KvCacheManager::reset_prefix_cache() {
    while (lru_head_ >= 0) {
        const int32_t b = lru_head_;
        lru_remove(b);
        free_.push_back(b);
    }
    for (const auto& [hash, b] : map_)
        published_[b] = 0;
    map_.clear();
}

}  // namespace pagoda::engine
