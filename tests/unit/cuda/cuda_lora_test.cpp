// Multi-LoRA on the CUDA backend (the tiled shrink/expand kernels, kernels/cuda/lora, over the adapter slots' device
// layout; the kernels' harder shapes are op-harness cases, `backend_ops_test --gtest_filter='*lora*'`): the adapters of
// tests/golden/lora against transformers + peft's logits within cuda_golden_test's bound for the base model (2e-2 of
// max|ref|, or 1.5x transformers' bf16 drift where that is more), in a step that mixes the adapter's sequence with a
// base one (whose logits must stay the base model's), and for one-token decode steps (the GEMV path plus the delta).
// Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/file.h"
#include "common/json.h"
#include "golden/golden_reference.h"
#include "model/model.h"
#include "model/runner.h"
#include "runtime/cuda_backend.h"

namespace pagoda::model {
namespace {

constexpr float kRelTolerance = 2e-2f;
constexpr float kTransformersFactor = 1.5f;

struct Case {
    std::string model, adapter;
};

class CudaLoraTest : public ::testing::TestWithParam<Case> {};

TEST_P(CudaLoraTest, PrefillAndDecodeMatchPeft) {
    if (cuda_device_count() == 0)
        GTEST_SKIP() << (cuda_compiled() ? "no CUDA GPU visible" : "built without CUDA") << ": skipped";
    const Case& c = GetParam();
    const std::string dir = golden::dir("lora/" + c.model);
    if (!file_exists(dir + "/reference.json")) GTEST_SKIP() << "no LoRA golden data";
    auto text = read_file(dir + "/reference.json");
    ASSERT_TRUE(text.ok());
    auto ref = Json::parse(*text);
    ASSERT_TRUE(ref.ok());
    std::vector<int32_t> prompt;
    for (const Json& v : ref->find("prompt_ids")->as_array())
        prompt.push_back(static_cast<int32_t>(v.as_int()));
    const int64_t rows = static_cast<int64_t>(prompt.size()), vocab = ref->find("vocab")->as_int();
    const std::vector<float> want =
        golden::read_f32(dir + "/logits_" + c.adapter + ".bin", static_cast<size_t>(rows * vocab));
    ASSERT_EQ(want.size(), static_cast<size_t>(rows * vocab));
    float max_abs = 0;
    for (float v : want)
        max_abs = std::max(max_abs, std::fabs(v));
    // cuda_golden_test's bound for the base model: 2e-2 of max|ref|, or 1.5x transformers' own bf16 drift on it where
    // that is more (the hybrid models: a decay gate or a routing choice flips in bf16). An adapter adds no rounding
    // of its own beyond the base model's.
    const float tol = std::max(
        kRelTolerance * max_abs,
        kTransformersFactor * static_cast<float>(golden::load(golden::dir(c.model)).transformers_bf16_max_abs_diff));

    auto backend = make_cuda_backend();
    ASSERT_TRUE(backend.ok()) << backend.message();
    auto model = Model::load(golden::dir(c.model), **backend);
    ASSERT_TRUE(model.ok()) << model.message();
    ASSERT_TRUE((*model)->enable_lora(2, 16).ok());
    auto adapter = (*model)->read_lora(dir + "/" + c.adapter);
    ASSERT_TRUE(adapter.ok()) << adapter.message();
    std::shared_ptr<const LoraAdapter> a = *adapter;
    const int32_t ids[] = {5};
    ASSERT_TRUE((*model)->lora()->make_resident(ids, [a](int32_t) { return a; }).ok());

    auto runner = SequenceRunner::create(**model, 2, static_cast<int32_t>(rows) + 8);
    ASSERT_TRUE(runner.ok()) << runner.message();
    const int64_t split = rows - 4;
    const auto head = std::span<const int32_t>(prompt).first(static_cast<size_t>(split));
    const SequenceRunner::Feed feeds[] = {{0, head, true, 5}, {1, head, true, 0}};
    auto out = runner->step(feeds);
    ASSERT_TRUE(out.ok()) << out.message();
    float prefill = 0, base_gap = 0;
    for (size_t i = 0; i < static_cast<size_t>(split * vocab); ++i) {
        prefill = std::max(prefill, std::fabs((*out)[0][i] - want[i]));
        base_gap = std::max(base_gap, std::fabs((*out)[1][i] - want[i]));
    }
    float decode = 0;
    for (int64_t t = split; t < rows; ++t) {
        const SequenceRunner::Feed step[] = {{0, std::span<const int32_t>(prompt).subspan(t, 1), false, 5}};
        auto o = runner->step(step);
        ASSERT_TRUE(o.ok()) << o.message();
        for (int64_t v = 0; v < vocab; ++v)
            decode = std::max(decode, std::fabs((*o)[0][v] - want[t * vocab + v]));
    }
    std::printf("[ %s/%s ] prefill max|Δ| %.3g, decode max|Δ| %.3g (tolerance %.3g); base sequence %.3g away\n",
                c.model.c_str(), c.adapter.c_str(), prefill, decode, tol, base_gap);
    EXPECT_LE(prefill, tol);
    EXPECT_LE(decode, tol);
    // The adapter moves the logits far more than the GPU's rounding does: the base sequence (no adapter) stays far
    // from the adapter's reference while the adapter's sequences come close to it.
    EXPECT_GT(base_gap, 4 * std::max(prefill, decode)) << "the base sequence of the step must not get the adapter";
}

INSTANTIATE_TEST_SUITE_P(Peft, CudaLoraTest,
                         ::testing::Values(Case{"qwen3", "attn"}, Case{"qwen3", "mlp_rslora"}, Case{"qwen3_5", "all"},
                                           Case{"qwen3_next", "mixed"}),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.model + "_" + i.param.adapter; });

}  // namespace
}  // namespace pagoda::model
