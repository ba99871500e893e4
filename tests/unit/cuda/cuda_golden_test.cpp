// The golden tiny models (tests/golden) on the CUDA backend: transformers' fp32 logits within bf16 tolerance at
// every position of a prefill, through token-by-token decode, and for mixed batches. The GPU keeps activations in
// fp32 but stores K/V in bf16 and rounds GEMM inputs of more than one token to bf16, hence a looser bound than the CPU
// golden test's 1e-3: 2e-2 of max|ref|, or 1.5x what transformers' own bf16 forward moves the same logits where that
// is more (bench/gpu/golden_bf16_drift.py measured it on the GPU machine; reference.json records it). Hybrid and MoE
// models amplify rounding: a top-k routing choice or a decay gate flips (transformers' bf16 drift is 0.12 on the
// dense qwen3 model, 0.35 on qwen3_5, 0.85 on qwen3_moe, 2.6 on qwen3_next).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <utility>

#include "common/file.h"
#include "golden/golden_reference.h"
#include "golden/kv_fp8_accuracy.h"
#include "model/model.h"
#include "model/runner.h"
#include "runtime/cuda_backend.h"

namespace pagoda::model {
namespace {

constexpr float kRelTolerance = 2e-2f;       // of max|ref logit|
constexpr float kTransformersFactor = 1.5f;  // times transformers' own bf16 drift
// At a router near-tie (MoE goldens' reference.json, tools/record_router_ties.py) bf16 may choose the other expert,
// which moves that position by a whole expert's share (qwen3_moe_fp8_channel on an H100: 2.65 at position 58, a top-2
// margin of 0.0067, every other position under 1.8 against a bound of 2.08): such positions are held to twice the
// bound, every other one to the bound.
constexpr float kNearTieFactor = 2.0f;

using golden::Bf16Diff;
using golden::Reference;

// Logits of the reference rows [ref_row, ref_row + rows) within tol off the router near-ties, kNearTieFactor · tol at
// them.
void expect_within(const Bf16Diff& d, float tol, const std::string& what = "") {
    EXPECT_LE(d.off_ties, tol) << what;
    EXPECT_LE(d.at_ties, kNearTieFactor * tol) << what << " (at router near-ties)";
}
void expect_within(const std::vector<float>& ours, const Reference& ref, int64_t ref_row, int64_t rows, float tol,
                   const std::string& what = "") {
    expect_within(golden::bf16_diff(ours, ref, ref_row, rows), tol, what);
}

class CudaGoldenTest : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        if (cuda_device_count() == 0)
            GTEST_SKIP() << (cuda_compiled() ? "no CUDA GPU visible" : "built without CUDA") << ": skipped";
        dir_ = golden::dir(GetParam());
        if (!file_exists(dir_ + "/config.json")) GTEST_SKIP() << "no golden data in " << dir_;
        ref_ = golden::load(dir_);
        ASSERT_EQ(ref_.logits.size(), static_cast<size_t>(ref_.rows * ref_.vocab)) << "logits.bin unreadable";
        auto backend = make_cuda_backend();
        ASSERT_TRUE(backend.ok()) << backend.message();
        backend_ = std::move(backend).value();
        auto model = Model::load(dir_, *backend_);
        ASSERT_TRUE(model.ok()) << model.message();
        model_ = std::move(model).value();
        tol_ = std::max(kRelTolerance * ref_.max_abs,
                        kTransformersFactor * static_cast<float>(ref_.transformers_bf16_max_abs_diff));
    }
    std::span<const int32_t> ids(int64_t b, int64_t e) const {
        return std::span<const int32_t>(ref_.ids).subspan(static_cast<size_t>(b), static_cast<size_t>(e - b));
    }
    SequenceRunner runner(int32_t seqs) {
        auto r = SequenceRunner::create(*model_, seqs, static_cast<int32_t>(ref_.rows) + 8);
        EXPECT_TRUE(r.ok()) << r.message();
        return std::move(r).value();
    }

