// launch_linear_fp8 against a naive double-precision reference that dequantises each weight on its own
// (f8e4m3_to_f32(q) · scale of its block): block grids with ragged last blocks, per-channel and per-tensor scales,
// the GEMV and GEMM paths, several dequantisation chunks, strided operands, bias. And the dequantisation itself,
// exactly (one f32 product per weight, as transformers computes it). And the dynamic rounding of activations to fp8
// (W8A8), against values worked out here.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"

namespace pagoda::kernels::cpu {
namespace {

// Scales of N x K weights in blocks of br x bc (per tensor: br = N, bc = K; per channel: br = 1, bc = K).
struct Grid {
    int64_t br, bc;
};

struct Fp8Weight {
    std::vector<uint8_t> q;
    std::vector<float> scales;
    Fp8Scales view;
    float at(int64_t n, int64_t k, int64_t K) const {
        return f8e4m3_to_f32(q[n * K + k]) * scales[(n / view.block_rows) * view.stride + k / view.block_cols];
    }
};

Fp8Weight random_weight(int64_t N, int64_t K, Grid g, std::mt19937& rng) {
    Fp8Weight w;
    std::uniform_int_distribution<int> byte(0, 255);
    w.q.resize(N * K);
    for (auto& b : w.q) {
        do
            b = static_cast<uint8_t>(byte(rng));
        while ((b & 0x7f) == 0x7f);  // NaN
    }
    const int64_t rows = (N + g.br - 1) / g.br, cols = (K + g.bc - 1) / g.bc;
    std::uniform_real_distribution<float> scale(1e-3f, 2e-2f);
    w.scales.resize(rows * cols);
    for (auto& s : w.scales)
        s = scale(rng);
    w.view = {w.scales.data(), g.br, g.bc, cols};
    return w;
}

void run_case(int64_t T, int64_t N, int64_t K, Grid g, bool bias, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    const int64_t xs = K + 3, ys = N + 5;  // padded row strides
    std::vector<float> x(T * xs), y(T * ys, 123.0f);
    std::vector<uint16_t> b(N);  // a bf16 bias, as the checkpoints store it
    for (auto& v : x)
        v = dist(rng);
    for (auto& v : b)
        v = f32_to_bf16(dist(rng));
    const Fp8Weight w = random_weight(N, K, g, rng);
    LinearFp8Args a;
    a.x = x.data(), a.x_stride = xs;
    a.w = w.q.data(), a.w_stride = K, a.scales = w.view;
    a.bias = bias ? b.data() : nullptr, a.bias_dtype = DType::BF16;
    a.y = y.data(), a.y_stride = ys;
    a.T = T, a.N = N, a.K = K;
    launch_linear_fp8(a);
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t n = 0; n < N; ++n) {
            double ref = bias ? bf16_to_f32(b[n]) : 0.0, mag = std::abs(ref);
            for (int64_t k = 0; k < K; ++k) {
                const double p = static_cast<double>(x[t * xs + k]) * w.at(n, k, K);
                ref += p, mag += std::abs(p);
            }
            ASSERT_NEAR(y[t * ys + n], ref, 1e-5 * mag + 1e-6) << "T=" << T << " N=" << N << " K=" << K << " block "
                                                               << g.br << "x" << g.bc << " t=" << t << " n=" << n;
        }
        for (int64_t n = N; n < ys; ++n)
            ASSERT_EQ(y[t * ys + n], 123.0f) << "wrote past N";
    }
}

TEST(LinearFp8, MatchesNaiveReferenceForEveryScaleLayout) {
    std::mt19937 rng(11);
    struct Case {
        int64_t T, N, K;
    };
    const Case cases[] = {{1, 1, 1}, {1, 130, 257}, {3, 64, 128}, {4, 200, 300}, {5, 33, 17}, {37, 130, 257}};
    for (const Case& c : cases) {
        for (const Grid g : {Grid{128, 128}, Grid{32, 16}, Grid{1, c.K}, Grid{c.N, c.K}}) {
            run_case(c.T, c.N, c.K, g, false, rng);
            run_case(c.T, c.N, c.K, g, true, rng);
        }
    }
}

// 8 MiB of f32 rows per chunk: 600 rows of K = 4096 take two chunks (the second ragged), at T = 1 and above.
TEST(LinearFp8, SeveralDequantisationChunks) {
    std::mt19937 rng(12);
    run_case(1, 600, 4096, Grid{128, 128}, true, rng);
    run_case(6, 600, 4096, Grid{1, 4096}, false, rng);
}

