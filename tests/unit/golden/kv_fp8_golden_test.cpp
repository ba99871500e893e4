// --kv-cache-dtype fp8 on the golden tiny models (CPU): logits with an e4m3 KV cache against the F32 cache at every
// position of the golden sequence (prefill, then decode), with scales calculated from the first prefill
// (--calculate-kv-scales) and with vLLM's default scales of 1.0. Prints max|Δ| relative to max|logit| and the top-1
// agreement; the bounds (kv_fp8_accuracy.h) allow for how much these tiny random models amplify rounding.
#include <gtest/gtest.h>

#include <cstdio>

#include "common/file.h"
#include "golden/golden_reference.h"
#include "golden/kv_fp8_accuracy.h"

namespace pagoda::model {
namespace {

class KvFp8GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(KvFp8GoldenTest, LogitsStayCloseToTheF32Cache) {
    const std::string dir = golden::dir(GetParam());
    if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no golden data in " << dir;
    const golden::Reference ref = golden::load(dir, /*with_tensors=*/false);
    auto backend = make_cpu_backend();
    for (const bool calculate : {true, false}) {
        const golden::KvFp8Accuracy a = golden::kv_fp8_accuracy(*backend, dir, ref.ids, ref.vocab, calculate);
        std::printf("[ %s ] fp8 KV (%s) vs f32 KV: max|Δ| %.4g of max|logit| %.4g (%.3g%%), top-1 agrees at %d/%d\n",
                    GetParam().c_str(), calculate ? "calculated scales" : "scales 1.0", a.max_abs_diff, a.max_abs_logit,
                    100.0 * a.relative(), a.top1_agree, a.positions);
        EXPECT_GT(a.positions, 0);
        EXPECT_GT(a.max_abs_diff, 0.0f) << "the fp8 cache changed nothing: is it in use?";
        const char* what = calculate ? "calculated scales" : "scales 1.0";
        EXPECT_LE(a.max_abs_diff, golden::kv_fp8_max_diff_bound(a.max_abs_logit, ref.transformers_bf16_max_abs_diff))
            << what;
        EXPECT_GE(a.agreement(), golden::kKvFp8MinTop1) << what;
    }
}

// The dense families and the hybrid ones (whose full-attention layers alone have KV).
INSTANTIATE_TEST_SUITE_P(Golden, KvFp8GoldenTest,
                         ::testing::Values("qwen3", "qwen2", "qwen3_moe", "qwen3_5", "qwen3_next"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace pagoda::model
