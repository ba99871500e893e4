// The int4/int8 GEMV's dequantisation of one packed 32-bit word, two weights at a time; host and device, so that a
// host test (tests/unit/cuda/int4_dequant_test.cu) can hold it to dequantize_int4 bit for bit.
#pragma once

#include <cstring>

#include "kernels/cuda/common.cuh"

namespace pagoda::kernels::cuda {

// The kPerWord weights of one 32-bit word, dequantised two at a time in f16x2 / bf16x2 arithmetic, exactly as
// dequantize_int4 does one at a time when the format rounds to F16 or BF16 (then its scales are values of that type,
// and its zero points whole numbers: what every loader writes). A value q becomes the f16 1024 + q by OR-ing it into
// 0x6400's mantissa (exact: q < 1024); subtracting 1024 + zero leaves q - zero exactly (a whole number below 1024 in
// magnitude); (q - zero) · scale needs at most 10 + 11 bits, so it is exact in fp32 and HMUL2's one rounding to f16
// (bf16) is the rounding dequantize_int4 applies to the fp32 product; then bf16 as there. Two values of a word share
// an f16x2: value j and value j + kPerWord/2 (the halves of a word shifted by j value widths): pair j of
// dequantize_word_pairs (what the tensor-core GEMV multiplies as they are), or out in value order (dequantize_word).
// (bf16 arithmetic may flush subnormal products, below 2^-126, where dequantize_int4 keeps them: scales that small
// do not occur.)
template <int kBits>
__host__ __device__ __forceinline__ void dequantize_word_pairs(uint32_t word, __half2 zero_plus_1024, __half2 scale_f16,
                                                               __nv_bfloat162 scale_bf16, bool bf16_scales,
                                                               __nv_bfloat162* pairs) {
    static_assert(kBits == 4 || kBits == 8);
    constexpr int kPerWord = 32 / kBits;
    constexpr uint32_t kMask = (1u << kBits) - 1;
    constexpr int kHalf = kPerWord / 2;
    constexpr uint32_t kPairMask = kMask | (kMask << 16);
    for (int j = 0; j < kHalf; ++j) {  // a constant trip count of 2 or 4: unrolled (no pragma: host code too)
        const uint32_t magic = ((word >> (kBits * j)) & kPairMask) | 0x64006400u;
        __half2 biased;  // 1024 + q in each half
        std::memcpy(&biased, &magic, sizeof biased);
        const __half2 q = __hsub2(biased, zero_plus_1024);  // q - zero, exact
        if (bf16_scales) {
            const __nv_bfloat162 qb = __float22bfloat162_rn(__half22float2(q));  // exact: |q - zero| < 256
            pairs[j] = __hmul2(qb, scale_bf16);
        } else {
            pairs[j] = __float22bfloat162_rn(__half22float2(__hmul2(q, scale_f16)));
        }
    }
}

// The same weights in value order, as floats.
template <int kBits>
__host__ __device__ __forceinline__ void dequantize_word(uint32_t word, __half2 zero_plus_1024, __half2 scale_f16,
                                                         __nv_bfloat162 scale_bf16, bool bf16_scales, float* out) {
    constexpr int kHalf = 16 / kBits;
    __nv_bfloat162 pairs[kHalf];
    dequantize_word_pairs<kBits>(word, zero_plus_1024, scale_f16, scale_bf16, bf16_scales, pairs);
    for (int j = 0; j < kHalf; ++j) {
        const float2 v = __bfloat1622float2(pairs[j]);
        out[j] = v.x, out[j + kHalf] = v.y;
    }
}

}  // namespace pagoda::kernels::cuda
