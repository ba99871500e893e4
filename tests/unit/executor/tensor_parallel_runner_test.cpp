// The engine over a tensor-parallel model (executor/tensor_parallel_runner.h through create_engine): the engine
// schedules once, the ranks (CPU threads) run each step together, and the greedy tokens of a batch of requests are
// those of the unsplit model. Sizes that cannot split the model, or more ranks than GPUs, are load errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "async_scheduling.h"
#include "common/file.h"
#include "engine/engine.h"
#include "executor/create_engine.h"
#include "golden/golden_reference.h"
#include "greedy_batch.h"
#include "runtime/cuda_backend.h"

namespace pagoda::executor {
namespace {

EngineOptions options_with(int tp) {
    EngineOptions o;
    o.max_model_len = 160;
    o.max_num_seqs = 4;
    o.num_threads = 2;
    o.device = "cpu";
    o.tensor_parallel_size = tp;
    o.async_scheduling = engine::testing::testing_async_scheduling();
    return o;
}

TEST(TensorParallelEngine, GreedyTokensAreThoseOfTheUnsplitModel) {
    // The hybrid families split their Gated DeltaNet heads (2 key heads: 2 ranks), the MoE ones their experts.
    for (const auto& [model, sizes] :
         {std::pair{std::string("qwen3"), std::vector<int>{2, 4}}, std::pair{std::string("qwen2"), std::vector<int>{2}},
          std::pair{std::string("qwen3_moe"), std::vector<int>{2}},
          std::pair{std::string("qwen3_5"), std::vector<int>{2}},
          std::pair{std::string("qwen3_next"), std::vector<int>{2}},
          std::pair{std::string("qwen3_5_moe"), std::vector<int>{2}}}) {
        const std::string dir = golden::dir(model);
        if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no golden data in " << dir;
        const std::vector<int32_t> ids = golden::load(dir, /*with_tensors=*/false).ids;
        ASSERT_GE(ids.size(), 100u);
        auto plain = create_engine(dir, options_with(1));
        ASSERT_TRUE(plain.ok()) << plain.message();
        const std::vector<std::vector<int32_t>> want = greedy_batch(**plain, ids).tokens;
        ASSERT_EQ(want.size(), 3u);
        for (const auto& tokens : want)
            ASSERT_EQ(tokens.size(), 12u);
        for (int tp : sizes) {
            SCOPED_TRACE(model + " tp " + std::to_string(tp));
            auto split = create_engine(dir, options_with(tp));
            ASSERT_TRUE(split.ok()) << split.message();
            EXPECT_EQ((*split)->model().vocab_size(), (*plain)->model().vocab_size());
            EXPECT_EQ((*split)->model().shard_plan().size, tp);
            EXPECT_EQ((*split)->config().num_kv_blocks, (*plain)->config().num_kv_blocks);
            EXPECT_EQ(greedy_batch(**split, ids).tokens, want);
            if (engine::testing::testing_async_scheduling()) {
                EXPECT_GT((*split)->engine().stats().num_steps_launched_ahead, 0);
            }
        }
    }
}

TEST(TensorParallelEngine, SizesThatCannotWorkAreErrors) {
    const std::string dir = golden::dir("qwen2");  // 6 attention heads
    if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no golden data";
    auto four = create_engine(dir, options_with(4));
    ASSERT_FALSE(four.ok());
    EXPECT_NE(four.message().find("num_attention_heads (6) is not divisible by the tensor-parallel size 4"),
              std::string::npos)
        << four.message();
    // More ranks than there are GPUs (at least 2 ranks: -tp 1 is the plain path) is refused before any GPU is used.
    EngineOptions gpu = options_with(std::max(2, cuda_device_count() + 1));
    gpu.device = "cuda";
    auto on_gpu = create_engine(dir, gpu);
    ASSERT_FALSE(on_gpu.ok());
    EXPECT_NE(on_gpu.message().find("use --device cpu"), std::string::npos) << on_gpu.message();
    EXPECT_NE(on_gpu.message().find(cuda_compiled() ? "GPUs (one per rank)" : "built without CUDA"), std::string::npos)
        << on_gpu.message();
}

}  // namespace
}  // namespace pagoda::executor
