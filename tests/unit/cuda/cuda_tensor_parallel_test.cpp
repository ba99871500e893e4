// Tensor parallelism on the CUDA backend (executor/tensor_parallel_runner.h, load_cuda), on the golden tiny models:
//  - TP = 1 through the tensor-parallel path (TensorParallelRunner on a rank thread, a one-rank NCCL group) returns
//    exactly what a ModelEngineRunner over the plainly loaded model returns, step for step: the same logits bit for
//    bit, the same greedy tokens, the same device-sampled tokens. Exact, not a tolerance: both run the same kernels
//    with the same shapes on the same GPU, and the only extra work, a one-rank all-reduce in place, is the identity;
//    any difference means the two paths diverged (a device not bound, a stream mixed up).
//  - with two GPUs or more, TP = 2 gives the logits of one GPU within bf16 tolerance (skipped with fewer);
//  - more ranks than GPUs is a clear error (runs on every build, with or without a GPU).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/file.h"
#include "cuda_test_util.h"
#include "dist/nccl_communicator.h"
#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"
#include "executor/model_engine_runner.h"
#include "executor/tensor_parallel_runner.h"
#include "golden/golden_reference.h"
#include "model/model.h"
#include "runtime/forward_batch.h"

namespace pagoda::executor {
namespace {

constexpr int32_t kBlockSize = 16;
constexpr int32_t kBlocksPerSeq = 8;  // 128 tokens per sequence, more than the script feeds
constexpr int kNumSeqs = 2;
// TP = 2 against one GPU: the same bound the CUDA golden test holds both to against transformers.
constexpr float kSplitRelTolerance = 2e-2f;

engine::EngineConfig pool_config() {
    engine::EngineConfig c;
    c.block_size = kBlockSize;
    c.num_kv_blocks = kBlocksPerSeq * kNumSeqs;
    c.max_num_seqs = kNumSeqs;
    c.max_model_len = kBlockSize * kBlocksPerSeq;
    return c;
}

// The script: each step feeds the next `count` reference tokens of some sequences (teacher forcing, so that every
// step's input is the same whatever the runner returned before). Prefill with every row's logits, decode, a prefill
// batched with a decode, and a last step whose tokens the device sampler picks.
struct Feed {
    int seq;
    int32_t count;
};
struct StepPlan {
    std::vector<Feed> feeds;
    bool all_rows = false;
    bool sample_on_device = false;
};
std::vector<StepPlan> script() {
    std::vector<StepPlan> steps;
    steps.push_back({{{0, 70}}, /*all_rows=*/true, false});
    for (int i = 0; i < 6; ++i)
        steps.push_back({{{0, 1}}});
    steps.push_back({{{1, 30}, {0, 1}}});
    steps.push_back({{{0, 1}, {1, 11}}, false, /*sample_on_device=*/true});
    return steps;
}
constexpr size_t kTokensUsed = 78;  // of the reference ids, by the longest sequence

// What one step returned: the host logits rows, and one token per feed (the argmax of its last row, or the device
// sampler's greedy pick with its logprob).
struct StepRecord {
    std::vector<float> logits;
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
};

int32_t argmax(std::span<const float> row) {
    return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

Result<std::vector<StepRecord>> run_script(engine::ModelRunner& runner, const std::vector<int32_t>& ids) {
    std::array<int32_t, kNumSeqs> cached{};  // tokens of each sequence already in the KV cache
    std::array<std::vector<int32_t>, kNumSeqs> tables;
    for (int s = 0; s < kNumSeqs; ++s)
        for (int32_t b = 0; b < kBlocksPerSeq; ++b)
            tables[static_cast<size_t>(s)].push_back(s * kBlocksPerSeq + b);
    engine::SamplingParams greedy;
    greedy.temperature = 0.0f;
    greedy.logprobs = true;
    engine::apply_generation_config(greedy, {});
    const std::vector<int32_t> no_eos;

    std::vector<StepRecord> records;
    const int32_t vocab = runner.vocab_size();
    for (const StepPlan& plan : script()) {
        ForwardBatchBuilder builder(kBlockSize);
        std::vector<int32_t> last_rows;
        std::vector<engine::SamplingContext> sampling;
        int32_t rows = 0;
        for (const Feed& f : plan.feeds) {
            const auto s = static_cast<size_t>(f.seq);
            const auto fed =
                std::span<const int32_t>(ids).subspan(static_cast<size_t>(cached[s]), static_cast<size_t>(f.count));
            builder.add_sequence(fed, cached[s], tables[s], /*state_slot=*/0,
                                 plan.all_rows ? ForwardBatchBuilder::Logits::All : ForwardBatchBuilder::Logits::Last);
            rows += plan.all_rows ? f.count : 1;
            last_rows.push_back(rows - 1);
            cached[s] += f.count;
            engine::SamplingContext c;
            c.params = &greedy;
            c.prompt_tokens = std::span<const int32_t>(ids).first(static_cast<size_t>(cached[s]));
            c.eos_token_ids = no_eos;
            sampling.push_back(c);
        }
        engine::StepInput input;
        input.batch = builder.view();
        if (plan.sample_on_device) {
            input.sample_rows = last_rows;
            input.sampling = sampling;
        }
        const engine::StepOutput out = runner.execute(input);
        if (!out.status.ok()) return out.status;
        StepRecord r;
        r.logits.assign(out.logits.begin(), out.logits.end());
        if (plan.sample_on_device) {
            if (out.samples.size() != plan.feeds.size())
                return Status::error("expected " + std::to_string(plan.feeds.size()) + " device samples, got " +
                                     std::to_string(out.samples.size()));
            for (const engine::SampleResult& sample : out.samples) {
                r.tokens.push_back(sample.token);
                r.logprobs.push_back(sample.logprob);
            }
        } else {
            if (r.logits.size() != static_cast<size_t>(rows) * static_cast<size_t>(vocab))
                return Status::error("expected " + std::to_string(rows) + " logits rows");
            for (int32_t row : last_rows)
                r.tokens.push_back(argmax(std::span<const float>(r.logits).subspan(
                    static_cast<size_t>(row) * static_cast<size_t>(vocab), static_cast<size_t>(vocab))));
        }
        records.push_back(std::move(r));
    }
    return records;
}

struct Diff {
    float max_abs_diff = 0;
    float max_abs_ref = 0;
};
Diff logits_diff(const std::vector<StepRecord>& ours, const std::vector<StepRecord>& ref) {
    Diff d;
    EXPECT_EQ(ours.size(), ref.size());
    for (size_t s = 0; s < std::min(ours.size(), ref.size()); ++s) {
        EXPECT_EQ(ours[s].logits.size(), ref[s].logits.size()) << "step " << s;
        for (size_t i = 0; i < std::min(ours[s].logits.size(), ref[s].logits.size()); ++i) {
            const float diff = std::fabs(ours[s].logits[i] - ref[s].logits[i]);
            d.max_abs_diff = std::isnan(diff) ? INFINITY : std::max(d.max_abs_diff, diff);
            d.max_abs_ref = std::max(d.max_abs_ref, std::fabs(ref[s].logits[i]));
        }
    }
    return d;
}

class CudaTensorParallelTest : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        PAGODA_REQUIRE_GPU();
        if (!nccl_compiled()) GTEST_SKIP() << "built without NCCL: CUDA tensor-parallel tests skipped";
        dir_ = golden::dir(GetParam());
        if (!file_exists(dir_ + "/config.json")) GTEST_SKIP() << "no golden data in " << dir_;
        ids_ = golden::load(dir_, /*with_tensors=*/false).ids;
        ASSERT_GE(ids_.size(), kTokensUsed);
        plain_ = run_plain();
    }