    std::string dir_;
    Reference ref_;
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<Model> model_;
    float tol_ = 0;
};

TEST_P(CudaGoldenTest, PrefillThenDecodeMatchTransformers) {
    SequenceRunner r = runner(1);
    const int64_t split = 70;
    auto first = r.feed(0, ids(0, split), true);
    ASSERT_TRUE(first.ok()) << first.message();
    const Bf16Diff prefill = golden::bf16_diff(*first, ref_, 0, split);
    Bf16Diff decode;
    for (int64_t t = split; t < ref_.rows; ++t) {
        auto step = r.feed(0, ids(t, t + 1), false);
        ASSERT_TRUE(step.ok()) << step.message();
        decode.add(golden::bf16_diff(*step, ref_, t, 1));
    }
    std::printf(
        "[ %s ] prefill max|Δ| %.3g, decode max|Δ| %.3g (tolerance %.3g; max|ref| %.3g, transformers' bf16 "
        "max|Δ| %.3g; at router near-ties %.3g, %.3g)\n",
        GetParam().c_str(), prefill.off_ties, decode.off_ties, tol_, ref_.max_abs, ref_.transformers_bf16_max_abs_diff,
        prefill.at_ties, decode.at_ties);
    expect_within(prefill, tol_, "prefill");
    expect_within(decode, tol_, "decode");
}

TEST_P(CudaGoldenTest, AllPositionsAndMixedBatches) {
    {
        SequenceRunner r = runner(1);
        auto all = r.feed(0, ids(0, ref_.rows), true);
        ASSERT_TRUE(all.ok()) << all.message();
        const Bf16Diff d = golden::bf16_diff(*all, ref_, 0, ref_.rows);
        std::printf("[ %s ] all %lld positions max|Δ| %.3g (at router near-ties %.3g)\n", GetParam().c_str(),
                    static_cast<long long>(ref_.rows), d.off_ties, d.at_ties);
        // Where it sits: the positions past half the tolerance (one position alone is a routing or rounding near-tie
        // flipped; many are a kernel's error).
        const std::vector<float> rows = row_diffs(*all, ref_, 0, ref_.rows);
        for (size_t t = 0; t < rows.size(); ++t)
            if (rows[t] > 0.5f * tol_)
                std::printf("[ %s ]   position %zu max|Δ| %.3g\n", GetParam().c_str(), t, rows[t]);
        expect_within(d, tol_, "all positions");
    }
    SequenceRunner r = runner(3);
    SequenceRunner::Feed step1[] = {{0, ids(0, 80), true}, {1, ids(0, 30), true}};
    auto out1 = r.step(step1);
    ASSERT_TRUE(out1.ok()) << out1.message();
    expect_within((*out1)[0], ref_, 0, 80, tol_, "sequence 0, 80 tokens");
    expect_within((*out1)[1], ref_, 0, 30, tol_, "sequence 1, 30 tokens");
    SequenceRunner::Feed step2[] = {{1, ids(30, 31), false}, {0, ids(80, ref_.rows), true}, {2, ids(0, 5), false}};
    auto out2 = r.step(step2);
    ASSERT_TRUE(out2.ok()) << out2.message();
    expect_within((*out2)[0], ref_, 30, 1, tol_, "sequence 1 decoding");
    expect_within((*out2)[1], ref_, 80, ref_.rows - 80, tol_, "sequence 0 prefilling");
    expect_within((*out2)[2], ref_, 4, 1, tol_, "sequence 2 prefilling");
}

