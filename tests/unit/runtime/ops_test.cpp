// CpuOps elementwise/norm/linear/rope/MoE/logits ops against naive references written here (double precision).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/backend.h"
#include "runtime/ops.h"
#include "test_util.h"

namespace pagoda {
namespace {

using testing::expect_close;
using testing::random_f32;
using testing::random_weight;

class OpsTest : public ::testing::Test {
  protected:
    std::unique_ptr<Backend> backend_ = make_cpu_backend();
    Ops& ops_ = backend_->ops();
    std::mt19937 rng_{1234};
};

TEST_F(OpsTest, EmbeddingGathersRowsAsF32) {
    for (DType d : {DType::BF16, DType::F16, DType::F32}) {
        auto table = random_weight(d, {50, 24}, rng_);
        std::vector<int32_t> ids = {3, 0, 49, 3, 17};
        HostTensor out = HostTensor::empty(DType::F32, {5, 24});
        ops_.embedding(table.stored.tensor, ids, out.tensor);
        for (size_t t = 0; t < ids.size(); ++t)
            for (int h = 0; h < 24; ++h)
                ASSERT_EQ(out.tensor.data_as<float>()[t * 24 + h], table.values[ids[t] * 24 + h]);
    }
}

std::vector<double> rms_ref(const float* x, const std::vector<float>& w, int64_t D, double eps, bool zc) {
    double ss = 0;
    for (int64_t d = 0; d < D; ++d)
        ss += double(x[d]) * x[d];
    const double s = 1.0 / std::sqrt(ss / D + eps);
    std::vector<double> y(D);
    for (int64_t d = 0; d < D; ++d)
        y[d] = x[d] * s * (zc ? 1.0 + w[d] : w[d]);
    return y;
}

TEST_F(OpsTest, RmsNormPlainAndZeroCentred) {
    for (int64_t D : {1, 7, 64, 1000}) {
        for (NormKind kind : {NormKind::Plain, NormKind::ZeroCentred}) {
            const int64_t T = 5;
            auto x = random_f32({T, D}, rng_, -3, 3);
            auto w = random_weight(DType::BF16, {D}, rng_, -0.5f, 1.5f);
            HostTensor out = HostTensor::empty(DType::F32, {T, D});
            ops_.rms_norm(x.tensor, w.stored.tensor, 1e-6f, kind, out.tensor);
            for (int64_t t = 0; t < T; ++t) {
                auto ref = rms_ref(x.tensor.data_as<float>() + t * D, w.values, D, 1e-6, kind == NormKind::ZeroCentred);
                expect_close(out.tensor.data_as<float>() + t * D, ref, 2e-6, 0, "rms_norm");
            }
        }
    }
}

TEST_F(OpsTest, AddRmsNormUpdatesResidualThenNormalises) {
    const int64_t T = 3, D = 96;
    auto res = random_f32({T, D}, rng_);
    auto x = random_f32({T, D}, rng_);
    auto w = random_weight(DType::F32, {D}, rng_);
    std::vector<float> sum(T * D);
    for (int64_t i = 0; i < T * D; ++i)
        sum[i] = res.tensor.data_as<float>()[i] + x.tensor.data_as<float>()[i];
    HostTensor out = HostTensor::empty(DType::F32, {T, D});
    ops_.add_rms_norm(res.tensor, x.tensor, w.stored.tensor, 1e-5f, NormKind::ZeroCentred, out.tensor);
    for (int64_t i = 0; i < T * D; ++i)
        ASSERT_EQ(res.tensor.data_as<float>()[i], sum[i]);
    for (int64_t t = 0; t < T; ++t) {
        auto ref = rms_ref(sum.data() + t * D, w.values, D, 1e-5, true);
        expect_close(out.tensor.data_as<float>() + t * D, ref, 2e-6, 0, "add_rms_norm");
    }
}

TEST_F(OpsTest, HeadRmsNormOnInterleavedQueryHalves) {
    // Qwen3-Next q_proj output [T, H, 2D]: normalise only the first D of each head, in place.
    const int64_t T = 4, H = 3, D = 16;
    auto qg = random_f32({T, H * 2 * D}, rng_, -2, 2);
    std::vector<float> before = testing::to_vector(qg.tensor);
    auto w = random_weight(DType::BF16, {D}, rng_);
    Tensor q = qg.tensor.unflatten(1, H, 2 * D).narrow(2, 0, D);
    ops_.head_rms_norm(q, w.stored.tensor, 1e-6f, NormKind::Plain);
    const float* got = qg.tensor.data_as<float>();
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
            const int64_t off = t * H * 2 * D + h * 2 * D;
            auto ref = rms_ref(before.data() + off, w.values, D, 1e-6, false);
            expect_close(got + off, ref, 2e-6, 0, "head_rms_norm");
            for (int64_t d = D; d < 2 * D; ++d)
                ASSERT_EQ(got[off + d], before[off + d]) << "gate half touched";
        }
}

TEST_F(OpsTest, LinearWithBiasOnColumnSlices) {
    const int64_t T = 6, K = 40, N = 24;
    auto big = random_f32({T, K + 10}, rng_);
    Tensor x = big.tensor.narrow(1, 5, K);
    auto w = random_weight(DType::BF16, {N, K}, rng_);
    auto b = random_weight(DType::BF16, {N}, rng_);
    HostTensor yb = HostTensor::zeros(DType::F32, {T, 2 * N});
    Tensor y = yb.tensor.narrow(1, N, N);
    ops_.linear(x, LinearWeight::dense(w.stored.tensor, b.stored.tensor), y);
    for (int64_t t = 0; t < T; ++t) {
        std::vector<double> ref(N);
        for (int64_t n = 0; n < N; ++n) {
            ref[n] = b.values[n];
            for (int64_t k = 0; k < K; ++k)
                ref[n] += double(x.data_as<float>()[t * x.stride(0) + k]) * w.values[n * K + k];
        }
        expect_close(y.data_as<float>() + t * y.stride(0), ref, 1e-5, 1e-6, "linear");
        for (int64_t n = 0; n < N; ++n)
            ASSERT_EQ(yb.tensor.data_as<float>()[t * 2 * N + n], 0.0f);
    }
}

TEST_F(OpsTest, RopeMatchesDirectFormulaFullAndPartial) {
    struct C {
        int64_t H, D;
        int rot;
        float theta;
    };
    for (C c : {C{2, 64, 64, 1e6f}, C{3, 32, 8, 1e7f}, C{2, 256, 64, 1e7f}, C{1, 128, 128, 10000.0f}}) {
        const int64_t T = 7;
        auto x = random_f32({T, c.H, c.D}, rng_);
        std::vector<float> before = testing::to_vector(x.tensor);
        std::vector<int32_t> pos = {0, 1, 2, 17, 100, 255, 511};
        ops_.rope(x.tensor, pos, default_rope_table(c.theta, c.rot));
        const int half = c.rot / 2;
        for (int64_t t = 0; t < T; ++t)
            for (int64_t h = 0; h < c.H; ++h) {
                const float* in = before.data() + (t * c.H + h) * c.D;
                std::vector<double> ref(in, in + c.D);
                for (int j = 0; j < half; ++j) {
                    const double ang = pos[t] * std::pow(double(c.theta), -2.0 * j / c.rot);
                    ref[j] = in[j] * std::cos(ang) - in[j + half] * std::sin(ang);
                    ref[j + half] = in[j + half] * std::cos(ang) + in[j] * std::sin(ang);
                }
                // fp32 angles (as transformers forms them) differ from exact ones by ~pos * 2^-24.
                expect_close(x.tensor.data_as<float>() + (t * c.H + h) * c.D, ref, 0, 1e-4, "rope");
            }
    }
}

// Any table, as YaRN makes them: the rotation follows the table's frequencies and cos/sin carry its attention factor
// (q and k each get it once, so the rotary part of a dot product scales by its square); the other dims pass through.
TEST_F(OpsTest, RopeAppliesTheTablesFrequenciesAndAttentionFactor) {
    const int64_t T = 5, H = 3, D = 48;
    RopeTable table;
    table.inv_freq = {1.0f, 0.37f, 0.05f, 1e-3f, 2e-5f, 0.0f, 0.5f, 0.25f};  // rot 16 of 48
    table.attention_factor = 1.25f;
    auto x = random_f32({T, H, D}, rng_);
    std::vector<float> before = testing::to_vector(x.tensor);
    std::vector<int32_t> pos = {0, 3, 40, 999, 70000};
    ops_.rope(x.tensor, pos, table);
    const int half = table.rotary_dim() / 2;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
            const float* in = before.data() + (t * H + h) * D;
            std::vector<double> ref(in, in + D);
            for (int j = 0; j < half; ++j) {
                const double ang = double(float(pos[t]) * table.inv_freq[j]), f = table.attention_factor;
                ref[j] = f * (in[j] * std::cos(ang) - in[j + half] * std::sin(ang));
                ref[j + half] = f * (in[j + half] * std::cos(ang) + in[j] * std::sin(ang));
            }
            expect_close(x.tensor.data_as<float>() + (t * H + h) * D, ref, 1e-5, 1e-5, "rope table");
        }
}