TEST(DequantizeFp8, IsOneF32ProductPerWeight) {
    std::mt19937 rng(13);
    const int64_t N = 77, K = 300, n0 = 5, n1 = 70, os = K + 2;
    const Fp8Weight w = random_weight(N, K, Grid{32, 128}, rng);
    std::vector<float> out((n1 - n0) * os, -7.0f);
    DequantizeFp8Args a;
    a.w = w.q.data(), a.w_stride = K, a.scales = w.view, a.n0 = n0, a.n1 = n1, a.K = K;
    a.out = out.data(), a.out_stride = os;
    launch_dequantize_fp8(a);
    for (int64_t n = n0; n < n1; ++n) {
        for (int64_t k = 0; k < K; ++k)
            ASSERT_EQ(out[(n - n0) * os + k], w.at(n, k, K)) << "n=" << n << " k=" << k;
        for (int64_t k = K; k < os; ++k)
            ASSERT_EQ(out[(n - n0) * os + k], -7.0f) << "wrote past K";
    }
}

// Each group's scale is its amax / 448 and every value is rounded to e4m3 with it: the largest value of a group maps
// to ±448 exactly, an exactly representable multiple stays, halfway values round to even, and groups do not share
// scales (a ragged last group included). Per token (group <= 0): one scale for the whole row.
TEST(QuantizeFp8Activations, RoundsEachGroupWithItsOwnScale) {
    // Row 0, group 0 (4 inputs): amax 448 -> scale 1: 448 and 17 (between 16 and 18: ties to even 16) and 0.3
    // (subnormal-free: e4m3 near 0.3 is 0.3125 = 5 / 16) and -1.
    // Row 0, group 1 (4 inputs): amax 2 -> scale 2 / 448; 2 maps to 448 exactly, 1 to 224.
    // Row 0, group 2 (ragged: 1 input): 5 alone -> 448 at scale 5 / 448.
    const std::vector<float> x = {448.0f, 17.0f, 0.3f, -1.0f, 2.0f, 1.0f, -2.0f, 0.0f, 5.0f};
    std::vector<float> out(9, -7.0f);
    launch_quantize_fp8_activations({x.data(), 9, out.data(), 1, 9, 4});
    const float s1 = 2.0f / 448.0f;
    const std::vector<float> want = {
        448.0f, 16.0f, 0.3125f, -1.0f, 448.0f * s1, 224.0f * s1, -448.0f * s1, 0.0f, 448.0f * (5.0f / 448.0f)};
    for (size_t i = 0; i < x.size(); ++i)
        EXPECT_EQ(out[i], want[i]) << i;
    // The whole row as one group: scale 448 / 448 = 1 again, and 5 stays, 2 stays, 17 -> 16.
    launch_quantize_fp8_activations({x.data(), 9, out.data(), 1, 9, 0});
    EXPECT_EQ(out[1], 16.0f);
    EXPECT_EQ(out[4], 2.0f);
    EXPECT_EQ(out[8], 5.0f);
    // An all-zero group keeps its zeros (the 1e-12 floor of the scale).
    const std::vector<float> zeros = {0.0f, 0.0f};
    std::vector<float> zout(2, -7.0f);
    launch_quantize_fp8_activations({zeros.data(), 2, zout.data(), 1, 2, 2});
    EXPECT_EQ(zout[0], 0.0f);
    EXPECT_EQ(zout[1], 0.0f);
}

// Rows are independent and strided input is read as such.
TEST(QuantizeFp8Activations, RowsAreIndependent) {
    std::mt19937 rng(14);
    std::normal_distribution<float> d(0.0f, 3.0f);
    const int64_t T = 5, K = 300, stride = 310;
    std::vector<float> x(T * stride);
    for (float& v : x)
        v = d(rng);
    std::vector<float> all(T * K), one(K);
    launch_quantize_fp8_activations({x.data(), stride, all.data(), T, K, 128});
    for (int64_t t = 0; t < T; ++t) {
        launch_quantize_fp8_activations({x.data() + t * stride, stride, one.data(), 1, K, 128});
        for (int64_t k = 0; k < K; ++k)
            ASSERT_EQ(all[t * K + k], one[k]) << "t=" << t << " k=" << k;
        for (int64_t k = 0; k < K; ++k)  // within half an e4m3 step (2^-4 relative) of the input, or the group's floor
            ASSERT_LE(std::fabs(one[k] - x[t * stride + k]), std::fabs(x[t * stride + k]) / 16 + 1e-2f) << k;
    }
}

}  // namespace
}  // namespace pagoda::kernels::cpu