    // The reference: the model loaded the ordinary way (no communicator) under a ModelEngineRunner, on GPU 0.
    std::vector<StepRecord> run_plain() {
        auto backend = make_cuda_backend();
        EXPECT_TRUE(backend.ok()) << backend.message();
        if (!backend.ok()) return {};
        auto model = model::Model::load(dir_, **backend);
        EXPECT_TRUE(model.ok()) << model.message();
        if (!model.ok()) return {};
        // Eager, as the ranks run (no CUDA graphs for them yet): the same kernels with the same shapes, so bit for bit.
        auto runner = ModelEngineRunner::create(**model, pool_config(), /*cuda_graphs=*/false);
        EXPECT_TRUE(runner.ok()) << runner.message();
        if (!runner.ok()) return {};
        // And warmed up as TensorParallelRunner::start warms the ranks: the warm-up step tunes the GEMMs of its
        // token-count bucket, which later steps of that bucket reuse.
        const Status warmed = (*runner)->warm_up(pool_config());
        EXPECT_TRUE(warmed.ok()) << warmed.message();
        auto records = run_script(**runner, ids_);
        EXPECT_TRUE(records.ok()) << records.message();
        return records.ok() ? std::move(records).value() : std::vector<StepRecord>{};
    }

    Result<std::vector<StepRecord>> run_split(int size) {
        PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<TensorParallelRunner> tp, TensorParallelRunner::load_cuda(dir_, size));
        if (tp->model().shard_plan().size != size)
            return Status::error("the model was not split " + std::to_string(size) + " ways");
        PAGODA_RETURN_IF_ERROR(tp->start(pool_config()));
        return run_script(*tp, ids_);
    }