TEST_F(OpsTest, ElementwiseOps) {
    const int64_t T = 5, N = 37;
    auto gu = random_f32({T, 2 * N}, rng_, -4, 4);
    Tensor gate = gu.tensor.narrow(1, 0, N), up = gu.tensor.narrow(1, N, N);
    HostTensor out = HostTensor::empty(DType::F32, {T, N});
    ops_.silu_mul(gate, up, out.tensor);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < N; ++n) {
            const double g = gate.data_as<float>()[t * 2 * N + n], u = up.data_as<float>()[t * 2 * N + n];
            ASSERT_NEAR(out.tensor.data_as<float>()[t * N + n], g / (1 + std::exp(-g)) * u, 1e-5);
        }

    auto x = random_f32({T, N}, rng_);
    auto g = random_f32({T, N}, rng_, -5, 5);
    auto g1 = random_f32({T, 1}, rng_, -5, 5);
    std::vector<float> x0 = testing::to_vector(x.tensor);
    ops_.sigmoid_mul(x.tensor, g.tensor);
    for (int64_t i = 0; i < T * N; ++i)
        ASSERT_NEAR(x.tensor.data_as<float>()[i], x0[i] / (1 + std::exp(-double(g.tensor.data_as<float>()[i]))), 1e-6);
    x0 = testing::to_vector(x.tensor);
    ops_.sigmoid_mul(x.tensor, g1.tensor);
    for (int64_t i = 0; i < T * N; ++i)
        ASSERT_NEAR(x.tensor.data_as<float>()[i], x0[i] / (1 + std::exp(-double(g1.tensor.data_as<float>()[i / N]))),
                    1e-6);
    x0 = testing::to_vector(x.tensor);
    ops_.add(x.tensor, out.tensor);
    for (int64_t i = 0; i < T * N; ++i)
        ASSERT_EQ(x.tensor.data_as<float>()[i], x0[i] + out.tensor.data_as<float>()[i]);
}

