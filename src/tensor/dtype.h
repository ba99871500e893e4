// Element types of tensors and the scalar conversions every backend needs (bf16/f16/fp8 <-> f32).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace pagoda {

enum class DType : uint8_t {
    F32,
    F16,
    BF16,
    F8_E4M3,
    F8_E5M2,
    F64,
    I64,
    I32,
    I16,
    I8,
    U8,
    Bool,
};

// Bytes per element.
size_t dtype_size(DType dtype);
// Safetensors spelling: "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL".
std::string_view dtype_name(DType dtype);
// Inverse of dtype_name; nullopt for an unknown name.
std::optional<DType> dtype_from_name(std::string_view name);
bool dtype_is_float(DType dtype);

// bf16 is the top half of an IEEE f32; storage is the raw 16 bits.
inline float bf16_to_f32(uint16_t bits) {
    return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// Round to nearest even; NaN stays a (quiet) NaN.
inline uint16_t f32_to_bf16(float value) {
    uint32_t u = std::bit_cast<uint32_t>(value);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

// IEEE half precision (subnormals, inf and NaN handled); f32 -> f16 rounds to nearest even.
float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float value);

// f16_to_f32(f32_to_f16(value)) to the bit, inline and without leaving f32 where the result is zero or a normal f16
// (2^-14 <= |value| < 65520): the 13 low mantissa bits rounded off to nearest even. The CPU int4 kernels round every
// weight so (a weight whose code is its zero point is 0).
inline float round_to_f16(float value) {
    const uint32_t u = std::bit_cast<uint32_t>(value);
    const uint32_t abs = u & 0x7fffffffu;
    if (abs - 1u < 0x387fffffu || abs >= 0x477ff000u) return f16_to_f32(f32_to_f16(value));  // f16 subnormals, inf, NaN
    return std::bit_cast<float>((u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu);
}

// OCP FP8 E4M3 (the "fn" variant: no infinities, 0x7f/0xff are NaN) and E5M2.
float f8e4m3_to_f32(uint8_t bits);
float f8e5m2_to_f32(uint8_t bits);
// f32 -> E4M3 rounding to nearest even (subnormals included), saturating at ±448 (the largest finite value, as
// quantizers clamp before casting); NaN stays NaN.
uint8_t f32_to_f8e4m3(float value);

}  // namespace pagoda
