// KvCacheManager, block hashes and StateCache.
#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "engine/block_hash.h"
#include "engine/kv_cache_manager.h"
#include "engine/state_cache.h"

namespace pagoda::engine {
namespace {

std::vector<BlockHash> chain(const BlockHash& salt, const std::vector<int32_t>& tokens, int32_t b) {
    std::vector<BlockHash> out;
    for (size_t i = 0; i + b <= tokens.size(); i += b) {
        out.push_back(hash_block(out.empty() ? salt : out.back(), std::span<const int32_t>(tokens).subspan(i, b)));
    }
    return out;
}

TEST(BlockHash, ChainsAndSalts) {
    const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8};
    std::vector<int32_t> b = a;
    b[1] = 9;  // differs in the first block: every later hash differs too
    const BlockHash s0 = block_hash_salt(0, "");
    auto ha = chain(s0, a, 4), hb = chain(s0, b, 4);
    EXPECT_EQ(ha, chain(s0, a, 4));
    EXPECT_FALSE(ha[0] == hb[0]);
    EXPECT_FALSE(ha[1] == hb[1]);                                         // same tokens in block 1, other parent
    EXPECT_FALSE(ha[0] == chain(block_hash_salt(1, ""), a, 4)[0]);        // another LoRA
    EXPECT_FALSE(ha[0] == chain(block_hash_salt(0, "tenant"), a, 4)[0]);  // another cache salt
    EXPECT_EQ(chain(block_hash_salt(0, "t"), a, 4), chain(block_hash_salt(0, "t"), a, 4));
}

std::vector<int32_t> refs_of(const KvCacheManager& kv, std::initializer_list<const SeqBlocks*> seqs) {
    std::vector<int32_t> refs(kv.num_blocks(), 0);
    for (const SeqBlocks* s : seqs)
        for (int32_t b : s->table)
            ++refs[b];
    return refs;
}

TEST(KvCacheManager, AllocateAppendFree) {
    KvCacheManager kv(8, 4, /*prefix caching*/ false);
    SeqBlocks a, b;
    ASSERT_TRUE(kv.allocate_for_prefill(a, {}, 9));  // 3 blocks
    EXPECT_EQ(a.table.size(), 3u);
    EXPECT_EQ(kv.num_free_blocks(), 5);
    ASSERT_TRUE(kv.append_slots(a, 12));  // still 3
    EXPECT_EQ(a.table.size(), 3u);
    ASSERT_TRUE(kv.append_slots(a, 13));
    EXPECT_EQ(a.table.size(), 4u);
    EXPECT_FALSE(kv.allocate_for_prefill(b, {}, 17));  // 5 > 4 free: nothing changes
    EXPECT_TRUE(b.table.empty());
    EXPECT_EQ(kv.num_free_blocks(), 4);
    ASSERT_TRUE(kv.allocate_for_prefill(b, {}, 16));
    std::set<int32_t> all(a.table.begin(), a.table.end());
    all.insert(b.table.begin(), b.table.end());
    EXPECT_EQ(all.size(), 8u);  // no block handed out twice
    kv.check_consistency(refs_of(kv, {&a, &b}));
    kv.free(a);
    kv.free(b);
    EXPECT_EQ(kv.num_free_blocks(), 8);
    kv.check_consistency(refs_of(kv, {}));
}

TEST(KvCacheManager, PrefixHitSharesBlocksAndCountsTokens) {
    const int32_t bs = 4;
    KvCacheManager kv(16, bs, true);
    const BlockHash salt = block_hash_salt(0, "");
    std::vector<int32_t> prompt(14);
    std::iota(prompt.begin(), prompt.end(), 100);
    auto hashes = chain(salt, prompt, bs);  // 3 full blocks
    SeqBlocks a;
    ASSERT_TRUE(kv.allocate_for_prefill(a, {}, 14));
    kv.publish_full_blocks(a, hashes);
    EXPECT_EQ(kv.num_cached_blocks(), 3);

    // A second sequence with the same prompt (n > 1) shares the three blocks.
    std::vector<int32_t> cached;
    EXPECT_EQ(kv.find_cached_prefix(hashes, cached), 3);
    SeqBlocks b;
    ASSERT_TRUE(kv.allocate_for_prefill(b, cached, 14));
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(b.table[i], a.table[i]);
        EXPECT_EQ(kv.ref_count(a.table[i]), 2);
    }
    EXPECT_NE(b.table[3], a.table[3]);
    kv.check_consistency(refs_of(kv, {&a, &b}));

    // Freed, the cached blocks stay findable until evicted.
    kv.free(a);
    kv.free(b);
    EXPECT_EQ(kv.num_free_blocks(), 16);
    cached.clear();
    EXPECT_EQ(kv.find_cached_prefix(hashes, cached), 3);
    kv.check_consistency(refs_of(kv, {}));
    kv.record_lookup(14, 12);
    EXPECT_EQ(kv.stats().queried_tokens, 14);
    EXPECT_EQ(kv.stats().hit_tokens, 12);