TEST_F(OpsTest, CopyConvertsDtypes) {
    auto src = random_f32({3, 10}, rng_);
    HostTensor bf = HostTensor::empty(DType::BF16, {3, 10});
    HostTensor back = HostTensor::empty(DType::F32, {3, 10});
    ops_.copy(bf.tensor, src.tensor);
    ops_.copy(back.tensor, bf.tensor);
    for (int i = 0; i < 30; ++i) {
        ASSERT_EQ(bf.tensor.data_as<uint16_t>()[i], f32_to_bf16(src.tensor.data_as<float>()[i]));
        ASSERT_EQ(back.tensor.data_as<float>()[i], bf16_to_f32(f32_to_bf16(src.tensor.data_as<float>()[i])));
    }
}

TEST_F(OpsTest, MoeTopkSoftmax) {
    const int64_t T = 9, E = 12, k = 3;
    for (bool norm : {false, true}) {
        auto logits = random_f32({T, E}, rng_, -3, 3);
        HostTensor w = HostTensor::empty(DType::F32, {T, k});
        HostTensor ids = HostTensor::empty(DType::I32, {T, k});
        ops_.moe_topk_softmax(logits.tensor, norm, w.tensor, ids.tensor);
        for (int64_t t = 0; t < T; ++t) {
            const float* l = logits.tensor.data_as<float>() + t * E;
            std::vector<double> p(E);
            double z = 0;
            for (int64_t e = 0; e < E; ++e)
                z += std::exp(double(l[e]));
            for (int64_t e = 0; e < E; ++e)
                p[e] = std::exp(double(l[e])) / z;
            std::vector<int> order(E);
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
            double s = 0;
            for (int64_t j = 0; j < k; ++j)
                s += p[order[j]];
            for (int64_t j = 0; j < k; ++j) {
                ASSERT_EQ(ids.tensor.data_as<int32_t>()[t * k + j], order[j]);
                ASSERT_NEAR(w.tensor.data_as<float>()[t * k + j], norm ? p[order[j]] / s : p[order[j]], 1e-6);
            }
        }
    }
}

