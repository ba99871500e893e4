// The size defaults (engine_sizes.h) for the GPUs people run: the rule is a pure function of the GPU's and the
// model's numbers, so each case gives them as those GPUs and Qwen models have them.
#include "executor/engine_sizes.h"

#include <gtest/gtest.h>

namespace pagoda::executor {
namespace {

constexpr size_t kGiB = size_t{1} << 30;

// Qwen3-8B: 36 layers x 8 KV heads x 128 dims x (K, V) x bf16 = 144 KiB a token; 40,960 tokens of context.
SizeFacts qwen3_8b_on(size_t total_gib, size_t budget_gib) {
    SizeFacts f;
    f.gpu = true;
    f.gpu_name = "test GPU";
    f.gpu_total_bytes = total_gib * kGiB;
    f.memory_budget = budget_gib * kGiB;
    f.context_length = 40960;
    f.kv_bytes_per_token = 36 * 8 * 128 * 2 * 2;
    return f;
}

// Qwen3.5-9B: 8 full-attention layers x 4 KV heads x 256 dims x 2 x bf16 = 32 KiB a token, and 24 linear-attention
// layers of a 32 x 128 x 128 fp32 state plus an 8,192 x 3 conv state = 50.25 MiB a slot; 262,144 tokens of context.
SizeFacts qwen3_5_9b_on(size_t total_gib, size_t budget_gib) {
    SizeFacts f = qwen3_8b_on(total_gib, budget_gib);
    f.context_length = 262144;
    f.kv_bytes_per_token = 8 * 4 * 256 * 2 * 2;
    f.state_bytes_per_slot = 24 * (32 * 128 * 128 * 4 + 8192 * 3 * 4);
    return f;
}

TEST(EngineSizes, CpuKeepsSmallDefaults) {
    SizeFacts f;
    f.context_length = 40960;
    const SizeChoice c = choose_sizes({}, f);
    EXPECT_EQ(c.sizes.max_num_seqs, 16);
    EXPECT_EQ(c.sizes.max_num_batched_tokens, 2048);
    EXPECT_EQ(c.sizes.max_model_len, 8192);
    f.context_length = 4096;  // a shorter context than the cap is the model's
    EXPECT_EQ(choose_sizes({}, f).sizes.max_model_len, 4096);
    f.context_length = 0;
    EXPECT_EQ(choose_sizes({}, f).sizes.max_model_len, 8192);
}

TEST(EngineSizes, LargeGpuGetsVllmsLargeDefaultsAndTheWholeContext) {
    const SizeFacts f = qwen3_8b_on(141, 100);  // an H200
    const SizeChoice c = choose_sizes({}, f);
    EXPECT_EQ(c.sizes.max_num_seqs, 1024);
    EXPECT_EQ(c.sizes.max_num_batched_tokens, 8192);
    EXPECT_EQ(c.sizes.max_model_len, 40960);
    ASSERT_EQ(c.chosen.size(), 3u);
    const std::string line = describe_choice(c, f);
    EXPECT_NE(line.find("test GPU"), std::string::npos) << line;
    EXPECT_NE(line.find("max_num_seqs 1024"), std::string::npos) << line;
    EXPECT_NE(line.find("max_model_len 40960 (the model's context)"), std::string::npos) << line;
}

TEST(EngineSizes, SmallGpuGetsVllmsSmallDefaults) {
    const SizeChoice c = choose_sizes({}, qwen3_8b_on(48, 20));  // an L40S
    EXPECT_EQ(c.sizes.max_num_seqs, 256);
    EXPECT_EQ(c.sizes.max_num_batched_tokens, 2048);
    EXPECT_EQ(c.sizes.max_model_len, 40960);
}

TEST(EngineSizes, ContextShrinksToWhatTheKvCacheHolds) {
    // 2 GiB of KV at 144 KiB a token: 14,563 tokens, rounded down to whole 16-token blocks.
    const SizeChoice c = choose_sizes({}, qwen3_8b_on(24, 2));
    EXPECT_EQ(c.sizes.max_model_len, 14560);
    EXPECT_NE(c.chosen.back().find("the most the KV cache holds"), std::string::npos) << c.chosen.back();
}

TEST(EngineSizes, Fp8KvCacheHoldsTwiceTheContext) {
    // --kv-cache-dtype fp8: one byte an element, 72 KiB a token, so the same 2 GiB hold twice the tokens.
    SizeFacts f = qwen3_8b_on(24, 2);
    f.kv_bytes_per_token /= 2;
    const SizeChoice c = choose_sizes({}, f);
    EXPECT_EQ(c.sizes.max_model_len, 29120);
    EXPECT_NE(c.chosen.back().find("at 73728 bytes a token"), std::string::npos) << c.chosen.back();
}

TEST(EngineSizes, GivenSizesAreKeptAndNotReported) {
    const SizeChoice c = choose_sizes({64, 4096, 2048}, qwen3_8b_on(141, 100));
    EXPECT_EQ(c.sizes.max_num_seqs, 64);
    EXPECT_EQ(c.sizes.max_num_batched_tokens, 4096);
    EXPECT_EQ(c.sizes.max_model_len, 2048);
    EXPECT_TRUE(c.chosen.empty());
    EXPECT_TRUE(describe_choice(c, qwen3_8b_on(141, 100)).empty());
    // Only the ones not given are chosen and said.
    const SizeChoice some = choose_sizes({64, 0, 0}, qwen3_8b_on(141, 100));
    EXPECT_EQ(some.sizes.max_num_seqs, 64);
    EXPECT_EQ(some.chosen.size(), 2u);
}

TEST(EngineSizes, HybridSequencesBoundedByTheirStates) {
    // 106 GiB left on an H200: half of it for 3 slots of 50.25 MiB a sequence is 360 sequences, 352 in buckets of 16.
    const SizeFacts f = qwen3_5_9b_on(141, 106);
    const SizeChoice c = choose_sizes({}, f);
    const size_t per_seq = kStateSlotsPerSeq * f.state_bytes_per_slot;
    EXPECT_EQ(c.sizes.max_num_seqs, static_cast<int32_t>(f.memory_budget / 2 / per_seq / 16 * 16));
    EXPECT_EQ(c.sizes.max_num_seqs, 352);
    EXPECT_NE(c.chosen[0].find("linear-attention states"), std::string::npos) << c.chosen[0];
    // The other half holds the whole 262,144-token context many times over.
    EXPECT_EQ(c.sizes.max_model_len, 262144);
    // A small GPU: few sequences, but never none.
    const SizeChoice tiny = choose_sizes({}, qwen3_5_9b_on(24, 1));
    EXPECT_EQ(tiny.sizes.max_num_seqs, 3);
    // What the states leave (1 GiB less 3 x 3 slots) at 32 KiB a token, in whole blocks.
    EXPECT_EQ(tiny.sizes.max_model_len, 18288);
}

}  // namespace
}  // namespace pagoda::executor
