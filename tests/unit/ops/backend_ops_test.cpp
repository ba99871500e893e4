// Every case of the op harness (op_cases.cpp) on every backend against the CPU backend, outputs poisoned with NaN
// first. Without a GPU the CPU runs each case against itself with every activation row-padded (strided views) and
// through begin_step, and the CUDA runs are skipped, saying so. Ops a backend does not run yet are skipped on it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "ops/op_harness.h"
#include "runtime/cuda_backend.h"

namespace pagoda::op_harness {
namespace {

class BackendOpsTest : public ::testing::TestWithParam<size_t> {
  protected:
    static void SetUpTestSuite() {
        cpu_ = make_cpu_backend().release();
        if (cuda_device_count() == 0) {
            std::printf("%s: CUDA runs skipped, the CPU runs each case against itself (padded rows vs dense)\n",
                        cuda_compiled() ? "no CUDA GPU visible" : "built without CUDA");
            return;
        }
        auto g = make_cuda_backend();
        if (g.ok())
            gpu_ = std::move(g).value().release();
        else
            std::printf("CUDA backend did not start (%s): CUDA runs skipped\n", g.message().c_str());
    }
    static void TearDownTestSuite() {
        delete gpu_;
        delete cpu_;
        gpu_ = cpu_ = nullptr;
    }

    // Runs `c` on `backend` and compares it with the reference run; prints each output's error.
    void expect_matches(const OpCase& c, const CaseRun& reference, Backend& backend, Layout layout, bool step) {
        std::string why;
        const auto run = run_case(c, backend, layout, step, &why);
        if (!run) {
            std::printf("  %-10s skipped: %s\n", backend.device().kind == DeviceKind::Cuda ? "cuda" : "cpu",
                        why.c_str());
            skipped_ = why;
            return;
        }
        const char* label = layout == Layout::Padded ? "padded" : "dense";
        for (const Comparison& cmp : compare(reference, *run)) {
            std::printf("  %-4s %-6s %-28s max rel err %.3g (tol %.0e)\n",
                        backend.device().kind == DeviceKind::Cuda ? "cuda" : "cpu", label, cmp.what.c_str(), cmp.error,
                        cmp.tol);
            EXPECT_TRUE(cmp.ok) << c.name << " on " << backend.name() << " (" << label << "): " << cmp.what
                                << " max rel err " << cmp.error << " > " << cmp.tol;
        }
    }

