// The int4/int8 GEMV's dequantisation of one packed 32-bit word, two weights at a time; host and device, so that a
// host test (tests/unit/cuda/int4_dequant_test.cu) can hold it to dequantize_int4 bit for bit.
#pragma once

#include <cstring>
#include <type_traits>

#include "kernels/cuda/common.cuh"

namespace pagoda::kernels::cuda {

// One group's scale and zero point in the packed forms dequantize_word_pairs takes (kBf16: the format's scales are
// bf16, else f16): made once a 16-byte load (four words), not once a word.
template <int kBits, bool kBf16>
struct PackedGroup {
    static_assert(kBits == 4 || kBits == 8);
    // 4-bit bf16 formats stay in bf16 (below): the bf16 128 + zero (exact for 4-bit zero points, 0 .. 16); the others
    // take f16 1024 + zero (exact: a whole zero point below 1024).
    static constexpr bool kAllBf16 = kBf16 && kBits == 4;
    using Zero = std::conditional_t<kAllBf16, __nv_bfloat162, __half2>;
    using Scale = std::conditional_t<kBf16, __nv_bfloat162, __half2>;  // exact for the scales of the format's dtype
    Zero zero;
    Scale scale;
    __host__ __device__ __forceinline__ PackedGroup(float scale_value, float zero_value) {
        if constexpr (kAllBf16)
            zero = __float2bfloat162_rn(128.0f + zero_value);
        else
            zero = __float2half2_rn(1024.0f + zero_value);
        if constexpr (kBf16)
            scale = __float2bfloat162_rn(scale_value);
        else
            scale = __float2half2_rn(scale_value);
    }
};

// The kPerWord weights of one 32-bit word, dequantised two at a time in f16x2 / bf16x2 arithmetic, exactly as
// dequantize_int4 does one at a time when the format rounds to F16 or BF16 (then its scales are values of that type,
// and its zero points whole numbers: what every loader writes). Two values of a word share a pair: value j and value
// j + kPerWord/2 (the halves of a word shifted by j value widths): pair j of dequantize_word_pairs (what the
// tensor-core GEMV multiplies as they are), or out in value order (dequantize_word).
//
// F16 formats: a value q becomes the f16 1024 + q by OR-ing it into 0x6400's mantissa (exact: q < 1024); subtracting
// 1024 + zero leaves q - zero exactly (a whole number below 1024 in magnitude); (q - zero) · scale needs at most 10 +
// 11 bits, so it is exact in fp32 and HMUL2's one rounding to f16 is the rounding dequantize_int4 applies to the fp32
// product; then bf16 as there (two conversions to f32 and one to a bf16 pair).
//
// BF16 formats, 4 bits: the same in bf16 from the start, with no conversion: q OR-ed into 0x4300's mantissa is the
// bf16 128 + q (exact: q < 128, bf16's spacing at 128 is 1), minus 128 + zero is q - zero exactly, and one bf16 HMUL2
// rounds the exact product as dequantize_int4 does: four instructions a pair where the f16 route takes seven. 8 bits
// (q up to 255 does not fit beside 128) take the f16 route to q - zero, converted to bf16 (exact: below 256), then the
// bf16 HMUL2.
//
// The _rn forms keep the compiler from contracting a subtract and a multiply into one fused operation (which would
// round once where dequantize_int4 rounds twice). (bf16 arithmetic may flush subnormal products, below 2^-126, where
// dequantize_int4 keeps them: scales that small do not occur.)
template <int kBits, bool kBf16>
__host__ __device__ __forceinline__ void dequantize_word_pairs(uint32_t word, const PackedGroup<kBits, kBf16>& g,
                                                               __nv_bfloat162* pairs) {
    constexpr int kPerWord = 32 / kBits;
    constexpr uint32_t kMask = (1u << kBits) - 1;
    constexpr int kHalf = kPerWord / 2;
    constexpr uint32_t kPairMask = kMask | (kMask << 16);
    for (int j = 0; j < kHalf; ++j) {  // a constant trip count of 2 or 4: unrolled (no pragma: host code too)
        const uint32_t values = (word >> (kBits * j)) & kPairMask;
        if constexpr (PackedGroup<kBits, kBf16>::kAllBf16) {
            const uint32_t magic = values | 0x43004300u;
            __nv_bfloat162 biased;  // 128 + q in each half
            std::memcpy(&biased, &magic, sizeof biased);
            pairs[j] = __hmul2_rn(__hsub2_rn(biased, g.zero), g.scale);
        } else {
            const uint32_t magic = values | 0x64006400u;
            __half2 biased;  // 1024 + q in each half
            std::memcpy(&biased, &magic, sizeof biased);
            const __half2 q = __hsub2_rn(biased, g.zero);  // q - zero, exact
            if constexpr (kBf16)
                pairs[j] = __hmul2_rn(__float22bfloat162_rn(__half22float2(q)), g.scale);  // exact: |q - zero| < 256
            else
                pairs[j] = __float22bfloat162_rn(__half22float2(__hmul2_rn(q, g.scale)));
        }
    }
}

// The same weights in value order, as floats.
template <int kBits, bool kBf16>
__host__ __device__ __forceinline__ void dequantize_word(uint32_t word, const PackedGroup<kBits, kBf16>& g,
                                                         float* out) {
    constexpr int kHalf = 16 / kBits;
    __nv_bfloat162 pairs[kHalf];
    dequantize_word_pairs<kBits, kBf16>(word, g, pairs);
    for (int j = 0; j < kHalf; ++j) {
        const float2 v = __bfloat1622float2(pairs[j]);
        out[j] = v.x, out[j + kHalf] = v.y;
    }
}

}  // namespace pagoda::kernels::cuda