TEST_F(OpsTest, MoeExpertsOnStackedWeightsMatchPerTokenLoop) {
    const int64_t T = 7, H = 32, I = 20, E = 5, k = 2;
    auto x = random_f32({T, H}, rng_);
    // Stacked as in Qwen3.5-MoE: gate_up [E, 2I, H] (gate rows first), down [E, H, I].
    auto gate_up = random_weight(DType::BF16, {E, 2 * I, H}, rng_, -0.3f, 0.3f);
    auto down = random_weight(DType::BF16, {E, H, I}, rng_, -0.3f, 0.3f);
    const LinearWeight gu = LinearWeight::dense(gate_up.stored.tensor);
    const LinearWeight dn = LinearWeight::dense(down.stored.tensor);
    HostTensor w = HostTensor::empty(DType::F32, {T, k});
    HostTensor ids = HostTensor::empty(DType::I32, {T, k});
    auto logits = random_f32({T, E}, rng_, -2, 2);
    ops_.moe_topk_softmax(logits.tensor, true, w.tensor, ids.tensor);
    HostTensor out = HostTensor::empty(DType::F32, {T, H});
    ops_.moe_experts(x.tensor, w.tensor, ids.tensor, MoeExpertWeights{gu, dn}, out.tensor);
    for (int64_t t = 0; t < T; ++t) {
        std::vector<double> ref(H, 0.0);
        const float* xt = x.tensor.data_as<float>() + t * H;
        for (int64_t j = 0; j < k; ++j) {
            const int e = ids.tensor.data_as<int32_t>()[t * k + j];
            const double wt = w.tensor.data_as<float>()[t * k + j];
            std::vector<double> h(I);
            for (int64_t i = 0; i < I; ++i) {
                double gs = 0, us = 0;
                for (int64_t c = 0; c < H; ++c) {
                    gs += xt[c] * gate_up.values[(e * 2 * I + i) * H + c];
                    us += xt[c] * gate_up.values[(e * 2 * I + I + i) * H + c];
                }
                h[i] = gs / (1 + std::exp(-gs)) * us;
            }
            for (int64_t c = 0; c < H; ++c) {
                double s = 0;
                for (int64_t i = 0; i < I; ++i)
                    s += h[i] * down.values[(e * H + c) * I + i];
                ref[c] += wt * s;
            }
        }
        expect_close(out.tensor.data_as<float>() + t * H, ref, 1e-5, 1e-7, "moe_experts");
    }
}

// A random int4 expert stack [E, N, K] in LinearWeight's layout (random nibbles, group scales, zero points or the
// symmetric 8), and the same weights dequantised here, independently of the kernels: (q - zero) · scale rounded to
// `round_to`, as a dense F32 stack.
struct Int4Stack {
    HostTensor data, scales, zeros, dense;
    LinearWeight weight;
};
Int4Stack random_int4_stack(int64_t E, int64_t N, int64_t K, int64_t group, bool zero_points, DType round_to,
                            std::mt19937& rng) {
    Int4Stack s;
    const int64_t G = K / group;
    s.data = HostTensor::empty(DType::U8, {E, N, K / 2});
    s.scales = testing::random_f32({E, N, G}, rng, 0.002f, 0.03f);
    if (zero_points) s.zeros = HostTensor::empty(DType::F32, {E, N, G});
    s.dense = HostTensor::empty(DType::F32, {E, N, K});
    std::uniform_int_distribution<int> nibble(0, 15);
    auto* q = s.data.tensor.data_as<uint8_t>();
    for (int64_t i = 0; i < s.data.tensor.numel(); ++i)
        q[i] = static_cast<uint8_t>(nibble(rng) | nibble(rng) << 4);
    for (int64_t i = 0; zero_points && i < s.zeros.tensor.numel(); ++i)
        s.zeros.tensor.data_as<float>()[i] = static_cast<float>(nibble(rng));
    for (int64_t r = 0; r < E * N; ++r) {
        for (int64_t k = 0; k < K; ++k) {
            const int code = k % 2 == 0 ? q[r * K / 2 + k / 2] & 0xF : q[r * K / 2 + k / 2] >> 4;
            const int64_t g = r * G + k / group;
            const float zero = zero_points ? s.zeros.tensor.data_as<float>()[g] : 8.0f;
            float v = (static_cast<float>(code) - zero) * s.scales.tensor.data_as<float>()[g];
            if (round_to == DType::F16) v = f16_to_f32(f32_to_f16(v));
            if (round_to == DType::BF16) v = bf16_to_f32(f32_to_bf16(v));
            s.dense.tensor.data_as<float>()[r * K + k] = v;
        }
    }
    s.weight = LinearWeight::int4(s.data.tensor, s.scales.tensor, zero_points ? s.zeros.tensor : Tensor(), group);
    s.weight.dequant_dtype = round_to;
    return s;
}