    // Another salt misses.
    cached.clear();
    EXPECT_EQ(kv.find_cached_prefix(chain(block_hash_salt(3, ""), prompt, bs), cached), 0);
}

TEST(KvCacheManager, EvictsLeastRecentlyReleasedTailFirst) {
    const int32_t bs = 2;
    KvCacheManager kv(6, bs, true);
    const BlockHash salt = block_hash_salt(0, "");
    const std::vector<int32_t> p1 = {1, 2, 3, 4, 5, 6};  // 3 blocks
    const std::vector<int32_t> p2 = {7, 8, 9, 10};       // 2 blocks
    auto h1 = chain(salt, p1, bs), h2 = chain(salt, p2, bs);
    SeqBlocks a, b;
    ASSERT_TRUE(kv.allocate_for_prefill(a, {}, 6));
    kv.publish_full_blocks(a, h1);
    ASSERT_TRUE(kv.allocate_for_prefill(b, {}, 4));
    kv.publish_full_blocks(b, h2);
    kv.free(a);  // LRU: a2 a1 a0
    kv.free(b);  // LRU: a2 a1 a0 b1 b0
    EXPECT_EQ(kv.num_free_blocks(), 6);
    // 3 fresh blocks: the never-cached one first, then a's tail (a2, a1) is evicted; a's head survives.
    SeqBlocks c;
    ASSERT_TRUE(kv.allocate_for_prefill(c, {}, 6));
    std::vector<int32_t> cached;
    EXPECT_EQ(kv.find_cached_prefix(h1, cached), 1);
    cached.clear();
    EXPECT_EQ(kv.find_cached_prefix(h2, cached), 2);
    EXPECT_EQ(kv.stats().evicted_blocks, 2);
    // Taking a cached run back out of the LRU uses free capacity: b's 2 blocks + 1 new of 3 free.
    SeqBlocks d;
    ASSERT_TRUE(kv.allocate_for_prefill(d, cached, 6));
    EXPECT_EQ(kv.num_free_blocks(), 0);
    kv.check_consistency(refs_of(kv, {&c, &d}));
    SeqBlocks e;
    EXPECT_FALSE(kv.append_slots(e, 1));
    kv.free(c);
    kv.free(d);
    kv.check_consistency(refs_of(kv, {}));
}

TEST(KvCacheManager, DuplicatePublishKeepsTheFirstBlock) {
    KvCacheManager kv(8, 2, true);
    const std::vector<int32_t> p = {1, 2, 3, 4};
    auto h = chain(block_hash_salt(0, ""), p, 2);
    SeqBlocks a, b;
    ASSERT_TRUE(kv.allocate_for_prefill(a, {}, 4));
    ASSERT_TRUE(kv.allocate_for_prefill(b, {}, 4));  // computed at the same time: both missed
    kv.publish_full_blocks(a, h);
    kv.publish_full_blocks(b, h);
    EXPECT_EQ(kv.num_cached_blocks(), 2);
    EXPECT_EQ(kv.find_cached_block(h[0]), a.table[0]);
    kv.free(b);  // b's blocks are not the cache's: they go back to the free list
    kv.free(a);
    kv.check_consistency(refs_of(kv, {}));
    EXPECT_EQ(kv.num_free_blocks(), 8);
}

TEST(StateCache, SlotsSnapshotsAndPinning) {
    StateCache sc(4, 2);
    const BlockHash h1 = block_hash_salt(1, ""), h2 = block_hash_salt(2, ""), h3 = block_hash_salt(3, "");
    int32_t s0 = sc.allocate_slot(), s1 = sc.allocate_slot(), s2 = sc.allocate_slot();
    EXPECT_EQ(std::set<int32_t>({s0, s1, s2}).size(), 3u);
    sc.publish_snapshot(h1, s0);
    sc.publish_snapshot(h2, s1);
    EXPECT_EQ(sc.num_snapshots(), 2);
    EXPECT_EQ(sc.find_snapshot(h1), s0);  // h1 is now the most recent
    sc.unpin_all();
    sc.publish_snapshot(h3, s2);  // bound 2: evicts h2
    EXPECT_FALSE(sc.has_snapshot(h2));
    EXPECT_TRUE(sc.has_snapshot(h1));
    EXPECT_EQ(sc.num_held_slots(), 0);
    // A pinned snapshot is never handed out as a fresh slot.
    EXPECT_EQ(sc.find_snapshot(h1), s0);
    const int32_t a = sc.allocate_slot(), b = sc.allocate_slot();  // the two free slots
    const int32_t c = sc.allocate_slot();                          // evicts h3 (s2), not the pinned h1
    EXPECT_EQ(std::set<int32_t>({a, b, c, s0}).size(), 4u);
    EXPECT_EQ(c, s2);
    EXPECT_FALSE(sc.has_snapshot(h3));
    EXPECT_TRUE(sc.has_snapshot(h1));
    EXPECT_EQ(sc.allocate_slot(), -1);  // only the pinned one is left
    sc.unpin_all();
    EXPECT_EQ(sc.allocate_slot(), s0);
    EXPECT_EQ(sc.stats().hits, 2);
}

}  // namespace
}  // namespace pagoda::engine
