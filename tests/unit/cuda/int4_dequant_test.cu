// The int4/int8 GEMV's two-at-a-time dequantisation (kernels/cuda/gemm/int4_dequant.cuh) against dequantize_int4, the
// one definition every other CUDA path dequantises with, bit for bit, on the host (CUDA's host versions of the f16
// and bf16 operations round as the GPU's do). Every finite f16 and bf16 scale, with every 4-bit zero point and value
// (a spread of the 8-bit ones), 4 and 8 bits. On a GPU the op harness's int4/int8 cases run the kernel itself against
// the CPU backend.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/gemm/int4_dequant.cuh"

namespace pagoda::kernels::cuda {
namespace {

template <int kBits>
int64_t mismatches(ElemType round_to, int64_t& compared) {
    constexpr int kPerWord = 32 / kBits;
    constexpr uint32_t kMask = (1u << kBits) - 1;
    const bool bf16 = round_to == ElemType::BF16;
    std::mt19937 rng(kBits * 2 + bf16);
    int64_t bad = 0;
    for (uint32_t bits = 0; bits < 65536; ++bits) {
        const uint16_t b = static_cast<uint16_t>(bits);
        float scale;
        if (bf16) {
            __nv_bfloat16 h;
            std::memcpy(&h, &b, 2);
            scale = __bfloat162float(h);
        } else {
            __half h;
            std::memcpy(&h, &b, 2);
            scale = __half2float(h);
        }
        // Products below bf16's normal range may be flushed by bf16 arithmetic (int4_dequant.cuh says so).
        if (!std::isfinite(scale) || (bf16 && scale != 0.0f && std::fabs(scale) < 1e-30f)) continue;
        // Zero points as loaders write them: every whole number of the 4-bit range (0 .. 16) or a spread of the 8-bit
        // one, the symmetric zero among them; words holding every 4-bit value, and a random one.
        static const std::vector<float> zeros = [] {
            std::vector<float> z;
            if (kBits == 4)
                for (int v = 0; v <= 16; ++v)
                    z.push_back(static_cast<float>(v));
            else
                z = {0.0f, 1.0f, 2.0f, 127.0f, 128.0f, 129.0f, 254.0f, 255.0f, 256.0f};
            return z;
        }();
        for (const float zero : zeros) {
            const uint32_t words[3] = {kBits == 4 ? 0x76543210u : 0x7f800100u, kBits == 4 ? 0xfedcba98u : 0xff81fe80u,
                                       static_cast<uint32_t>(rng())};
            for (const uint32_t word : words) {
                float got[kPerWord];
                if (bf16)
                    dequantize_word<kBits>(word, PackedGroup<kBits, true>(scale, zero), got);
                else
                    dequantize_word<kBits>(word, PackedGroup<kBits, false>(scale, zero), got);
                for (int j = 0; j < kPerWord; ++j) {
                    const float want = dequantize_int4((word >> (kBits * j)) & kMask, scale, zero, round_to);
                    ++compared;
                    const bool same =
                        std::memcmp(&want, &got[j], sizeof want) == 0 || (std::isnan(want) && std::isnan(got[j]));
                    if (!same && ++bad <= 5)
                        ADD_FAILURE() << kBits << "-bit, scale " << scale << ", zero " << zero << ", value j " << j
                                      << ": want " << want << ", got " << got[j];
                }
            }
        }
    }
    return bad;
}

TEST(Int4Dequant, TwoAtATimeEqualsDequantizeInt4BitForBit) {
    int64_t compared = 0;
    EXPECT_EQ(mismatches<4>(ElemType::F16, compared), 0);
    EXPECT_EQ(mismatches<4>(ElemType::BF16, compared), 0);
    EXPECT_EQ(mismatches<8>(ElemType::F16, compared), 0);
    EXPECT_EQ(mismatches<8>(ElemType::BF16, compared), 0);
    EXPECT_GT(compared, 1000000);
}

}  // namespace
}  // namespace pagoda::kernels::cuda