    std::string dir_;
    std::vector<int32_t> ids_;
    std::vector<StepRecord> plain_;
};

TEST_P(CudaTensorParallelTest, SizeOneThroughTheTensorParallelPathIsExactlyThePlainRunner) {
    ASSERT_EQ(plain_.size(), script().size());
    auto tp = run_split(1);
    ASSERT_TRUE(tp.ok()) << tp.message();
    ASSERT_EQ(tp->size(), plain_.size());
    for (size_t s = 0; s < plain_.size(); ++s) {
        EXPECT_EQ((*tp)[s].tokens, plain_[s].tokens) << "step " << s;
        EXPECT_EQ((*tp)[s].logprobs, plain_[s].logprobs) << "step " << s;
    }
    const Diff d = logits_diff(*tp, plain_);
    std::printf("[ %s tp=1 on cuda ] max|Δ| vs plain %.3g (max|logit| %.3g)\n", GetParam().c_str(), d.max_abs_diff,
                d.max_abs_ref);
    EXPECT_EQ(d.max_abs_diff, 0.0f);
    EXPECT_GT(d.max_abs_ref, 0.0f);  // the logits were there to compare
}

TEST_P(CudaTensorParallelTest, SizeTwoOverTwoGpusMatchesOneGpu) {
    if (cuda_device_count() < 2) GTEST_SKIP() << "needs 2 GPUs, " << cuda_device_count() << " visible";
    ASSERT_EQ(plain_.size(), script().size());
    auto tp = run_split(2);
    ASSERT_TRUE(tp.ok()) << tp.message();
    const Diff d = logits_diff(*tp, plain_);
    const float tol = kSplitRelTolerance * d.max_abs_ref;
    std::printf("[ %s tp=2 on cuda ] max|Δ| vs one GPU %.3g (max|logit| %.3g, tolerance %.3g)\n", GetParam().c_str(),
                d.max_abs_diff, d.max_abs_ref, tol);
    EXPECT_LE(d.max_abs_diff, tol);
    EXPECT_GT(d.max_abs_ref, 0.0f);
}

// All three split in 2: qwen2 (6 heads, 2 KV heads, q/k/v biases), qwen2_tied (tied embeddings), qwen3 (QK-norm).
INSTANTIATE_TEST_SUITE_P(Dense, CudaTensorParallelTest, ::testing::Values("qwen2", "qwen2_tied", "qwen3"));

// The group is checked before any device is touched: no GPU is needed to get this answer.
TEST(CudaTensorParallelErrors, MoreRanksThanGpusIsAClearError) {
    const int gpus = cuda_device_count();
    auto tp = TensorParallelRunner::load_cuda(golden::dir("qwen3"), gpus + 1);
    ASSERT_FALSE(tp.ok());
    if (cuda_compiled()) {
        EXPECT_NE(tp.message().find("needs " + std::to_string(gpus + 1) + " GPUs (one per rank) but " +
                                    std::to_string(gpus) + " are visible"),
                  std::string::npos)
            << tp.message();
    } else {
        EXPECT_NE(tp.message().find("built without CUDA"), std::string::npos) << tp.message();
    }
    auto none = TensorParallelRunner::load_cuda(golden::dir("qwen3"), 0);
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.message().find("at least 1"), std::string::npos) << none.message();
}

}  // namespace
}  // namespace pagoda::executor
