// DType names, sizes and the f16/fp8 conversions.
#include "tensor/dtype.h"

#include <cmath>

namespace pagoda {

namespace {
struct DTypeInfo {
    DType dtype;
    std::string_view name;
    size_t size;
    bool is_float;
};
constexpr DTypeInfo kInfos[] = {
    {DType::F32, "F32", 4, true},         {DType::F16, "F16", 2, true},         {DType::BF16, "BF16", 2, true},
    {DType::F8_E4M3, "F8_E4M3", 1, true}, {DType::F8_E5M2, "F8_E5M2", 1, true}, {DType::F64, "F64", 8, true},
    {DType::I64, "I64", 8, false},        {DType::I32, "I32", 4, false},        {DType::I16, "I16", 2, false},
    {DType::I8, "I8", 1, false},          {DType::U8, "U8", 1, false},          {DType::Bool, "BOOL", 1, false},
};
const DTypeInfo& info(DType d) {
    return kInfos[static_cast<size_t>(d)];
}
}  // namespace

size_t dtype_size(DType dtype) {
    return info(dtype).size;
}
std::string_view dtype_name(DType dtype) {
    return info(dtype).name;
}
bool dtype_is_float(DType dtype) {
    return info(dtype).is_float;
}

std::optional<DType> dtype_from_name(std::string_view name) {
    for (const auto& i : kInfos)
        if (i.name == name) return i.dtype;
    return std::nullopt;
}

float f16_to_f32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t man = h & 0x3ffu;
    if (exp == 0) {
        // Zero or subnormal: man * 2^-24.
        const float v = std::ldexp(static_cast<float>(man), -24);
        return sign ? -v : v;
    }
    if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
    return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t f32_to_f16(float value) {
    const uint32_t u = std::bit_cast<uint32_t>(value);
    const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
    const uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
    if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: inf
    if (abs < 0x38800000u) {
        // Result is subnormal (or zero) in f16: value / 2^-24 rounded to nearest even.
        const float scaled = std::bit_cast<float>(abs) * 16777216.0f;  // exact: power of two
        const float r = std::nearbyint(scaled);                        // default rounding mode: ties to even
        return sign | static_cast<uint16_t>(r);
    }
    // Normal: drop 13 mantissa bits with round to nearest even, rebias exponent (127 -> 15).
    uint32_t m = abs + 0xfffu + ((abs >> 13) & 1u);
    m -= (112u << 23);
    return sign | static_cast<uint16_t>(m >> 13);
}

float f8e4m3_to_f32(uint8_t b) {
    const bool neg = b & 0x80u;
    const int exp = (b >> 3) & 0xf;
    const int man = b & 0x7;
    float v;
    if (exp == 0xf && man == 0x7) {
        v = std::nanf("");
    } else if (exp == 0) {
        v = std::ldexp(static_cast<float>(man), -9);  // man/8 * 2^-6
    } else {
        v = std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
    }
    return neg ? -v : v;
}

uint8_t f32_to_f8e4m3(float value) {
    const uint32_t u = std::bit_cast<uint32_t>(value);
    const auto sign = static_cast<uint8_t>((u >> 24) & 0x80u);
    const float a = std::fabs(value);
    if (std::isnan(a)) return sign | 0x7fu;
    if (a >= 448.0f) return sign | 0x7eu;
    if (a < 0x1p-6f) {
        // Subnormals are multiples of 2^-9: rounding a·2^9 to the nearest integer (even on ties) is exact; 8 is the
        // smallest normal, whose encoding is 8 as well.
        return sign | static_cast<uint8_t>(std::nearbyint(a * 0x1p9f));
    }
    // Normal: keep 3 of f32's 23 mantissa bits, rounding to nearest even (a carry moves into the exponent), then
    // rebias the exponent from 127 to 7. The largest result below 448 is 448's own code, so nothing overflows.
    uint32_t m = std::bit_cast<uint32_t>(a);
    m += 0x7ffffu + ((m >> 20) & 1u);
    const uint32_t bits = (m >> 20) - (120u << 3);
    return sign | static_cast<uint8_t>(bits);
}

float f8e5m2_to_f32(uint8_t b) {
    return f16_to_f32(static_cast<uint16_t>(b) << 8);
}

}  // namespace pagoda