// A GPTQ act-order weight: the layout's input j is x's column input_perm[j], so y = W · x[:, perm] (int4 and the
// dequantisation as the experts' reference above; x a column slice, so its row stride is not K). Checked for 4 bits;
// 8 bits shares the gather.
TEST_F(OpsTest, LinearOnActOrderInt4GathersItsInputByThePermutation) {
    const int64_t T = 3, N = 24, K = 64, group = 16;
    const Int4Stack s = random_int4_stack(1, N, K, group, true, DType::F16, rng_);
    LinearWeight w =
        LinearWeight::int4(s.data.tensor.select(0), s.scales.tensor.select(0), s.zeros.tensor.select(0), group);
    w.dequant_dtype = DType::F16;
    HostTensor perm = HostTensor::empty(DType::I32, {K});
    int32_t* p = perm.tensor.data_as<int32_t>();
    std::iota(p, p + K, 0);
    std::shuffle(p, p + K, rng_);
    w.input_perm = perm.tensor;
    auto big = random_f32({T, K + 6}, rng_);
    const Tensor x = big.tensor.narrow(1, 2, K);
    HostTensor y = HostTensor::zeros(DType::F32, {T, N});
    ops_.linear(x, w, y.tensor);
    const float* dense = s.dense.tensor.data_as<float>();
    for (int64_t t = 0; t < T; ++t) {
        std::vector<double> ref(N, 0.0);
        for (int64_t n = 0; n < N; ++n)
            for (int64_t j = 0; j < K; ++j)
                ref[n] += double(dense[n * K + j]) * x.data_as<float>()[t * x.stride(0) + p[j]];
        expect_close(y.tensor.data_as<float>() + t * N, ref, 1e-5, 1e-6, "act-order linear");
    }
    EXPECT_EQ(w.describe(), "int4 (group 16, zero points, act-order)");
}

// The CPU reference for int4 experts (Qwen3-MoE GPTQ/AWQ/W4A16 checkpoints): the routed experts dequantised, then the
// f32 path; equal to the dense path over the stacks dequantised independently, for decode and prefill token counts,
// groups smaller than and equal to the expert width, zero points or not, each rounding.
TEST_F(OpsTest, MoeExpertsOnInt4StacksMatchTheirDequantisedStacks) {
    struct Case {
        int64_t T, group;
        bool zeros;
        DType round_to;
    };
    const int64_t H = 64, I = 32, E = 6, k = 2;
    for (const Case c : {Case{1, 32, true, DType::F16}, Case{3, 16, false, DType::BF16}, Case{40, 32, true, DType::F32},
                         Case{9, 8, false, DType::F16}}) {
        const Int4Stack gate_up = random_int4_stack(E, 2 * I, H, c.group, c.zeros, c.round_to, rng_);
        const Int4Stack down = random_int4_stack(E, H, I, c.group, c.zeros, c.round_to, rng_);
        auto x = random_f32({c.T, H}, rng_);
        HostTensor w = HostTensor::empty(DType::F32, {c.T, k});
        HostTensor ids = HostTensor::empty(DType::I32, {c.T, k});
        auto logits = random_f32({c.T, E}, rng_, -2, 2);
        ops_.moe_topk_softmax(logits.tensor, true, w.tensor, ids.tensor);
        HostTensor got = HostTensor::empty(DType::F32, {c.T, H}), want = HostTensor::empty(DType::F32, {c.T, H});
        ops_.moe_experts(x.tensor, w.tensor, ids.tensor, MoeExpertWeights{gate_up.weight, down.weight}, got.tensor);
        const LinearWeight gu = LinearWeight::dense(gate_up.dense.tensor), dn = LinearWeight::dense(down.dense.tensor);
        ops_.moe_experts(x.tensor, w.tensor, ids.tensor, MoeExpertWeights{gu, dn}, want.tensor);
        const std::vector<float> ref = testing::to_vector(want.tensor);
        expect_close(got.tensor.data_as<float>(), std::vector<double>(ref.begin(), ref.end()), 1e-5, 1e-7,
                     "moe_experts int4");
    }
}

