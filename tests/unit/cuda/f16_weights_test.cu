// The tensor-core GEMV's exact f16 weights (kernels/cuda/gemm/f16_weights.cuh) on the host: every e4m3 byte pair
// against the format's definition, and every 4-bit value minus every 4-bit zero point. On a GPU the op
// harness's fp8 and int4 cases run the kernel itself (PAGODA_GEMV_MMA_F16=1), whose sm_89+ conversion is the GPU's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "kernels/cuda/gemm/f16_weights.cuh"

namespace pagoda::kernels::cuda {
namespace {

// e4m3 by its definition: sign, 4 exponent bits of bias 7, 3 mantissa bits; exponent 0 subnormal.
float e4m3(uint32_t byte) {
    const int exponent = static_cast<int>((byte >> 3) & 15), mantissa = static_cast<int>(byte & 7);
    const float v = exponent == 0 ? std::ldexp(mantissa / 8.0f, -6) : std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
    return byte & 0x80 ? -v : v;
}

float2 halves(uint32_t pair) {
    __half2 h;
    std::memcpy(static_cast<void*>(&h), &pair, sizeof h);
    return __half22float2(h);
}

TEST(F16Weights, E4m3PairsAreTheBytesTimesTwoToTheMinus8) {
    int64_t bad = 0, compared = 0;
    for (uint32_t lo = 0; lo < 256; ++lo) {
        for (uint32_t hi = 0; hi < 256; ++hi) {
            // The pair's two bytes at both places of a word; the other two bytes must not leak in.
            const uint32_t words[2] = {lo | hi << 8 | 0xa5c30000u, 0x0000c3a5u | lo << 16 | hi << 24};
            const float2 got[2] = {halves(e4m3_pair_f16_scaled<0>(words[0])),
                                   halves(e4m3_pair_f16_scaled<1>(words[1]))};
            for (const float2& g : got) {
                const float values[2] = {g.x, g.y};
                const uint32_t bytes[2] = {lo, hi};
                for (int i = 0; i < 2; ++i) {
                    if ((bytes[i] & 0x7f) == 0x7f) continue;  // NaN: no checkpoint stores it (the header says)
                    const float want = e4m3(bytes[i]) * 0x1p-8f;
                    ++compared;
                    if (std::memcmp(&want, &values[i], sizeof want) != 0 && ++bad <= 5)
                        ADD_FAILURE() << "byte 0x" << std::hex << bytes[i] << std::dec << ": want " << want << ", got "
                                      << values[i];
                }
            }
        }
    }
    EXPECT_EQ(bad, 0);
    EXPECT_EQ(compared, 2 * 2 * 254 * 256);
}

TEST(F16Weights, Int4PairsAreTheValuesMinusTheZeroPoint) {
    std::mt19937 rng(7);
    int64_t bad = 0;
    for (int zero = 0; zero <= 16; ++zero) {
        for (int w = 0; w < 64; ++w) {
            const uint32_t word = w == 0 ? 0x76543210u : w == 1 ? 0xfedcba98u : static_cast<uint32_t>(rng());
            uint32_t pairs[4];
            int4_pairs_f16(word, int4_zero_f16(static_cast<float>(zero)), int4_zero64_f16(static_cast<float>(zero)),
                           pairs);
            for (int j = 0; j < 4; ++j) {
                const float2 got = halves(pairs[j]);
                const float want_lo = static_cast<float>((word >> (4 * j)) & 15u) - zero;
                const float want_hi = static_cast<float>((word >> (4 * (j + 4))) & 15u) - zero;
                if ((got.x != want_lo || got.y != want_hi) && ++bad <= 5)
                    ADD_FAILURE() << "word 0x" << std::hex << word << std::dec << ", zero " << zero << ", pair " << j
                                  << ": want (" << want_lo << ", " << want_hi << "), got (" << got.x << ", " << got.y
                                  << ")";
            }
        }
    }
    EXPECT_EQ(bad, 0);
}

}  // namespace
}  // namespace pagoda::kernels::cuda
