// launch_linear_int4 against a naive double-precision reference that dequantises each weight on its own, (q - zero)
// · scale of its group: 4-bit values (two a byte) and 8-bit ones (GPTQ int8: one a byte), group sizes from 2 to the
// whole row, zero points or the symmetric 8 (128), the GEMV and GEMM paths, several dequantisation chunks, strided
// operands, bias; and the dequantisation itself, exactly.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"

namespace pagoda::kernels::cpu {
namespace {

struct RandomInt4 {
    std::vector<uint8_t> bytes;  // [N, K/2] (4 bits), [N, K] (8 bits)
    std::vector<float> scales, zeros;
    Int4Weight view;
    int64_t K = 0;
    int bits = 4;
    float at(int64_t n, int64_t k) const {
        const int q = bits == 8 ? bytes[n * K + k] : (bytes[n * (K / 2) + k / 2] >> (4 * (k % 2))) & 0xF;
        const int64_t g = n * view.groups + k / view.group_size;
        const float symmetric = bits == 8 ? 128.0f : 8.0f;
        return (static_cast<float>(q) - (zeros.empty() ? symmetric : zeros[g])) * scales[g];
    }
};

RandomInt4 random_weight(int64_t N, int64_t K, int64_t group, bool zero_points, std::mt19937& rng, int bits = 4) {
    RandomInt4 w;
    w.K = K, w.bits = bits;
    std::uniform_int_distribution<int> byte(0, 255), zero(0, (1 << bits) - 1);
    std::uniform_real_distribution<float> scale(1e-3f, 2e-2f);
    w.bytes.resize(N * K * bits / 8);
    for (auto& b : w.bytes)
        b = static_cast<uint8_t>(byte(rng));
    w.scales.resize(N * (K / group));
    for (auto& s : w.scales)
        s = scale(rng);
    if (zero_points) {
        w.zeros.resize(w.scales.size());
        for (auto& z : w.zeros)
            z = static_cast<float>(zero(rng));
    }
    w.view = {w.bytes.data(), K * bits / 8, w.scales.data(), zero_points ? w.zeros.data() : nullptr,
              group,          K / group,    DType::F32,      bits};
    return w;
}

void run_case(int64_t T, int64_t N, int64_t K, int64_t group, bool zero_points, bool bias, std::mt19937& rng,
              int bits = 4) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    const int64_t xs = K + 3, ys = N + 5;  // padded row strides
    std::vector<float> x(T * xs), y(T * ys, 123.0f);
    std::vector<uint16_t> b(N);  // a bf16 bias, as qwen2's q/k/v
    for (auto& v : x)
        v = dist(rng);
    for (auto& v : b)
        v = f32_to_bf16(dist(rng));
    const RandomInt4 w = random_weight(N, K, group, zero_points, rng, bits);
    LinearInt4Args a;
    a.x = x.data(), a.x_stride = xs, a.w = w.view;
    a.bias = bias ? b.data() : nullptr, a.bias_dtype = DType::BF16;
    a.y = y.data(), a.y_stride = ys;
    a.T = T, a.N = N, a.K = K;
    launch_linear_int4(a);
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t n = 0; n < N; ++n) {
            double ref = bias ? bf16_to_f32(b[n]) : 0.0, mag = std::abs(ref);
            for (int64_t k = 0; k < K; ++k) {
                const double p = static_cast<double>(x[t * xs + k]) * w.at(n, k);
                ref += p, mag += std::abs(p);
            }
            ASSERT_NEAR(y[t * ys + n], ref, 1e-5 * mag + 1e-6) << bits << " bits, T=" << T << " N=" << N << " K=" << K
                                                               << " group " << group << " t=" << t << " n=" << n;
        }
        for (int64_t n = N; n < ys; ++n)
            ASSERT_EQ(y[t * ys + n], 123.0f) << "wrote past N";
    }
}

TEST(LinearInt4, MatchesNaiveReference) {
    std::mt19937 rng(21);
    struct Case {
        int64_t T, N, K, group;
    };
    const Case cases[] = {{1, 1, 2, 2},    {1, 72, 128, 32},    {3, 64, 128, 128}, {4, 200, 256, 64},
                          {5, 33, 96, 96}, {37, 130, 384, 128}, {2, 8, 6, 2}};
    for (const Case& c : cases) {
        for (bool zero_points : {false, true}) {
            for (int bits : {4, 8}) {
                run_case(c.T, c.N, c.K, c.group, zero_points, false, rng, bits);
                run_case(c.T, c.N, c.K, c.group, zero_points, true, rng, bits);
            }
        }
    }
}

