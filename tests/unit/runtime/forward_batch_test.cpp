// ForwardBatchBuilder fills positions, offsets, slot mapping, padded block tables and logits rows consistently.
#include <gtest/gtest.h>

#include "runtime/cache_pools.h"
#include "runtime/forward_batch.h"

namespace pagoda {
namespace {

TEST(ForwardBatch, BuilderLaysOutSequences) {
    ForwardBatchBuilder b(4);
    const std::vector<int32_t> t0 = {10, 11, 12}, t1 = {20}, t2 = {30, 31};
    const std::vector<int32_t> tab0 = {7, 3}, tab1 = {5, 6, 1}, tab2 = {2};
    b.add_sequence(t0, 2, tab0, 4, ForwardBatchBuilder::Logits::All);  // positions 2,3,4
    b.add_sequence(t1, 9, tab1, 0);                                    // position 9 (decode)
    b.add_sequence(t2, 0, tab2, 1, ForwardBatchBuilder::Logits::None);
    ForwardBatch fb = b.view();
    EXPECT_EQ(fb.num_tokens, 6);
    EXPECT_EQ(fb.num_seqs, 3);
    EXPECT_EQ(std::vector<int32_t>(fb.token_ids.begin(), fb.token_ids.end()),
              (std::vector<int32_t>{10, 11, 12, 20, 30, 31}));
    EXPECT_EQ(std::vector<int32_t>(fb.positions.begin(), fb.positions.end()), (std::vector<int32_t>{2, 3, 4, 9, 0, 1}));
    EXPECT_EQ(std::vector<int32_t>(fb.query_start_loc.begin(), fb.query_start_loc.end()),
              (std::vector<int32_t>{0, 3, 4, 6}));
    EXPECT_EQ(std::vector<int32_t>(fb.seq_lens.begin(), fb.seq_lens.end()), (std::vector<int32_t>{5, 10, 2}));
    // slot = block_table[pos / 4] * 4 + pos % 4
    EXPECT_EQ(std::vector<int64_t>(fb.slot_mapping.begin(), fb.slot_mapping.end()),
              (std::vector<int64_t>{7 * 4 + 2, 7 * 4 + 3, 3 * 4 + 0, 1 * 4 + 1, 2 * 4 + 0, 2 * 4 + 1}));
    EXPECT_EQ(fb.max_blocks_per_seq, 3);
    EXPECT_EQ(fb.block_tables[0 * 3 + 1], 3);
    EXPECT_EQ(fb.block_tables[1 * 3 + 2], 1);
    EXPECT_EQ(fb.block_tables[2 * 3 + 0], 2);
    EXPECT_EQ(std::vector<int32_t>(fb.logits_indices.begin(), fb.logits_indices.end()),
              (std::vector<int32_t>{0, 1, 2, 3}));
    EXPECT_EQ(fb.context_len(0), 2);
    EXPECT_EQ(fb.context_len(2), 0);
    EXPECT_EQ(fb.max_query_len(), 3);
    EXPECT_EQ(fb.max_seq_len(), 10);
}

TEST(CachePools, LayerViewsAreDisjoint) {
    auto kv = KvCachePool::create(host_allocator(), {3, 10, 4, 2, 8, DType::F32});
    ASSERT_TRUE(kv.ok()) << kv.message();
    EXPECT_EQ(kv->key(0).shape(), (Shape{10, 4, 2, 8}));
    const auto bytes = kv->key(0).nbytes();
    EXPECT_EQ(static_cast<char*>(kv->value(0).data()) - static_cast<char*>(kv->key(0).data()),
              static_cast<ptrdiff_t>(bytes));
    EXPECT_EQ(static_cast<char*>(kv->key(2).data()) - static_cast<char*>(kv->key(0).data()),
              static_cast<ptrdiff_t>(4 * bytes));
    EXPECT_EQ(KvCachePool::bytes_per_block({3, 10, 4, 2, 8, DType::F32}), 2u * 3 * 4 * 2 * 8 * 4);

    auto st = StateCachePool::create(host_allocator(), {2, 5, 40, 4, 3, 8, 6});
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(st->conv_state(1).shape(), (Shape{5, 40, 3}));
    EXPECT_EQ(st->recurrent_state(1).shape(), (Shape{5, 3, 8, 6}));
    EXPECT_EQ(static_cast<float*>(st->recurrent_state(0).data()) - static_cast<float*>(st->conv_state(0).data()),
              5 * 40 * 3);
    EXPECT_FALSE(KvCachePool::create(host_allocator(), {1, 0, 4, 2, 8, DType::F32}).ok());
}

TEST(ForwardBatchArrays, LoraIdsPerTokenOnlyWhenASequenceHasAnAdapter) {
    ForwardBatchArrays arrays;
    const std::vector<int32_t> tokens = {5, 6, 7};
    arrays.add_sequence(tokens, 0, {}, 16, 0);
    EXPECT_TRUE(arrays.view(16, 0).lora_ids.empty());  // no adapter: the step carries no ids
    arrays.add_sequence(std::span<const int32_t>(tokens).first(2), 0, {}, 16, 1, /*lora_id=*/4);
    arrays.add_sequence(std::span<const int32_t>(tokens).first(1), 0, {}, 16, 2);
    const ForwardBatch b = arrays.view(16, 0);
    EXPECT_EQ(std::vector<int32_t>(b.lora_ids.begin(), b.lora_ids.end()), (std::vector<int32_t>{0, 0, 0, 4, 4, 0}));
    arrays.clear();
    arrays.add_sequence(tokens, 0, {}, 16, 0);
    EXPECT_TRUE(arrays.view(16, 0).lora_ids.empty());
}

}  // namespace
}  // namespace pagoda