    static Backend* cpu_;
    static Backend* gpu_;
    std::string skipped_;
};

Backend* BackendOpsTest::cpu_ = nullptr;
Backend* BackendOpsTest::gpu_ = nullptr;

TEST_P(BackendOpsTest, MatchesCpu) {
    const OpCase& c = op_cases()[GetParam()];
    std::string why;
    const auto reference = run_case(c, *cpu_, Layout::Contiguous, false, &why);
    ASSERT_NE(reference, nullptr) << why;
    expect_matches(c, *reference, *cpu_, Layout::Padded, true);
    if (gpu_ == nullptr) return;
    expect_matches(c, *reference, *gpu_, Layout::Contiguous, false);
    expect_matches(c, *reference, *gpu_, Layout::Padded, true);
    if (!skipped_.empty()) GTEST_SKIP() << skipped_;
}

INSTANTIATE_TEST_SUITE_P(backend_ops, BackendOpsTest, ::testing::Range<size_t>(0, op_cases().size()),
                         [](const auto& info) { return test_name(op_cases()[info.param].name); });

TEST(OpCasesTest, NamesAreUniqueAndEveryOpIsCovered) {
    std::set<std::string> names, ops;
    for (const auto* table : {&op_cases(), &qwen3_8b_cases(), &qwen3_30b_a3b_cases()})
        for (const OpCase& c : *table) {
            EXPECT_TRUE(names.insert(test_name(c.name)).second) << "two cases named " << c.name;
            ops.insert(c.op);
        }
    for (const char* op : {"embedding",
                           "rms_norm",
                           "add_rms_norm",
                           "head_rms_norm",
                           "linear",
                           "rope",
                           "qk_norm_rope",
                           "qk_norm_rope_write_kv",
                           "write_kv",
                           "paged_attention",
                           "silu_mul",
                           "linear_silu_mul",
                           "linear_gated_add",
                           "sigmoid_mul",
                           "add",
                           "copy",
                           "gather_rows",
                           "argmax",
                           "moe_topk_softmax",
                           "moe_experts",
                           "causal_conv1d_silu",
                           "gdn_gating",
                           "l2_norm",
                           "gated_delta_rule",
                           "gated_delta_net",
                           "gated_rms_norm"})
        EXPECT_TRUE(ops.count(op)) << op << " has no case";
}

// The CPU backend, and the CUDA one when a GPU is visible.
void every_backend(std::vector<std::unique_ptr<Backend>>& backends) {
    backends.push_back(make_cpu_backend());
    if (cuda_device_count() > 0) {
        auto g = make_cuda_backend();
        ASSERT_TRUE(g.ok()) << g.message();
        backends.push_back(std::move(g).value());
    }
}

// On every backend: a row's result is the same alone (T = 1: the GEMV kernel on CUDA) or in a batch of 40
// (cuBLASLt), up to fp32 summation order: both round x alike, so greedy output does not depend on the batch.
TEST(LinearTest, RowsDoNotDependOnTheTokenCount) {
    std::vector<std::unique_ptr<Backend>> backends;
    ASSERT_NO_FATAL_FAILURE(every_backend(backends));
    const OpCase c{"rows alone and in a batch", "linear", [](CaseRun& r) {
                       const int64_t N = 256, K = 512;
                       const Tensor x = r.act(Shape{40, K}), w = r.dense(Shape{N, K}, DType::BF16, 0.1f);
                       const Tensor alone = r.out(Shape{1, N}, "alone", kF32Tol);
                       const Tensor batch = r.out(Shape{40, N}, "batch", kF32Tol);
                       return [=, &r] {
                           call_linear(r.ops(), x.narrow(0, 7, 1), w, Tensor(), alone);
                           call_linear(r.ops(), x, w, Tensor(), batch);
                       };
                   }};
    for (auto& b : backends) {
        const auto run = run_case(c, *b, Layout::Contiguous, false, nullptr);
        ASSERT_NE(run, nullptr);
        const float e = rel_error(run->checked()[0].host_view, run->checked()[1].host_view.narrow(0, 7, 1));
        std::printf("  %-20s row alone vs in a batch: max rel err %.3g\n", b->name().c_str(), e);
        EXPECT_LE(e, kF32Tol) << b->name();
    }
}

// On every backend: moe_experts gives the same bits on a second run (no float atomics: each (token, slot) has its own
// row and a token's rows are summed in slot order), on the GEMV path (64 pairs) and the mma path (2,400 pairs), with
// one expert taking most of the tokens.
TEST(MoeExpertsTest, RunsAreBitIdentical) {
    std::vector<std::unique_ptr<Backend>> backends;
    ASSERT_NO_FATAL_FAILURE(every_backend(backends));
    for (const int64_t T : {8, 300}) {
        const OpCase c{"twice", "moe_experts", [T](CaseRun& r) {
                           const int64_t H = 128, I = 64, E = 32, k = 8;
                           const Tensor x = r.act(Shape{T, H});
                           auto& gu = r.keep(LinearWeight::dense(r.dense(Shape{E, 2 * I, H}, DType::BF16, 0.3f)));
                           auto& dn = r.keep(LinearWeight::dense(r.dense(Shape{E, H, I}, DType::BF16, 0.3f)));
                           HostTensor w = HostTensor::empty(DType::F32, Shape{T, k});
                           HostTensor ids = HostTensor::empty(DType::I32, Shape{T, k});
                           for (int64_t i = 0; i < T * k; ++i) {
                               ids.tensor.data_as<int32_t>()[i] = static_cast<int32_t>(i % k == 0 ? 0 : i % E);
                               w.tensor.data_as<float>()[i] = 0.1f + 0.01f * static_cast<float>(i % 7);
                           }
                           const Tensor dw = r.upload_dense(w), dids = r.upload_dense(ids);
                           const Tensor first = r.out(Shape{T, H}, "first", kF32Tol);
                           const Tensor second = r.out(Shape{T, H}, "second", kF32Tol);
                           return [=, &r, &gu, &dn] {
                               r.ops().moe_experts(x, dw, dids, MoeExpertWeights{gu, dn}, first);
                               r.ops().moe_experts(x, dw, dids, MoeExpertWeights{gu, dn}, second);
                           };
                       }};
        for (auto& b : backends) {
            const auto run = run_case(c, *b, Layout::Contiguous, false, nullptr);
            ASSERT_NE(run, nullptr);
            const float e = rel_error(run->checked()[0].host_view, run->checked()[1].host_view);
            std::printf("  %-20s T=%lld first vs second run: max rel err %.3g\n", b->name().c_str(), (long long)T, e);
            EXPECT_EQ(e, 0.0f) << b->name() << " T=" << T;
        }
    }
}

// On every backend: linear_silu_mul gives what linear then silu_mul give, to the bit (on CUDA one token takes the
// fused GEMV; the sums are the unfused GEMV's), with four warps per row, one warp per row, the element-wise GEMV and
// fp8 weights.
TEST(LinearSiluMulTest, FusedEqualsLinearThenSiluMul) {
    std::vector<std::unique_ptr<Backend>> backends;
    ASSERT_NO_FATAL_FAILURE(every_backend(backends));
    struct Shape3 {
        int64_t I, K;
        DType wt;
    };
    for (const Shape3 s : {Shape3{96, 256, DType::BF16}, Shape3{4500, 512, DType::BF16}, Shape3{40, 100, DType::F16},
                           Shape3{300, 256, DType::F8_E4M3}}) {
        const OpCase c{"fused and not", "linear_silu_mul", [s](CaseRun& r) {
                           const bool fp8 = s.wt == DType::F8_E4M3;
                           const Tensor x = r.act(Shape{1, s.K});
                           const Tensor data = r.dense(Shape{2 * s.I, s.K}, s.wt, fp8 ? 448.0f : 0.1f);
                           LinearWeight w = fp8 ? LinearWeight::fp8(data, Tensor(), ScaleLayout::kBlock, 128, 128)
                                                : LinearWeight::dense(data);
                           if (fp8) w.scales = r.dense(w.expected_scales_shape(), DType::F32, 1e-3f);
                           auto& kept = r.keep(std::move(w));
                           const Tensor gu = r.act(Shape{1, 2 * s.I});
                           const Tensor fused = r.out(Shape{1, s.I}, "fused", kF32Tol);
                           const Tensor apart = r.out(Shape{1, s.I}, "apart", kF32Tol);
                           return [=, &r, &kept] {
                               r.ops().linear_silu_mul(x, kept, gu, fused);
                               r.ops().linear(x, kept, gu);
                               r.ops().silu_mul(gu.narrow(1, 0, s.I), gu.narrow(1, s.I, s.I), apart);
                           };
                       }};
        for (auto& b : backends) {
            const auto run = run_case(c, *b, Layout::Contiguous, false, nullptr);
            ASSERT_NE(run, nullptr);
            const float e = rel_error(run->checked()[0].host_view, run->checked()[1].host_view);
            std::printf("  %-20s I=%lld K=%lld fused vs apart: max rel err %.3g\n", b->name().c_str(), (long long)s.I,
                        (long long)s.K, e);
            EXPECT_EQ(e, 0.0f) << b->name() << " I=" << s.I << " K=" << s.K;
        }
    }
}

// linear_gated_add gives what linear, sigmoid_mul and add give, to the bit (on CUDA, the default that
// PAGODA_SHARED_EXPERT_ADD=0 turns off and this test sets: one token takes the GEMV that adds sigmoid(gate) times its
// rows into out): Qwen3.5-35B-A3B's shared expert (512 features into 2,048), a small odd K (the element-wise GEMV),
// twice each.
TEST(SharedExpertAddTest, LinearGatedAddEqualsTheOpsApart) {
    std::vector<std::unique_ptr<Backend>> backends;
    ::setenv("PAGODA_SHARED_EXPERT_ADD", "1", 1);
    every_backend(backends);
    ::unsetenv("PAGODA_SHARED_EXPERT_ADD");
    for (const auto& [N, K] : {std::pair<int64_t, int64_t>{2048, 512}, {40, 100}}) {
        const OpCase c{"gated add and not", "linear_gated_add", [N, K](CaseRun& r) {
                           const Tensor x = r.act(Shape{1, K}), gate = r.act(Shape{1, 1}, 2.0f);
                           const Tensor start = r.act(Shape{1, N}, 2.0f), y = r.act(Shape{1, N});
                           auto& w = r.keep(LinearWeight::dense(r.dense(Shape{N, K}, DType::BF16, 0.1f)));
                           const Tensor fused = r.out(Shape{1, N}, "fused", kF32Tol);
                           const Tensor apart = r.out(Shape{1, N}, "apart", kF32Tol);
                           return [=, &r, &w] {
                               r.ops().copy(fused, start);
                               r.ops().copy(apart, start);
                               for (int step = 0; step < 2; ++step) {
                                   r.ops().linear_gated_add(x, w, y, gate, fused);
                                   r.ops().linear(x, w, y);
                                   r.ops().sigmoid_mul(y, gate);
                                   r.ops().add(apart, y);
                               }
                           };
                       }};
        for (auto& b : backends) {
            const auto run = run_case(c, *b, Layout::Contiguous, false, nullptr);
            ASSERT_NE(run, nullptr);
            const float e = rel_error(run->checked()[0].host_view, run->checked()[1].host_view);
            std::printf("  %-20s N=%lld K=%lld fused vs apart: %.3g\n", b->name().c_str(), (long long)N, (long long)K,
                        e);
            EXPECT_EQ(e, 0.0f) << b->name() << " N=" << N << " K=" << K;
        }
    }
}

// A token's experts give the same bits on CUDA alone (T = 1 and 3: the pair passes, which route nothing; fp8 and int4
// experts read as stored there) as in a batch of 32 (the grouped GEMV passes, which take up to 2 pairs an expert:
// 256 of the 128 experts' pairs; fp8 and int4 experts read as stored there too) and of 300 (the grouped mma passes,
// over fp8 and int4 experts dequantised to a bf16 stack first: up to fp32 summation order, which may round an h
// element to the neighbouring bf16). U8 below stands for int4
// experts (group 32, zero points, f16 rounding as GPTQ/AWQ).
TEST(MoeExpertsTest, TokensDoNotDependOnTheTokenCount) {
    std::vector<std::unique_ptr<Backend>> backends;
    ASSERT_NO_FATAL_FAILURE(every_backend(backends));
    const int64_t H = 256, I = 96, E = 128, k = 8;
    for (const DType wt : {DType::BF16, DType::F8_E4M3, DType::U8}) {
        const OpCase c{"alone and in batches", "moe_experts", [=](CaseRun& r) {
                           const int64_t T = 300;
                           const bool fp8 = wt == DType::F8_E4M3, int4 = wt == DType::U8;
                           const Tensor x = r.act(Shape{T, H});
                           const auto stack = [&r, fp8, int4, wt](const Shape& shape) {  // as op_cases' moe_experts
                               if (int4) {
                                   constexpr int64_t kGroup = 32;
                                   const Shape groups{shape[0], shape[1], shape[2] / kGroup};
                                   LinearWeight w = LinearWeight::int4(
                                       r.dense(Shape{shape[0], shape[1], shape[2] / 2}, DType::U8),
                                       r.dense(groups, DType::F32, 2e-2f), r.dense(groups, DType::F32, 8.0f), kGroup);
                                   w.dequant_dtype = DType::F16;
                                   return w;
                               }
                               const Tensor data = r.dense(shape, wt, fp8 ? 448.0f : 0.3f);
                               if (!fp8) return LinearWeight::dense(data);
                               LinearWeight w = LinearWeight::fp8(data, Tensor(), ScaleLayout::kBlock, 32, 32);
                               w.scales = r.dense(w.expected_scales_shape(), DType::F32, 1e-3f);
                               return w;
                           };
                           auto& gu = r.keep(stack(Shape{E, 2 * I, H}));
                           auto& dn = r.keep(stack(Shape{E, H, I}));
                           HostTensor w = HostTensor::empty(DType::F32, Shape{T, k});
                           HostTensor ids = HostTensor::empty(DType::I32, Shape{T, k});
                           for (int64_t i = 0; i < T * k; ++i) {
                               ids.tensor.data_as<int32_t>()[i] = static_cast<int32_t>((i * 37 + i / k) % E);
                               w.tensor.data_as<float>()[i] = 0.05f + 0.01f * static_cast<float>(i % 9);
                           }
                           const Tensor dw = r.upload_dense(w), dids = r.upload_dense(ids);
                           const auto rows = [](const Tensor& t, int64_t n) { return t.narrow(0, 0, n); };
                           const Tensor one = r.out(Shape{1, H}, "T=1", kF32Tol);
                           const Tensor three = r.out(Shape{3, H}, "T=3", kF32Tol);
                           const Tensor b32 = r.out(Shape{32, H}, "T=32", kF32Tol);
                           const Tensor b300 = r.out(Shape{T, H}, "T=300", kF32Tol);
                           return [=, &r, &gu, &dn] {
                               const MoeExpertWeights experts{gu, dn};
                               r.ops().moe_experts(rows(x, 1), rows(dw, 1), rows(dids, 1), experts, one);
                               r.ops().moe_experts(rows(x, 3), rows(dw, 3), rows(dids, 3), experts, three);
                               r.ops().moe_experts(rows(x, 32), rows(dw, 32), rows(dids, 32), experts, b32);
                               r.ops().moe_experts(x, dw, dids, experts, b300);
                           };
                       }};
        const char* label = wt == DType::BF16 ? "bf16" : wt == DType::F8_E4M3 ? "fp8" : "int4";
        for (auto& b : backends) {
            const auto run = run_case(c, *b, Layout::Contiguous, false, nullptr);
            ASSERT_NE(run, nullptr);
            const auto& got = run->checked();
            const float alone_vs_32 = rel_error(got[0].host_view, got[2].host_view.narrow(0, 0, 1));
            const float three_vs_32 = rel_error(got[1].host_view, got[2].host_view.narrow(0, 0, 3));
            const float b32_vs_300 = rel_error(got[2].host_view, got[3].host_view.narrow(0, 0, 32));
            std::printf("  %-20s %s: T=1 vs T=32 %.3g, T=3 vs T=32 %.3g, T=32 vs T=300 %.3g\n", b->name().c_str(),
                        label, alone_vs_32, three_vs_32, b32_vs_300);
            // The CPU groups a step's rows per expert into GEMMs whose blocking follows the row count: fp32 order.
            const float exact = b->device().kind == DeviceKind::Cuda ? 0.0f : kF32Tol;
            EXPECT_LE(alone_vs_32, exact) << b->name() << " " << label;
            EXPECT_LE(three_vs_32, exact) << b->name() << " " << label;
            EXPECT_LE(b32_vs_300, kBf16Tol) << b->name() << " " << label;
        }
    }
}

// A token's LoRA delta gives the same bits on CUDA whatever the step's size: the kernels' instances for tiles of 1, 2,
// 4, 8 and 16 tokens (LoraArgs::tile_tokens = min(T, 16)) sum each token in one order. Every token on one slot, so the
// tiles are full; a zero base weight, so the base GEMV (one token) and GEMM (more) add nothing and y is the delta
// alone; the first rows of each step are the 1,200-token step's (the cases share a name, hence their values).
void expect_lora_tokens_independent_of_the_step(Backend& b) {
    const auto step = [](int64_t T) {
        OpCase c = lora_linear(T, 2500, 16, {64, 32}, {.one_slot = true, .zero_base = true});
        c.name = "one adapter's tokens";
        return c;
    };
    const auto whole = run_case(step(1200), b, Layout::Contiguous, false, nullptr);  // 75 tiles: a prefill's size
    ASSERT_NE(whole, nullptr);
    for (const int64_t T : {1, 2, 3, 4, 5, 8, 16, 40}) {
        const auto run = run_case(step(T), b, Layout::Contiguous, false, nullptr);
        ASSERT_NE(run, nullptr);
        const float e = rel_error(run->checked()[0].host_view, whole->checked()[0].host_view.narrow(0, 0, T));
        std::printf("  %-20s T=%lld vs T=1200: max rel err %.3g\n", b.name().c_str(), (long long)T, e);
        // The CPU's blocking may follow the row count: fp32 summation order.
        EXPECT_LE(e, b.device().kind == DeviceKind::Cuda ? 0.0f : kF32Tol) << b.name() << " T=" << T;
    }
}

TEST(LoraTest, TokensDoNotDependOnTheStepSize) {
    std::vector<std::unique_ptr<Backend>> backends;
    ASSERT_NO_FATAL_FAILURE(every_backend(backends));
    for (auto& b : backends)
        expect_lora_tokens_independent_of_the_step(*b);
}

// Both families of CUDA LoRA kernels, chosen by PAGODA_LORA_MMA when a CUDA backend starts (1, the default: tensor
// cores, x and u rounded to bf16; 0: CUDA cores): every LoRA case of the table against the CPU within its tolerance,
// and a token's delta the same at every step size.
void expect_lora_kernels_match_the_cpu(const char* setting) {
    if (cuda_device_count() == 0)
        GTEST_SKIP() << (cuda_compiled() ? "no CUDA GPU visible" : "built without CUDA") << ": CUDA test skipped";
    const char* before = std::getenv("PAGODA_LORA_MMA");
    const std::string kept = before ? before : "";
    setenv("PAGODA_LORA_MMA", setting, 1);
    auto g = make_cuda_backend();
    if (before)
        setenv("PAGODA_LORA_MMA", kept.c_str(), 1);
    else
        unsetenv("PAGODA_LORA_MMA");
    ASSERT_TRUE(g.ok()) << g.message();
    Backend& gpu = **g;
    const auto cpu = make_cpu_backend();
    int cases = 0;
    for (const OpCase& c : op_cases()) {
        if (c.op != "linear" || c.name.find("lora") == std::string::npos) continue;
        ++cases;
        std::string why;
        const auto reference = run_case(c, *cpu, Layout::Contiguous, false, &why);
        ASSERT_NE(reference, nullptr) << why;
        const auto run = run_case(c, gpu, Layout::Contiguous, false, &why);
        ASSERT_NE(run, nullptr) << c.name << ": " << why;
        for (const Comparison& cmp : compare(*reference, *run)) {
            std::printf("  %-40s %-20s max rel err %.3g (tol %.0e)\n", c.name.c_str(), cmp.what.c_str(), cmp.error,
                        cmp.tol);
            EXPECT_TRUE(cmp.ok) << c.name << ": " << cmp.what << " max rel err " << cmp.error << " > " << cmp.tol;
        }
    }
    EXPECT_GE(cases, 9);
    expect_lora_tokens_independent_of_the_step(gpu);
}

TEST(LoraTest, TensorCoreKernelsMatchTheCpu) {
    expect_lora_kernels_match_the_cpu("1");
}

TEST(LoraTest, CudaCoreKernelsMatchTheCpu) {
    expect_lora_kernels_match_the_cpu("0");
}

// The bits of the default CUDA backend equal those of one made with `env`=0 on every case of `ops` whose name
// contains `name_part`, each run as a whole and as a step (each case's setup kernels run just before it); at least
// `fewest` cases.
void expect_switch_keeps_the_bits(const char* env, const std::set<std::string>& ops, const std::string& name_part,
                                  int fewest) {
    if (cuda_device_count() == 0)
        GTEST_SKIP() << (cuda_compiled() ? "no CUDA GPU visible" : "built without CUDA") << ": CUDA test skipped";
    auto switched_on = make_cuda_backend();  // the default
    ::setenv(env, "0", 1);
    auto switched_off = make_cuda_backend();
    ::unsetenv(env);
    ASSERT_TRUE(switched_off.ok() && switched_on.ok());
    int cases = 0;
    for (const OpCase& c : op_cases()) {
        if (!ops.count(c.op) || c.name.find(name_part) == std::string::npos) continue;
        for (const bool step : {false, true}) {
            const auto a = run_case(c, **switched_off, Layout::Contiguous, step, nullptr);
            const auto b = run_case(c, **switched_on, Layout::Contiguous, step, nullptr);
            ASSERT_TRUE(a && b) << c.name;
            for (size_t i = 0; i < a->checked().size(); ++i) {
                EXPECT_TRUE(same_bits(a->checked()[i].host_view, b->checked()[i].host_view))
                    << c.name << (step ? " (step)" : "") << ": " << a->checked()[i].what;
            }
        }
        ++cases;
    }
    EXPECT_GE(cases, fewest);
}

// Early loads (the default; PAGODA_EARLY_LOADS=0, read when the ops are made, turns them off): the RMSNorm,
// attention-prologue and decode-attention kernels that load what the kernel before them does not write before their
// programmatic-launch wait (and the MoE down pass that prefetches its experts' rows) give the bits of the kernels that
// load it all after the wait.
TEST(EarlyLoadsTest, EqualTheKernelsThatLoadAfterTheWait) {
    expect_switch_keeps_the_bits("PAGODA_EARLY_LOADS",
                                 {"rms_norm", "add_rms_norm", "head_rms_norm", "qk_norm_rope", "qk_norm_rope_write_kv",
                                  "paged_attention", "moe_experts"},
                                 "", 40);
}

// One token's int4 gate/up with SiLU·mul in the tensor-core GEMV (the default; PAGODA_INT4_SILU_MUL=0 turns it off)
// gives the bits of linear then silu_mul: the same sums, and the same silu.
TEST(Int4SiluMulTest, EqualsLinearThenSiluMul) {
    expect_switch_keeps_the_bits("PAGODA_INT4_SILU_MUL", {"linear_silu_mul"}, "int4", 4);
}

// CUDA runs every op of the case table: none of them is skipped there as not supported.
TEST(CudaSupportsTest, RunsEveryOpOfTheTable) {
    if (cuda_device_count() == 0)
        GTEST_SKIP() << (cuda_compiled() ? "no CUDA GPU visible" : "built without CUDA") << ": CUDA test skipped";
    auto g = make_cuda_backend();
    ASSERT_TRUE(g.ok()) << g.message();
    for (const OpCase& c : op_cases())
        EXPECT_TRUE((*g)->ops().supports(c.op)) << c.op;
}

// The kernels run as code for the GPU at hand: on Hopper its sm_90 code, whose launches overlap (programmatic dependent
// launch) and which may use clusters. Code for an older architecture (the compute_80 PTX the driver compiles with
// CUDA_FORCE_PTX_JIT=1, or a build of compute_80 PTX alone: the arch part of bench/gpu/run_cuda_bench.sh) has no
// griddepcontrol, so its launches must not overlap, whatever the GPU.
TEST(CudaDeviceTest, KernelsRunAsCodeForTheGpu) {
    if (cuda_device_count() == 0)
        GTEST_SKIP() << (cuda_compiled() ? "no CUDA GPU visible" : "built without CUDA") << ": CUDA test skipped";
    auto info = cuda_device_info(0);
    ASSERT_TRUE(info.ok()) << info.message();
    const int device = info->compute_major * 10 + info->compute_minor;
    const char* jit = std::getenv("CUDA_FORCE_PTX_JIT");
    const char* pdl = std::getenv("PAGODA_CUDA_PDL");
    const bool pdl_off = pdl != nullptr && std::string(pdl) == "0";
    EXPECT_GE(info->kernels_code, 80);
    EXPECT_LE(info->kernels_code, device);
    // PAGODA_CUDA_ARCHS: the build's CMAKE_CUDA_ARCHITECTURES, comma-separated (tests/unit/ops/CMakeLists.txt).
    const bool hopper_code = std::string(PAGODA_CUDA_ARCHS).find("90") != std::string::npos;
    if (device >= 90 && hopper_code && (jit == nullptr || std::string(jit) != "1")) {
        EXPECT_GE(info->kernels_code, 90);
    }
    EXPECT_EQ(info->overlapped_launches, info->kernels_code >= 90 && !pdl_off);
}

}  // namespace
}  // namespace pagoda::op_harness
