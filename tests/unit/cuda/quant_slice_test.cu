// The weight-only GEMMs' chunk dequantisation (kernels/cuda/gemm/quant_slice.cuh: 16 weights of a row a thread) on the
// host: weight j of a chunk must be the one the weight's byte layout puts at k + j (fp8 and int8: byte j; int4: the
// low nibble of byte j / 2 for even j, the high one for odd j), dequantised by dequantize_e4m3 / dequantize_int4 as the
// bf16 copy of the weight holds it, bit for bit; a row past the weight's end stores zeros. On a GPU the op harness's
// linear fp8/int4/int8 and MoE cases run the kernels that use it against the CPU backend.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "kernels/cuda/gemm/quant_slice.cuh"

namespace pagoda::kernels::cuda {
namespace {

using quant::Format;

template <Format F>
void check(ElemType round_to, std::mt19937& rng) {
    for (int trial = 0; trial < 2000; ++trial) {
        quant::Chunk c{};
        uint8_t bytes[16];
        for (uint8_t& b : bytes)
            b = static_cast<uint8_t>(rng());
        std::memcpy(&c.raw, bytes, sizeof bytes);
        c.scale = std::ldexp(static_cast<float>(rng() % 1000 + 1), -static_cast<int>(rng() % 20));
        c.zero = static_cast<float>(rng() % (F == Format::Int8 ? 256 : 16));
        __align__(16) __nv_bfloat16 got[quant::kChunk];
        quant::store<F>(c, true, round_to, got);
        for (int j = 0; j < quant::kChunk; ++j) {
            float want;
            if constexpr (F == Format::Fp8)
                want = dequantize_e4m3(static_cast<__nv_fp8_storage_t>(bytes[j]), c.scale);
            else if constexpr (F == Format::Int8)
                want = dequantize_int4(bytes[j], c.scale, c.zero, round_to);
            else
                want = dequantize_int4((bytes[j / 2] >> (4 * (j % 2))) & 0xF, c.scale, c.zero, round_to);
            const __nv_bfloat16 w = __float2bfloat16_rn(want);
            ASSERT_EQ(std::memcmp(&w, &got[j], sizeof w), 0)
                << "format " << static_cast<int>(F) << ", weight " << j << ": want " << want << ", got "
                << __bfloat162float(got[j]);
        }
        quant::store<F>(c, false, round_to, got);
        for (int j = 0; j < quant::kChunk; ++j)
            ASSERT_EQ(__bfloat162float(got[j]), 0.0f) << "a row past the end stores zeros";
    }
}

TEST(QuantSlice, ChunkValuesFollowTheWeightLayout) {
    std::mt19937 rng(7);
    check<Format::Fp8>(ElemType::F32, rng);
    for (const ElemType round_to : {ElemType::F16, ElemType::BF16, ElemType::F32}) {
        check<Format::Int4>(round_to, rng);
        check<Format::Int8>(round_to, rng);
    }
}

// ColumnGroups (gemm/column_groups.cuh), which the quantized kernels use instead of a 64-bit division to find a
// weight's scale: k / width for power-of-two widths (a shift) and others (a 32-bit division), k up to 2^31 - 1.
TEST(ColumnGroupsTest, EqualsTheDivision) {
    std::mt19937_64 rng(7);
    for (const int64_t width : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{8}, int64_t{16}, int64_t{32}, int64_t{64},
                                int64_t{100}, int64_t{128}, int64_t{255}, int64_t{256}, int64_t{1000}, int64_t{4096},
                                int64_t{12288}, int64_t{1} << 20, int64_t{1} << 30, (int64_t{1} << 31) - 1}) {
        const ColumnGroups groups(width);
        EXPECT_EQ(groups.shift >= 0, (width & (width - 1)) == 0) << width;
        for (int trial = 0; trial < 4000; ++trial) {
            const int64_t k = trial < 1000 ? trial : static_cast<int64_t>(rng() % (uint64_t{1} << 31));
            ASSERT_EQ(groups.of(k), k / width) << "k " << k << " width " << width;
        }
        ASSERT_EQ(groups.of(width - 1), 0) << width;
        ASSERT_EQ(groups.of(width), 1) << width;
    }
}

}  // namespace
}  // namespace pagoda::kernels::cuda
