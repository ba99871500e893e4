// One thread's share of a weight slice in the weight-only tensor-core GEMMs (gemm/wo_mma.cu, the MoE grouped mma
// passes over quantized experts): 16 consecutive weights of one row, fetched as stored (16 bytes of fp8 or int8, 8 of
// int4) into registers a slice ahead, then written to shared memory dequantised to bf16 exactly as the bf16 copy of
// the weight holds them (dequantize_e4m3, dequantize_int4), so these GEMMs give the copy + GEMM path's products.
#pragma once

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm/column_groups.cuh"

namespace pagoda::kernels::cuda::quant {

enum class Format { Fp8, Int4, Int8 };
inline constexpr int kChunk = 16;  // weights a thread fetches per slice

// Where weight (r, k)'s scale and zero point are: scales.data[(r / scales.rows) * scales.stride + k / scales.cols],
// zeros at the same index (null: the format's symmetric zero, 8 or 128); int formats round the product to round_to
// first. fp8 block, channel or tensor grids and int4/int8 groups (rows 1, cols = the group) all fit it.
struct RowQuant {
    WeightScales scales;
    const float* zeros = nullptr;
    ElemType round_to = ElemType::F32;
};

struct Chunk {
    uint4 raw;  // fp8/int8: 16 bytes; int4: the first 8
    float scale, zero;
};

// Weights [k, k + 16) of the row starting at `row` (its first byte), which is row r of the scale grid. k is a
// multiple of 16 and the 16 share a scale; `row + k` (int4: `row + k / 2`) is 16-byte (8-byte) aligned.
template <Format F>
__device__ __forceinline__ Chunk fetch(const uint8_t* row, int64_t r, int64_t k, const RowQuant& q) {
    Chunk c{};
    if constexpr (F == Format::Int4) {
        const uint2 half = __ldg(reinterpret_cast<const uint2*>(row + k / 2));
        c.raw = make_uint4(half.x, half.y, 0, 0);
    } else {
        c.raw = __ldg(reinterpret_cast<const uint4*>(row + k));
    }
    // Shifts, not 64-bit divisions, for the usual power-of-two blocks and groups (column_groups.cuh).
    const int64_t i = ColumnGroups(q.scales.rows).of(r) * q.scales.stride + ColumnGroups(q.scales.cols).of(k);
    c.scale = __ldg(q.scales.data + i);
    if constexpr (F != Format::Fp8) c.zero = q.zeros ? __ldg(q.zeros + i) : (F == Format::Int8 ? 128.0f : 8.0f);
    return c;
}

// The chunk's 16 weights as bf16 at dst (16-byte aligned); zeros when !valid (a row past the weight's end). Host too:
// tests/unit/cuda/quant_slice_test.cu holds the value order to the weights' byte layout.
template <Format F>
__host__ __device__ __forceinline__ void store(const Chunk& c, bool valid, ElemType round_to, __nv_bfloat16* dst) {
    const uint32_t words[4] = {c.raw.x, c.raw.y, c.raw.z, c.raw.w};
    __align__(16) __nv_bfloat16 v[kChunk];
    for (int j = 0; j < kChunk; ++j) {  // a constant trip count: unrolled (no pragma: host code too)
        float w;
        if constexpr (F == Format::Fp8) {
            w = dequantize_e4m3(static_cast<__nv_fp8_storage_t>((words[j / 4] >> (8 * (j % 4))) & 0xff), c.scale);
        } else if constexpr (F == Format::Int8) {
            w = dequantize_int4((words[j / 4] >> (8 * (j % 4))) & 0xff, c.scale, c.zero, round_to);
        } else {  // two values a byte, the even k in the low nibble: value j is nibble j of the little-endian words
            w = dequantize_int4((words[j / 8] >> (4 * (j % 8))) & 0xf, c.scale, c.zero, round_to);
        }
        v[j] = __float2bfloat16_rn(valid ? w : 0.0f);
    }
    auto* out = reinterpret_cast<uint4*>(dst);
    out[0] = *reinterpret_cast<const uint4*>(v);
    out[1] = *reinterpret_cast<const uint4*>(v + 8);
}

}  // namespace pagoda::kernels::cuda::quant
