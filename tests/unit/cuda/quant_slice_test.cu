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

}  // namespace
}  // namespace pagoda::kernels::cuda
