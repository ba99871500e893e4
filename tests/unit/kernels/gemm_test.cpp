// launch_linear against a naive double-precision reference: every path (GEMV for <= 4 rows, tiled GEMM above),
// every weight dtype, odd sizes that exercise the vector tails, strided operands, bias.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"

namespace pagoda::kernels::cpu {
namespace {

struct Case {
    int64_t T, N, K;
};

void run_case(DType wdtype, Case c, bool bias, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    const int64_t xs = c.K + 3, ys = c.N + 5;  // padded row strides
    std::vector<float> x(c.T * xs), y(c.T * ys, 123.0f), wref(c.N * c.K), b(c.N);
    for (auto& v : x)
        v = dist(rng);
    for (auto& v : b)
        v = dist(rng);
    std::vector<uint16_t> w16(c.N * c.K);
    std::vector<float> w32(c.N * c.K);
    for (int64_t i = 0; i < c.N * c.K; ++i) {
        const float v = dist(rng);
        if (wdtype == DType::BF16) {
            w16[i] = f32_to_bf16(v);
            wref[i] = bf16_to_f32(w16[i]);
        } else if (wdtype == DType::F16) {
            w16[i] = f32_to_f16(v);
            wref[i] = f16_to_f32(w16[i]);
        } else {
            w32[i] = wref[i] = v;
        }
    }
    LinearArgs a;
    a.x = x.data(), a.x_stride = xs;
    a.w = wdtype == DType::F32 ? static_cast<const void*>(w32.data()) : w16.data();
    a.w_dtype = wdtype, a.w_stride = c.K;
    a.bias = bias ? b.data() : nullptr, a.bias_dtype = DType::F32;
    a.y = y.data(), a.y_stride = ys;
    a.T = c.T, a.N = c.N, a.K = c.K;
    launch_linear(a);
    for (int64_t t = 0; t < c.T; ++t) {
        for (int64_t n = 0; n < c.N; ++n) {
            double ref = bias ? b[n] : 0.0, mag = std::abs(ref);
            for (int64_t k = 0; k < c.K; ++k) {
                ref += static_cast<double>(x[t * xs + k]) * wref[n * c.K + k];
                mag += std::abs(static_cast<double>(x[t * xs + k]) * wref[n * c.K + k]);
            }
            ASSERT_NEAR(y[t * ys + n], ref, 1e-5 * mag + 1e-6)
                << dtype_name(wdtype) << " T=" << c.T << " N=" << c.N << " K=" << c.K << " t=" << t << " n=" << n;
        }
        for (int64_t n = c.N; n < ys; ++n)
            ASSERT_EQ(y[t * ys + n], 123.0f) << "wrote past N";
    }
}

TEST(Linear, MatchesNaiveReferenceAllPathsAndDtypes) {
    std::mt19937 rng(7);
    RecordProperty("isa", active_isa());
    const Case cases[] = {{1, 1, 1},    {1, 7, 15},     {1, 33, 32},     {1, 130, 257}, {2, 9, 100},
                          {3, 64, 64},  {4, 5, 600},    {5, 3, 17},      {8, 33, 256},  {17, 130, 300},
                          {64, 8, 513}, {33, 67, 1024}, {1, 1024, 2048}, {100, 40, 96}};
    for (DType d : {DType::BF16, DType::F16, DType::F32})
        for (const Case& c : cases) {
            run_case(d, c, false, rng);
            run_case(d, c, true, rng);
        }
}

}  // namespace
}  // namespace pagoda::kernels::cpu

namespace pagoda::kernels::cpu {
namespace {

// Every finite f16 and bf16 bit pattern (subnormals included) converts exactly: with a one-hot x, y is the weight.
TEST(Linear, HalfWeightsConvertExactlyForEveryFinitePattern) {
    const int64_t N = 0x7c00, K = 40;  // all finite magnitudes; both signs over k
    std::vector<uint16_t> w(N * K);
    for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k)
            w[n * K + k] = static_cast<uint16_t>(((n + k * 977) % N) | (k % 2 ? 0x8000 : 0));
    for (DType d : {DType::F16, DType::BF16}) {
        for (int64_t T : {1, 6}) {
            for (int64_t k0 : {0, 7, 33, 39}) {
                std::vector<float> x(T * K, 0.0f), y(T * N, -1.0f);
                for (int64_t t = 0; t < T; ++t)
                    x[t * K + k0] = 1.0f;
                LinearArgs a;
                a.x = x.data(), a.x_stride = K, a.w = w.data(), a.w_dtype = d, a.w_stride = K;
                a.y = y.data(), a.y_stride = N, a.T = T, a.N = N, a.K = K;
                launch_linear(a);
                for (int64_t t = 0; t < T; ++t)
                    for (int64_t n = 0; n < N; ++n) {
                        const uint16_t bits = w[n * K + k0];
                        const float ref = d == DType::F16 ? f16_to_f32(bits) : bf16_to_f32(bits);
                        ASSERT_EQ(y[t * N + n], ref) << dtype_name(d) << " bits=" << bits << " T=" << T;
                    }
            }
        }
    }
}

}  // namespace
}  // namespace pagoda::kernels::cpu