// 8 MiB of f32 rows per chunk: 600 rows of K = 4096 take two chunks (the second ragged).
TEST(LinearInt4, SeveralDequantisationChunks) {
    std::mt19937 rng(22);
    run_case(1, 600, 4096, 128, true, true, rng);
    run_case(6, 600, 4096, 4096, false, false, rng);
    run_case(2, 600, 4096, 128, true, true, rng, 8);
}

TEST(DequantizeInt4, IsOneSubtractionAndOneProductPerWeight) {
    std::mt19937 rng(23);
    const int64_t N = 77, K = 320, n0 = 5, n1 = 70, os = K + 2;
    for (int bits : {4, 8}) {
        for (bool zero_points : {true, false}) {
            const RandomInt4 w = random_weight(N, K, 64, zero_points, rng, bits);
            std::vector<float> out((n1 - n0) * os, -7.0f);
            launch_dequantize_int4({w.view, n0, n1, K, out.data(), os});
            for (int64_t n = n0; n < n1; ++n) {
                for (int64_t k = 0; k < K; ++k)
                    ASSERT_EQ(out[(n - n0) * os + k], w.at(n, k)) << bits << " bits, n=" << n << " k=" << k;
                for (int64_t k = K; k < os; ++k)
                    ASSERT_EQ(out[(n - n0) * os + k], -7.0f) << "wrote past K";
            }
        }
    }
}

// Weights rounded to the format's f16 or bf16 (round_to): each exactly the rounding of (q - zero) · scale, f16
// subnormals and zeros included (scales down to 2^-20 put products below f16's 2^-14).
TEST(DequantizeInt4, RoundsEachProductToTheFormatsDtype) {
    std::mt19937 rng(24);
    const int64_t N = 40, K = 256;
    for (const DType round_to : {DType::F16, DType::BF16}) {
        for (int bits : {4, 8}) {
            RandomInt4 w = random_weight(N, K, 32, true, rng, bits);
            for (size_t i = 0; i < w.scales.size(); ++i)
                w.scales[i] = std::ldexp(w.scales[i], -static_cast<int>(i % 12));
            w.view.round_to = round_to;
            std::vector<float> out(N * K);
            launch_dequantize_int4({w.view, 0, N, K, out.data(), K});
            for (int64_t n = 0; n < N; ++n)
                for (int64_t k = 0; k < K; ++k) {
                    const float v = w.at(n, k);
                    const float want = round_to == DType::F16 ? f16_to_f32(f32_to_f16(v)) : bf16_to_f32(f32_to_bf16(v));
                    ASSERT_EQ(std::bit_cast<uint32_t>(out[n * K + k]), std::bit_cast<uint32_t>(want))
                        << bits << " bits, n=" << n << " k=" << k;
                }
        }
    }
}

// GPTQ 8-bit by hand: one row of 4 weights in one group, the values worked out here. (200 - 128) · 0.5 = 36,
// (0 - 128) · 0.5 = -64, (128 - 128) · 0.5 = 0, (255 - 128) · 0.5 = 63.5 symmetric; with zero point 100:
// 50, -50, 14, 77.5.
TEST(DequantizeInt8, HandWorkedRow) {
    const std::vector<uint8_t> bytes = {200, 0, 128, 255};
    const float scale = 0.5f, zero = 100.0f;
    for (bool zero_points : {false, true}) {
        Int4Weight w{bytes.data(), 4, &scale, zero_points ? &zero : nullptr, 4, 1, DType::F16, 8};
        float out[4];
        launch_dequantize_int4({w, 0, 1, 4, out, 4});
        const std::vector<float> want = zero_points ? std::vector<float>{50.0f, -50.0f, 14.0f, 77.5f}
                                                    : std::vector<float>{36.0f, -64.0f, 0.0f, 63.5f};
        for (int k = 0; k < 4; ++k)
            EXPECT_EQ(out[k], want[k]) << "k=" << k << (zero_points ? " (zero points)" : " (symmetric)");
    }
}

}  // namespace
}  // namespace pagoda::kernels::cpu
