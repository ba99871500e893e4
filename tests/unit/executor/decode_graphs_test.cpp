// Decode steps as CUDA graphs pad the batch to a bucket of sequences. The padding must leave the real rows alone:
// their logits and the K/V they store are those of the unpadded batch. Checked on the CPU backend, which runs the
// padded batch eagerly (the GPU replays the same padded batches; executor_test compares graphs with eager steps there).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/file.h"
#include "executor/decode_graphs.h"
#include "golden/golden_reference.h"
#include "model/model.h"

namespace pagoda::executor {

using model::Model;
namespace {

TEST(DecodeGraphBucket, PowersOfTwoThenMultiplesOfSixteen) {
    EXPECT_EQ(decode_graph_bucket(1, 256), 1);
    EXPECT_EQ(decode_graph_bucket(2, 256), 2);
    EXPECT_EQ(decode_graph_bucket(3, 256), 4);
    EXPECT_EQ(decode_graph_bucket(8, 256), 8);
    EXPECT_EQ(decode_graph_bucket(9, 256), 16);
    EXPECT_EQ(decode_graph_bucket(17, 256), 32);
    EXPECT_EQ(decode_graph_bucket(200, 256), 208);
    EXPECT_EQ(decode_graph_bucket(256, 256), 256);
    EXPECT_EQ(decode_graph_bucket(19, 20), 20);  // never past max_seqs
}

TEST(DecodeGraphWidth, PowersOfTwoFromSixtyFourUpToTheContext) {
    EXPECT_EQ(decode_graph_width(1, 16384), 64);
    EXPECT_EQ(decode_graph_width(64, 16384), 64);
    EXPECT_EQ(decode_graph_width(65, 16384), 128);
    EXPECT_EQ(decode_graph_width(3000, 16384), 4096);
    EXPECT_EQ(decode_graph_width(16384, 16384), 16384);
    EXPECT_EQ(decode_graph_width(2000, 2560), 2048);
    EXPECT_EQ(decode_graph_width(2500, 2560), 2560);  // never past max_blocks
    EXPECT_EQ(decode_graph_width(3, 10), 10);
}

TEST(DecodeGraphs, NoneOnTheCpu) {
    const std::string dir = golden::dir("qwen3");
    if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no golden data";
    auto backend = make_cpu_backend({1});
    auto model = Model::load(dir, *backend);
    ASSERT_TRUE(model.ok()) << model.message();
    auto graphs = DecodeGraphs::create(**model, {});
    ASSERT_TRUE(graphs.ok()) << graphs.message();
    EXPECT_EQ(graphs->get(), nullptr);
}

// Every layer's K and V cache, one after another.
std::vector<float> snapshot(const KvCachePool& kv) {
    std::vector<float> all;
    for (int32_t layer = 0; layer < kv.config().num_layers; ++layer)
        for (const Tensor& t : {kv.key(layer), kv.value(layer)})
            all.insert(all.end(), t.data_as<float>(), t.data_as<float>() + t.numel());
    return all;
}
void restore(KvCachePool& kv, const std::vector<float>& all) {
    size_t off = 0;
    for (int32_t layer = 0; layer < kv.config().num_layers; ++layer)
        for (const Tensor& t : {kv.key(layer), kv.value(layer)}) {
            std::memcpy(t.data(), all.data() + off, t.nbytes());
            off += static_cast<size_t>(t.numel());
        }
}

TEST(DecodeGraphs, PaddingLeavesTheRealRowsAlone) {
    const std::string dir = golden::dir("qwen3");
    if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no golden data";
    auto backend = make_cpu_backend({1});
    auto loaded = Model::load(dir, *backend);
    ASSERT_TRUE(loaded.ok()) << loaded.message();
    Model& model = **loaded;
    const int32_t bs = 16, V = static_cast<int32_t>(model.vocab_size());
    auto kv = KvCachePool::create(backend->allocator(), model.kv_cache_config(16, bs));
    ASSERT_TRUE(kv.ok()) << kv.message();

    // Three sequences with 5, 20 and 33 cached tokens, in blocks scattered over the pool.
    const std::vector<std::vector<int32_t>> tables = {{7}, {2, 11}, {4, 9, 1}};
    const std::vector<int32_t> lens = {5, 20, 33};
    {
        ForwardBatchBuilder prefill(bs);
        std::vector<std::vector<int32_t>> prompts;
        for (size_t s = 0; s < lens.size(); ++s) {
            prompts.emplace_back();
            for (int32_t i = 0; i < lens[s]; ++i)
                prompts.back().push_back(static_cast<int32_t>((i * 7 + s * 13 + 1) % V));
        }
        for (size_t s = 0; s < lens.size(); ++s)
            prefill.add_sequence(prompts[s], 0, tables[s], 0);
        std::vector<float> logits(lens.size() * static_cast<size_t>(V));
        ASSERT_TRUE(model
                        .forward(prefill.view(), &*kv, nullptr,
                                 Tensor(logits.data(), DType::F32, Shape{static_cast<int64_t>(lens.size()), V}))
                        .ok());
    }
    const std::vector<float> before = snapshot(*kv);

    ForwardBatchBuilder decode(bs);
    const std::vector<std::vector<int32_t>> next = {{3}, {5}, {8}};
    for (size_t s = 0; s < lens.size(); ++s)
        decode.add_sequence(next[s], lens[s], tables[s], 0);
    const ForwardBatch batch = decode.view();
    const int64_t S = batch.num_seqs;

    std::vector<float> plain(static_cast<size_t>(S * V));
    ASSERT_TRUE(model.forward(batch, &*kv, nullptr, Tensor(plain.data(), DType::F32, Shape{S, V})).ok());
    const std::vector<float> after_plain = snapshot(*kv);

    // Back to the cache before the decode, then the same step padded to 8 sequences of 10-block tables.
    restore(*kv, before);
    PaddedDecodeBatch padded;
    pad_decode_batch(batch, 8, 10, 160, padded);
    ASSERT_EQ(padded.view.num_seqs, 8);
    ASSERT_EQ(padded.view.max_blocks_per_seq, 10);
    std::vector<float> logits(static_cast<size_t>(8 * V));
    ASSERT_TRUE(model.forward(padded.view, &*kv, nullptr, Tensor(logits.data(), DType::F32, Shape{8, V})).ok());

    for (size_t i = 0; i < plain.size(); ++i)
        ASSERT_NEAR(logits[i], plain[i], 1e-5f * (1.0f + std::abs(plain[i]))) << "logit " << i;
    // The caches hold what the unpadded step stored (up to the CPU GEMM's rounding at another row count): the
    // padding rows stored nothing, in block 0 or anywhere.
    const std::vector<float> after_padded = snapshot(*kv);
    ASSERT_EQ(after_padded.size(), after_plain.size());
    for (size_t i = 0; i < after_plain.size(); ++i)
        ASSERT_NEAR(after_padded[i], after_plain[i], 1e-5f * (1.0f + std::abs(after_plain[i])))
            << "cache element " << i;
}

TEST(DecodeGraphs, PaddingRowsTakeNoAdapter) {
    ForwardBatchBuilder decode(16);
    const std::vector<int32_t> table = {3};
    decode.add_sequence(std::vector<int32_t>{1}, 4, table, 0, ForwardBatchBuilder::Logits::Last, /*lora_id=*/7);
    decode.add_sequence(std::vector<int32_t>{2}, 4, table, 0, ForwardBatchBuilder::Logits::Last, /*lora_id=*/0);
    decode.add_sequence(std::vector<int32_t>{3}, 4, table, 0, ForwardBatchBuilder::Logits::Last, /*lora_id=*/9);
    PaddedDecodeBatch padded;
    pad_decode_batch(decode.view(), 8, 4, 64, padded);
    EXPECT_EQ(std::vector<int32_t>(padded.view.lora_ids.begin(), padded.view.lora_ids.end()),
              (std::vector<int32_t>{7, 0, 9, 0, 0, 0, 0, 0}));
    // A step without adapters stays without them (its graph is the base model's).
    ForwardBatchBuilder base(16);
    base.add_sequence(std::vector<int32_t>{1}, 4, table, 0);
    pad_decode_batch(base.view(), 8, 4, 64, padded);
    EXPECT_TRUE(padded.view.lora_ids.empty());
}

}  // namespace
}  // namespace pagoda::executor
