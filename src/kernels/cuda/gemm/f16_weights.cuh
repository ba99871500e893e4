// Quantized weights as exact f16 values, two at a time, for the tensor-core GEMV's f16 products
// (gemv_mma.cu, PAGODA_GEMV_MMA_F16): the scale is left out here and applied to each chunk's f32 sums instead, so a
// weight costs one to three instructions a pair where rounding bf16(q · s) costs four to nine. Host and device, so that
// a host test (tests/unit/cuda/f16_weights_test.cu) holds them to the formats' definitions for every value.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cuda/common.cuh"

namespace pagoda::kernels::cuda {

// Bytes 2p and 2p + 1 of w (e4m3 values q) as the f16 pair (q0 · 2^-8, q1 · 2^-8), byte 2p in the low half; exact
// for every byte but the NaNs (0x7f, 0xff: 480 · 2^-8 here, NaN from the GPU's conversion below; quantizers saturate
// at 448). The byte's sign goes to bit 15 and its exponent and mantissa to bits 7-13: the f16 exponent field then
// holds e4m3's, so the value is q's scaled by 2^(7 - 15), e4m3 subnormals (exponent 0) becoming f16 subnormals of the
// same mantissa.
template <int kPair>
__host__ __device__ __forceinline__ uint32_t e4m3_pair_f16_scaled(uint32_t w) {
    static_assert(kPair == 0 || kPair == 1);
    const uint32_t lo = (w >> (16 * kPair)) & 0xffu, hi = (w >> (16 * kPair + 8)) & 0xffu;
    const uint32_t spread = lo | (hi << 16);  // one byte at the bottom of each half
    return ((spread & 0x00800080u) << 8) | ((spread & 0x007f007fu) << 7);
}

// The same pair as exact f16 values q (no 2^-8) where the GPU converts e4m3 itself (sm_89 on), else as above:
// kE4m3PairUnscale is what multiplies the products back (1 or 2^8).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
inline constexpr float kE4m3PairUnscale = 1.0f;
// The word's halves are split in PTX, not shifted in C++: the conversion then reads the upper half in place (its
// SASS operand's .H1), where the shift cost an instruction a pair (32 of the fp8 GEMV loop's 431 for two chunks).
template <int kPair>
__device__ __forceinline__ uint32_t e4m3_pair_f16(uint32_t w) {
    static_assert(kPair == 0 || kPair == 1);
    uint32_t out;
    if constexpr (kPair == 0)
        asm("{.reg .b16 lo, hi;\n mov.b32 {lo, hi}, %1;\n cvt.rn.f16x2.e4m3x2 %0, lo;}" : "=r"(out) : "r"(w));
    else
        asm("{.reg .b16 lo, hi;\n mov.b32 {lo, hi}, %1;\n cvt.rn.f16x2.e4m3x2 %0, hi;}" : "=r"(out) : "r"(w));
    return out;
}
#else
inline constexpr float kE4m3PairUnscale = 0x1p8f;
template <int kPair>
__host__ __device__ __forceinline__ uint32_t e4m3_pair_f16(uint32_t w) {
    return e4m3_pair_f16_scaled<kPair>(w);
}
#endif

// The f16 pair 1024 + zero in both halves: what int4_pairs_f16 subtracts from a value in bits 0-3 (a whole zero point
// below 1024: exact).
__host__ __device__ __forceinline__ __half2 int4_zero_f16(float zero) {
    return __float2half2_rn(1024.0f + zero);
}

// The f16 pair 64 + zero in both halves: what int4_pairs_f16 subtracts from a value in bits 4-7 after scaling it by
// 1/16 (a whole zero point below 960: exact).
__host__ __device__ __forceinline__ __half2 int4_zero64_f16(float zero) {
    return __float2half2_rn(64.0f + zero);
}

// (a & mask) | bits in one instruction on the GPU (LOP3 takes one immediate, so the compiler splits the expression in
// two; ptxas keeps the second constant in a register).
template <uint32_t kMask, uint32_t kBits>
__host__ __device__ __forceinline__ uint32_t and_or(uint32_t a) {
#if defined(__CUDA_ARCH__)
    uint32_t d;
    asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(d) : "r"(a), "n"(kMask), "n"(kBits));  // 0xea: (a & b) | c
    return d;
#else
    return (a & kMask) | kBits;
#endif
}

// The eight 4-bit values of a word minus the group's zero point, as four exact f16 pairs: pair j holds values j (low
// half) and j + 4, the pairing of dequantize_word_pairs (int4_dequant.cuh). Pairs 0 and 2 take the values in bits 0-3
// of each half (of the word, then of the word shifted by 8): OR-ed into 0x6400's mantissa a value q is the f16
// 1024 + q, and minus 1024 + zero it is q - zero, a whole number below 1024 in magnitude, exactly. Pairs 1 and 3 take
// them where they are, in bits 4-7: 0x6400 OR 16 q is the f16 1024 + 16 q, and one fused multiply-add by 1/16 minus
// 64 + zero gives q - zero, rounded once from the exact value, so exactly. Nine instructions a word (a shift, four
// LOP3, two subtractions, two multiply-adds) where shifting every value down took fifteen.
__host__ __device__ __forceinline__ void int4_pairs_f16(uint32_t word, __half2 zero1024, __half2 zero64,
                                                        uint32_t (&pairs)[4]) {
    [[maybe_unused]] const __half2 sixteenth = __float2half2_rn(0.0625f);
    for (int j = 0; j < 4; ++j) {  // a constant trip count: unrolled (no pragma: host code too)
        const uint32_t w = j < 2 ? word : word >> 8;
        const uint32_t magic = j % 2 == 0 ? and_or<0x000f000fu, 0x64006400u>(w) : and_or<0x00f000f0u, 0x64006400u>(w);
        __half2 biased;
        std::memcpy(static_cast<void*>(&biased), &magic, sizeof biased);  // (__half2 is not trivially copyable)
        __half2 q;
        if (j % 2 == 0) {
            q = __hsub2_rn(biased, zero1024);
        } else {
#if defined(__CUDA_ARCH__)
            q = __hfma2(biased, sixteenth, __hneg2(zero64));
#else  // the host has no HFMA2: the same exact value in f32 (16 q + 1024 and 64 + zero are exact there too)
            const float2 b = __half22float2(biased), z = __half22float2(zero64);
            q = __floats2half2_rn(b.x * 0.0625f - z.x, b.y * 0.0625f - z.y);
#endif
        }
        std::memcpy(&pairs[j], &q, sizeof q);
    }
}

}  // namespace pagoda::kernels::cuda