// --quantization fp8 on the GPU: the bf16 qwen3 quantized at load (per channel, on the host) and uploaded; the
// qwen3_fp8_channel golden holds the same weights (fp8_checkpoint_test checks that on the CPU, byte for byte).
// --kv-cache-dtype fp8 against the bf16 cache (everything else alike) at every position, prefill then decode: the
// tensor-core kernels on e4m3 tiles. Prints max|Δ| relative to max|logit| and the top-1 agreement; the bounds are
// kv_fp8_golden_test's (kv_fp8_accuracy.h; the CPU's fp8-vs-f32 figures are in docs/status.md).
TEST_P(CudaGoldenTest, Fp8KvCacheStaysCloseToTheBf16Cache) {
    for (const bool calculate : {true, false}) {
        const golden::KvFp8Accuracy a = golden::kv_fp8_accuracy(*backend_, dir_, ref_.ids, ref_.vocab, calculate);
        std::printf("[ %s ] fp8 KV (%s) vs bf16 KV: max|Δ| %.4g of max|logit| %.4g (%.3g%%), top-1 agrees at %d/%d\n",
                    GetParam().c_str(), calculate ? "calculated scales" : "scales 1.0", a.max_abs_diff, a.max_abs_logit,
                    100.0 * a.relative(), a.top1_agree, a.positions);
        EXPECT_GT(a.positions, 0);
        const char* what = calculate ? "calculated scales" : "scales 1.0";
        EXPECT_LE(a.max_abs_diff, golden::kv_fp8_max_diff_bound(a.max_abs_logit, ref_.transformers_bf16_max_abs_diff))
            << what;
        EXPECT_GE(a.agreement(), golden::kKvFp8MinTop1) << what;
    }
}

TEST(CudaQuantizeAtLoad, Fp8MatchesThePerChannelGolden) {
    if (cuda_device_count() == 0)
        GTEST_SKIP() << (cuda_compiled() ? "no CUDA GPU visible" : "built without CUDA") << ": skipped";
    // qwen3_moe: its experts quantized at load too, read by the MoE kernels as per-channel fp8 stacks.
    for (const auto& [source, quantized] :
         {std::pair{"qwen3", "qwen3_fp8_channel"}, std::pair{"qwen3_moe", "qwen3_moe_fp8_channel"}}) {
        SCOPED_TRACE(quantized);
        const std::string channel = golden::dir(quantized);
        if (!file_exists(channel + "/config.json")) GTEST_SKIP() << "no golden data in " << channel;
        const Reference ref = golden::load(channel);
        auto backend = make_cuda_backend();
        ASSERT_TRUE(backend.ok()) << backend.message();
        auto model = Model::load(golden::dir(source), **backend, single_communicator(), LoadOptions{"fp8"});
        ASSERT_TRUE(model.ok()) << model.message();
        const float tol = std::max(kRelTolerance * ref.max_abs,
                                   kTransformersFactor * static_cast<float>(ref.transformers_bf16_max_abs_diff));
        auto r = SequenceRunner::create(**model, 1, static_cast<int32_t>(ref.rows) + 8);
        ASSERT_TRUE(r.ok()) << r.message();
        const int64_t split = 70;
        auto prefill = r->feed(0, std::span<const int32_t>(ref.ids).subspan(0, split), true);
        ASSERT_TRUE(prefill.ok()) << prefill.message();
        expect_within(*prefill, ref, 0, split, tol, "prefill");
        for (int64_t t = split; t < ref.rows; ++t) {
            auto step = r->feed(0, std::span<const int32_t>(ref.ids).subspan(static_cast<size_t>(t), 1), false);
            ASSERT_TRUE(step.ok()) << step.message();
            expect_within(*step, ref, t, 1, tol, "decode position " + std::to_string(t));
        }
    }
}