TEST_F(OpsTest, GatherRowsAndArgmax) {
    auto x = random_f32({6, 300}, rng_);
    std::vector<int32_t> rows = {5, 0, 3};
    HostTensor sel = HostTensor::empty(DType::F32, {3, 300});
    ops_.gather_rows(x.tensor, rows, sel.tensor);
    for (int i = 0; i < 3; ++i)
        for (int c = 0; c < 300; ++c)
            ASSERT_EQ(sel.tensor.data_as<float>()[i * 300 + c], x.tensor.data_as<float>()[rows[i] * 300 + c]);
    std::vector<int32_t> am(3);
    ops_.argmax(sel.tensor, am);
    for (int i = 0; i < 3; ++i) {
        const float* r = sel.tensor.data_as<float>() + i * 300;
        EXPECT_EQ(am[i], std::max_element(r, r + 300) - r);
    }
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

// Shape mistakes are programmer errors: they abort with a message naming the op and the shapes.
TEST(OpsDeathTest, ShapeMismatchNamesOpAndShapes) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    auto backend = make_cpu_backend();
    HostTensor x = HostTensor::zeros(DType::F32, {2, 8});
    HostTensor w = HostTensor::zeros(DType::BF16, {4, 9});
    HostTensor y = HostTensor::zeros(DType::F32, {2, 4});
    EXPECT_DEATH(backend->ops().linear(x.tensor, LinearWeight::dense(w.tensor), y.tensor),
                 "linear: x f32\\[2, 8\\].*bf16\\[4, 9\\]");
    HostTensor xb = HostTensor::zeros(DType::BF16, {2, 8});
    HostTensor wn = HostTensor::zeros(DType::F32, {8});
    EXPECT_DEATH(backend->ops().rms_norm(xb.tensor, wn.tensor, 1e-6f, NormKind::Plain, xb.tensor),
                 "rms_norm: x must be F32");
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

TEST(LinearWeightTest, DenseFormatFollowsDtypeAndNamesItsInput) {
    HostTensor bf = HostTensor::zeros(DType::BF16, {4, 8});
    HostTensor f16 = HostTensor::zeros(DType::F16, {4, 8});
    HostTensor f32 = HostTensor::zeros(DType::F32, {4, 8});
    EXPECT_EQ(LinearWeight::dense(bf.tensor).format, WeightFormat::kBf16);
    EXPECT_EQ(LinearWeight::dense(bf.tensor).input_dtype(), DType::BF16);
    EXPECT_EQ(LinearWeight::dense(f16.tensor).input_dtype(), DType::F16);
    EXPECT_EQ(LinearWeight::dense(f32.tensor).input_dtype(), DType::F32);
    EXPECT_TRUE(LinearWeight::dense(f32.tensor).is_dense());
    EXPECT_EQ(LinearWeight::dense(bf.tensor).describe(), "bf16");
    EXPECT_EQ(LinearWeight::dense(bf.tensor).out_features(), 4);
    EXPECT_EQ(LinearWeight::dense(bf.tensor).in_features(), 8);
}

TEST(LinearWeightTest, Fp8ScaleGridsCoverEveryLayout) {
    HostTensor q = HostTensor::zeros(DType::F8_E4M3, {300, 200});
    HostTensor s = HostTensor::zeros(DType::F32, {3, 2});
    LinearWeight w = LinearWeight::fp8(q.tensor, s.tensor, ScaleLayout::kBlock, 128, 128);
    EXPECT_EQ(w.expected_scales_shape(), (Shape{3, 2}));  // ragged last blocks
    EXPECT_EQ(w.scale_blocks().rows, 128);
    EXPECT_EQ(w.scale_blocks().cols, 128);
    EXPECT_EQ(w.scale_blocks().stride, 2);
    w.scale_layout = ScaleLayout::kPerChannel;
    EXPECT_EQ(w.expected_scales_shape(), (Shape{300}));
    EXPECT_EQ(w.scale_blocks().rows, 1);
    EXPECT_EQ(w.scale_blocks().cols, 200);
    EXPECT_EQ(w.scale_blocks().stride, 1);
    w.scale_layout = ScaleLayout::kPerTensor;
    EXPECT_EQ(w.expected_scales_shape(), (Shape{1}));
    EXPECT_EQ(w.scale_blocks().stride, 0);
    EXPECT_EQ(w.input_dtype(), DType::BF16);
}

TEST(LinearWeightTest, QuantizedFormatsDescribeTheirVariant) {
    LinearWeight fp8;
    fp8.format = WeightFormat::kFp8E4M3;
    fp8.scale_layout = ScaleLayout::kBlock;
    fp8.block_rows = fp8.block_cols = 128;
    EXPECT_EQ(fp8.describe(), "fp8-e4m3 (128x128 block scales)");
    fp8.scale_layout = ScaleLayout::kPerChannel;
    EXPECT_EQ(fp8.describe(), "fp8-e4m3 (per-channel scales)");
    LinearWeight int4;
    int4.format = WeightFormat::kInt4;
    int4.scale_layout = ScaleLayout::kGroup;
    int4.group_size = 128;
    HostTensor packed = HostTensor::zeros(DType::U8, {4, 64});
    int4.data = packed.tensor;
    EXPECT_EQ(int4.in_features(), 128);  // two values per byte
    EXPECT_EQ(int4.describe(), "int4 (group 128, symmetric)");
    HostTensor zeros = HostTensor::zeros(DType::F16, {4, 1});
    int4.zeros = zeros.tensor;
    EXPECT_EQ(int4.describe(), "int4 (group 128, zero points)");
    EXPECT_FALSE(int4.is_dense());
}

// A quantized weight whose scales do not fit its layout is refused with the shape it needs, an int4 group size that
// does not divide K by name.
TEST(OpsDeathTest, LinearRefusesQuantizedWeightsThatBreakTheirLayout) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    auto backend = make_cpu_backend();
    HostTensor x = HostTensor::zeros(DType::F32, {2, 256});
    HostTensor y = HostTensor::zeros(DType::F32, {2, 128});
    HostTensor w8 = HostTensor::zeros(DType::F8_E4M3, {128, 256});
    HostTensor s8 = HostTensor::zeros(DType::F32, {2, 2});
    const LinearWeight fp8 = LinearWeight::fp8(w8.tensor, s8.tensor, ScaleLayout::kBlock, 128, 128);
    EXPECT_DEATH(backend->ops().linear(x.tensor, fp8, y.tensor),
                 "linear: scales of fp8-e4m3 \\(128x128 block scales\\) weight .* must be contiguous F32 \\[1, 2\\]");
    HostTensor w4 = HostTensor::zeros(DType::U8, {128, 128});
    HostTensor s4 = HostTensor::zeros(DType::F16, {128, 2});
    LinearWeight int4;
    int4.data = w4.tensor, int4.format = WeightFormat::kInt4, int4.scale_layout = ScaleLayout::kGroup;
    int4.group_size = 128, int4.scales = s4.tensor;
    EXPECT_DEATH(backend->ops().linear(x.tensor, int4, y.tensor),
                 "linear: scales of int4 \\(group 128, symmetric\\) weight .* must be contiguous F32 \\[128, 2\\]");
    HostTensor s4f = HostTensor::zeros(DType::F32, {128, 2});
    int4.scales = s4f.tensor, int4.group_size = 96;
    EXPECT_DEATH(backend->ops().linear(x.tensor, int4, y.tensor), "linear: int4 group size 96 does not divide K = 256");
}

}  // namespace
}  // namespace pagoda
