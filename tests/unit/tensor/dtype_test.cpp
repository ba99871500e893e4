// DType table and the bf16/f16/fp8 conversions, checked against formulas evaluated in double.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tensor/dtype.h"

namespace pagoda {
namespace {

// f16 value from its fields, straight from the IEEE definition.
double f16_reference(uint16_t h) {
    const int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
    double v;
    if (exp == 0)
        v = std::ldexp(man, -24);
    else if (exp == 31)
        v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
    else
        v = std::ldexp(1.0 + man / 1024.0, exp - 15);
    return sign ? -v : v;
}

TEST(DType, NamesAndSizesRoundTrip) {
    for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F8_E4M3, DType::F8_E5M2, DType::F64, DType::I64,
                    DType::I32, DType::I16, DType::I8, DType::U8, DType::Bool}) {
        auto back = dtype_from_name(dtype_name(d));
        ASSERT_TRUE(back.has_value()) << dtype_name(d);
        EXPECT_EQ(*back, d);
    }
    EXPECT_EQ(dtype_size(DType::BF16), 2u);
    EXPECT_EQ(dtype_size(DType::F32), 4u);
    EXPECT_EQ(dtype_size(DType::I64), 8u);
    EXPECT_EQ(dtype_size(DType::F8_E4M3), 1u);
    EXPECT_FALSE(dtype_from_name("F12").has_value());
}

TEST(DType, F16ToF32MatchesDefinitionForAllValues) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const double ref = f16_reference(static_cast<uint16_t>(h));
        const float got = f16_to_f32(static_cast<uint16_t>(h));
        if (std::isnan(ref)) {
            EXPECT_TRUE(std::isnan(got)) << h;
        } else {
            ASSERT_EQ(static_cast<double>(got), ref) << h;
        }
    }
}

TEST(DType, F32ToF16RoundsToNearestEven) {
    // Every finite f16 maps back to itself; midpoints between neighbours go to the even one.
    for (uint32_t h = 0; h < 0x7c00; ++h) {
        const double v = f16_reference(static_cast<uint16_t>(h));
        ASSERT_EQ(f32_to_f16(static_cast<float>(v)), h);
        ASSERT_EQ(f32_to_f16(static_cast<float>(-v)), h | 0x8000u);
        if (h + 1 < 0x7c00) {
            const double mid = (v + f16_reference(static_cast<uint16_t>(h + 1))) / 2;
            const uint16_t expect = (h % 2 == 0) ? h : h + 1;
            ASSERT_EQ(f32_to_f16(static_cast<float>(mid)), expect) << h;
            // Just above the midpoint rounds up.
            ASSERT_EQ(f32_to_f16(std::nextafter(static_cast<float>(mid), 1e9f)), h + 1) << h;
        }
    }
    EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);
    EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
    EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);
    EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::nanf("")))));
}

// round_to_f16 against the two conversions it stands for, bit for bit: every 61st f32 bit pattern (70 million, both
// signs, all exponents: NaNs, infinities, subnormals), and each boundary and rounding tie of its fast range.
TEST(DType, RoundToF16IsTheRoundTrip) {
    const auto expect_same = [](uint32_t u) {
        const float v = std::bit_cast<float>(u);
        const uint32_t want = std::bit_cast<uint32_t>(f16_to_f32(f32_to_f16(v)));
        const uint32_t got = std::bit_cast<uint32_t>(round_to_f16(v));
        if (want != got) ADD_FAILURE() << std::hex << "bits 0x" << u << ": 0x" << got << ", not 0x" << want;
        return want == got;
    };
    for (uint64_t u = 0; u <= 0xffffffffu; u += 61)
        if (!expect_same(static_cast<uint32_t>(u))) return;
    for (uint32_t edge : {0x38800000u, 0x387fffffu, 0x477ff000u, 0x477fefffu, 0x477fe000u, 0x3f800fffu, 0x3f801000u,
                          0x3f801001u, 0x3f802fffu, 0x3f803000u, 0x3f803001u, 0x7f7fffffu, 0x00000001u, 0x00000000u})
        for (uint32_t sign : {0u, 0x80000000u})
            expect_same(edge | sign);
}

TEST(DType, Bf16RoundTripAndRounding) {
    for (uint32_t b = 0; b < 65536; ++b) {
        const float v = bf16_to_f32(static_cast<uint16_t>(b));
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        ASSERT_EQ(bits, b << 16);
        if (!std::isnan(v)) {
            ASSERT_EQ(f32_to_bf16(v), b);
        }
    }
    // 1 + 2^-8 is the midpoint between bf16 1.0 and 1 + 2^-7: ties to even (1.0); a hair above goes up.
    EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
    EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
    EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // midpoint above odd 0x3f81 goes to even
    EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
}

TEST(DType, Fp8Decoding) {
    for (uint32_t b = 0; b < 256; ++b) {
        const int sign = b >> 7, exp = (b >> 3) & 15, man = b & 7;
        const float got = f8e4m3_to_f32(static_cast<uint8_t>(b));
        if (exp == 15 && man == 7) {
            EXPECT_TRUE(std::isnan(got));
            continue;
        }
        double v = exp == 0 ? std::ldexp(man, -9) : std::ldexp(1.0 + man / 8.0, exp - 7);
        if (sign) v = -v;
        EXPECT_EQ(static_cast<double>(got), v) << b;
    }
    EXPECT_EQ(f8e4m3_to_f32(0x7e), 448.0f);
    EXPECT_EQ(f8e5m2_to_f32(0x3c), 1.0f);
    EXPECT_EQ(f8e5m2_to_f32(0x7b), 57344.0f);
}

// f32 -> e4m3 against a search over every finite code: the nearest value, the even code on a tie, ±448 beyond. Tried
// on every code, every midpoint between neighbours (and a hair either side) and random values over the whole range.
TEST(DType, Fp8EncodingRoundsToNearestEvenAndSaturates) {
    std::vector<float> values;
    for (uint32_t b = 0; b < 0x7f; ++b) {
        const float v = f8e4m3_to_f32(static_cast<uint8_t>(b));
        values.push_back(v);
        if (b + 1 < 0x7f) {
            const float mid = (v + f8e4m3_to_f32(static_cast<uint8_t>(b + 1))) / 2;
            values.insert(values.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)});
        }
    }
    uint32_t state = 12345;
    for (int i = 0; i < 20000; ++i) {
        state = state * 1664525u + 1013904223u;
        values.push_back(std::ldexp(static_cast<float>(state >> 8) / 16777216.0f, static_cast<int>(state % 24) - 14));
    }
    values.insert(values.end(), {448.0f, 460.0f, 464.0f, 1e6f, 1e-12f, 0.0f});
    for (const float magnitude : values) {
        for (const float v : {magnitude, -magnitude}) {
            int best = 0;
            for (int b = 1; b < 0x7f; ++b) {
                const double d = std::fabs(f8e4m3_to_f32(static_cast<uint8_t>(b)) - std::fabs(static_cast<double>(v)));
                const double dbest =
                    std::fabs(f8e4m3_to_f32(static_cast<uint8_t>(best)) - std::fabs(static_cast<double>(v)));
                if (d < dbest || (d == dbest && b % 2 == 0)) best = b;
            }
            const uint8_t want = static_cast<uint8_t>(best | (std::signbit(v) ? 0x80 : 0));
            ASSERT_EQ(f32_to_f8e4m3(v), want) << v;
        }
    }
    EXPECT_TRUE(std::isnan(f8e4m3_to_f32(f32_to_f8e4m3(std::nanf("")))));
}

}  // namespace
}  // namespace pagoda