// --fp8-activations (W8A8) on the GPU: the qwen3_fp8 golden with every projection's input rounded to fp8 per token
// in groups of 128 against transformers' logits for the same rounding (tools/make_fp8_golden.py --w8a8), within 1.5x
// transformers' own bf16 deviation from them for that computation (--w8a8-drift). The weight-only checkpoint's drift
// is no bound here: a bf16-sized difference upstream that crosses an e4m3 rounding boundary becomes a whole e4m3 step
// (pagoda measured 0.749 against that bound of 0.214 on an H100 and an H200, where transformers' own bf16 W8A8 run
// is 0.864 off); without the W8A8 drift in reference.json the test skips. (Its K of 64 and 128 are not multiples of
// 512: the inputs are rounded by the CUDA kernel and the weight-only paths run; the cuBLASLt fp8 GEMM is held to the
// CPU by the op harness.)
TEST(CudaFp8Activations, MatchTransformersRoundingTheInputs) {
    if (cuda_device_count() == 0)
        GTEST_SKIP() << (cuda_compiled() ? "no CUDA GPU visible" : "built without CUDA") << ": skipped";
    const std::string dir = golden::dir("qwen3_fp8");
    if (!file_exists(dir + "/w8a8_logits_last8.bin")) GTEST_SKIP() << "no golden qwen3_fp8 W8A8 logits";
    const Reference ref = golden::load(dir);
    if (ref.w8a8_transformers_bf16_max_abs_diff == 0)
        GTEST_SKIP() << "reference.json has no w8a8_transformers_bf16_max_abs_diff (make_fp8_golden.py --w8a8-drift)";
    const auto want = golden::read_f32(dir + "/w8a8_logits_last8.bin", static_cast<size_t>(8 * ref.vocab));
    ASSERT_EQ(want.size(), static_cast<size_t>(8 * ref.vocab));
    auto backend = make_cuda_backend();
    ASSERT_TRUE(backend.ok()) << backend.message();
    LoadOptions w8a8;
    w8a8.fp8_activations = true;
    auto model = Model::load(dir, **backend, single_communicator(), w8a8);
    ASSERT_TRUE(model.ok()) << model.message();
    const float tol = std::max(kRelTolerance * ref.max_abs,
                               kTransformersFactor * static_cast<float>(ref.w8a8_transformers_bf16_max_abs_diff));
    auto r = SequenceRunner::create(**model, 1, static_cast<int32_t>(ref.rows) + 8);
    ASSERT_TRUE(r.ok()) << r.message();
    auto prefill = r->feed(0, ref.ids, true);
    ASSERT_TRUE(prefill.ok()) << prefill.message();
    const size_t first = static_cast<size_t>((ref.rows - 8) * ref.vocab);
    float diff = 0.0f;
    for (size_t i = 0; i < want.size(); ++i)
        diff = std::max(diff, std::fabs((*prefill)[first + i] - want[i]));
    std::printf("[ qwen3_fp8 W8A8 ] max|Δ| %.3g (bound %.3g)\n", diff, tol);
    EXPECT_LE(diff, tol);
}

// Every family: dense (qwen2, qwen3), routed experts (qwen3_moe), the hybrids with Gated DeltaNet and gated attention
// (qwen3_5 dense, qwen3_next and qwen3_5_moe with experts and a gated shared expert); YaRN rope scaling, full
// (qwen3_yarn) and over partial rotary dims (qwen3_5_yarn), whose plain-RoPE logits miss the reference by 3-21x this
// test's bound (reference.json: without_rope_scaling_max_abs_diff vs transformers_bf16_max_abs_diff); and the fp8
// checkpoints (weight-only fp8 GEMV and dequantise-then-GEMM; their bf16 drift was measured on the CPU,
// tools/make_fp8_golden.py); and the int4 checkpoints, dense and Qwen3-MoE with int4 experts (GPTQ, AWQ, W4A16:
// the experts dequantised to bf16 per call; bf16 drift measured on the CPU, tools/make_int4_golden.py); and the GPTQ
// 8-bit ones (the int4 GEMV and dequantisation kernels at 8 bits a value).
INSTANTIATE_TEST_SUITE_P(Golden, CudaGoldenTest, ::testing::ValuesIn(golden::kModels),
                         // Cases named by model (Golden/CudaGoldenTest.X/qwen3_awq), so --gtest_filter can pick them.
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace pagoda::model
