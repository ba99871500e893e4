// What the MoE expert kernels share: the routing layout on the device, the tile lookup, and the two grouped passes
// (gate_up with silu·up fused, then down), each run as a GEMV-like kernel (few rows per expert: decode) or a
// tensor-core GEMM (prefill).
#pragma once

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm/quant_slice.cuh"
#include "kernels/cuda/moe/moe.h"

namespace pagoda::kernels::cuda {

namespace moe {
// Two int4 weights (one byte of LinearWeight's kInt4 layout): the element type of an int4 stack in the expert kernels,
// so that pointers to it step in bytes, as the stacks' strides do.
struct Int4Pair {
    uint8_t byte;
};
}  // namespace moe

// int4 experts are computed in bf16, as their dequantised copy would be.
template <>
struct ComputeType<moe::Int4Pair> {
    using T = __nv_bfloat16;
};

namespace moe {

// How a quantized stack dequantises (MoeExpertsArgs' fields for one stack): fp8 scales (the grid's formula), or int4
// ones: weight (row, k) of the stack, counted as one [E*N, K] matrix, has the scale
// scales.data[row * scales.stride + k / scales.cols] and the zero point at the same index of zeros (null: 8), the
// product rounded as round_to says.
using StackQuant = quant::RowQuant;  // gemm/quant_slice.cuh: the grid formula above

// Weights [k, k + 8) of stack row `row` from their 4 packed bytes (k a multiple of 8, the 8 in one group), each
// as launch_dequantize_int4 writes it.
__device__ __forceinline__ void unpack_int4(uint32_t raw, const StackQuant& q, int64_t row, int64_t k, float* out) {
    const int64_t g = row * q.scales.stride + ColumnGroups(q.scales.cols).of(k);  // no 64-bit division a load
    const float s = __ldg(q.scales.data + g), z = q.zeros ? __ldg(q.zeros + g) : 8.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i)
        out[i] = dequantize_int4((raw >> (4 * i)) & 0xFu, s, z, q.round_to);
}

// Weights [k, k + 8) of stack row `row` of an fp8 stack from their 8 bytes (k a multiple of 8, the 8 under one
// scale of the stack's grid), each as launch_dequantize_fp8 writes it: bf16(q · scale).
__device__ __forceinline__ void unpack_fp8(uint2 raw, const StackQuant& q, int64_t row, int64_t k, float* out) {
    const auto* v = reinterpret_cast<const __nv_fp8_storage_t*>(&raw);
    const float s = __ldg(q.scales.data + ColumnGroups(q.scales.rows).of(row) * q.scales.stride +
                          ColumnGroups(q.scales.cols).of(k));
#pragma unroll
    for (int i = 0; i < 8; ++i)
        out[i] = dequantize_e4m3(v[i], s);
}

// The routing of one call, computed on the device (launch_routing). A pair i = t*k + j is token t's j-th choice; the
// pairs are sorted by expert into "rows": expert e owns rows [expert_offsets[e], expert_offsets[e+1]). The rows of an
// expert are cut into tiles of tile_rows rows; expert e owns tiles [tile_offsets[e], tile_offsets[e+1]). The host
// launches a grid for the most tiles there can be (max_tiles()); blocks past tile_offsets[E] exit at once.
struct Routing {
    int32_t* sorted_pairs = nullptr;    // [T*k]: the pair of each row (order within an expert is arbitrary)
    int32_t* expert_offsets = nullptr;  // [E+1]
    int32_t* tile_offsets = nullptr;    // [E+1]
    int32_t E = 0, k = 0, tile_rows = 0;
    int64_t first_expert = 0;  // expert e of the routing is the model's expert first_expert + e (expert parallelism)
};

// Each expert adds at most one partial tile.
inline int64_t max_tiles(int64_t pairs, int64_t E, int64_t tile_rows) {
    return (pairs + tile_rows - 1) / tile_rows + (pairs < E ? pairs : E);
}

// Counts the pairs per expert, scans the counts into row and tile offsets and scatters the pairs into their rows.
// One block: E <= kMoeMaxExperts threads own one expert each in the scan.
void launch_routing(const int32_t* topk_ids, int64_t pairs, const Routing& r, cudaStream_t stream);

struct Tile {
    int32_t expert, row0, rows;
};

// Which expert's rows the block's tile covers (binary search over tile_offsets); false past the last tile.
__device__ __forceinline__ bool find_tile(const Routing& r, int32_t tile, Tile& out) {
    if (tile >= r.tile_offsets[r.E]) return false;
    int lo = 0, hi = r.E;  // tile_offsets[lo] <= tile < tile_offsets[hi]
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (r.tile_offsets[mid] <= tile)
            lo = mid;
        else
            hi = mid;
    }
    out.expert = lo;
    out.row0 = r.expert_offsets[lo] + (tile - r.tile_offsets[lo]) * r.tile_rows;
    const int32_t end = r.expert_offsets[lo + 1];
    out.rows = end - out.row0 < r.tile_rows ? end - out.row0 : r.tile_rows;
    return true;
}

// One grouped pass over the routed rows, in the weights' 16-bit type W.
// GateUp: h[row, i] = silu(gate_e[i] · x[token(row)]) · (up_e[i] · x[token(row)]) for i < I, with x_w the input in W's
//         type [T, H] (dense) and h [T*k, I] in W's type (dense, by row).
// Down:   y[pair(row), n] = down_e[n] · h[row] for n < H, y [T*k, H] F32 (dense, by pair).
enum class Pass : uint8_t { GateUp, Down };
struct GroupedArgs {
    Routing routing;
    const void* a = nullptr;  // GateUp: x_w; Down: h
    MoeStackedWeight w;
    int64_t K = 0;  // the dot length: H (GateUp) or I (Down)
    int64_t N = 0;  // outputs per row: I (GateUp) or H (Down)
    void* h = nullptr;
    float* y = nullptr;
    int64_t tiles = 0;  // max_tiles() for routing.tile_rows: the grid's x
    // int4 or fp8 weights (the GEMV passes only; a and h then in bf16): the stack's groups or scale grid.
    bool int4 = false;
    bool fp8 = false;
    StackQuant quant;
};

// Row tiles of kGemvRows rows; each warp streams weight rows once per tile with 16-byte loads (decode). int4 stacks
// (a.int4, w_type BF16) take 4-byte loads of 8 weights and need int4_gemv_fits; fp8 ones (a.fp8, w_type BF16) 8-byte
// loads of 8 and fp8_gemv_fits.
inline constexpr int32_t kGemvRows = 8;
void launch_grouped_gemv(Pass pass, const GroupedArgs& a, ElemType w_type, cudaStream_t stream);

// Row tiles of kMmaRows rows; bf16/f16 mma.sync with fp32 accumulation (prefill).
inline constexpr int32_t kMmaRows = 64;
void launch_grouped_mma(Pass pass, const GroupedArgs& a, ElemType w_type, cudaStream_t stream);

// Up to kPairMaxTokens tokens: the two pair passes (pair_gemv.cu) compute the experts without routing them, x read
// in fp32 and h [T*k, I] (in the weights' type) the only workspace; they sum as the grouped GEMV passes do.
inline constexpr int64_t kPairMaxTokens = 4;
// Few tokens, k <= 32, 16-byte rows everywhere, I > 0, and not turned off by PAGODA_MOE_PAIR_PASSES=0 (to measure
// what they gain).
bool take_pair_passes(const MoeExpertsArgs& a);
void launch_pair_passes(const MoeExpertsArgs& a, void* h, cudaStream_t stream);

// Whether 16-byte (8-element) loads fit: every row start of the weights and the input on a 16-byte boundary.
inline bool vector_loads_fit(const GroupedArgs& a) {
    return a.K % 8 == 0 && a.w.expert_stride % 8 == 0 && a.w.row_stride % 8 == 0 && aligned(a.w.data, 16) &&
           aligned(a.a, 16);
}

// int4 weights on the GEMV passes: 8-weight loads on 4-byte boundaries (K, the strides in bytes and the base as
// vector_loads_fit wants them) and 8 weights in one group.
inline bool int4_gemv_fits(const GroupedArgs& a) {
    return vector_loads_fit(a) && a.quant.scales.data && a.quant.scales.rows == 1 && a.quant.scales.cols % 8 == 0;
}

// fp8 and int4 weights on the mma passes (grouped_mma_quant_kernel): K whole slices of 32, a thread's 16 weights of a
// row under one scale and on a 16-byte (fp8) or 8-byte (int4) boundary, the input's rows on 16-byte ones, and (fp8)
// one scale grid over the whole stack.
inline bool quant_mma_fits(const GroupedArgs& a, Pass pass) {
    const WeightScales& s = a.quant.scales;
    const int64_t align = a.int4 ? 8 : 16;  // bytes: 16 weights of int4 or of fp8
    const int64_t rows_per_expert = pass == Pass::GateUp ? 2 * a.N : a.N;
    const bool grid = a.int4 ? s.rows == 1 : rows_per_expert % s.rows == 0;
    return (a.int4 || a.fp8) && a.K % 32 == 0 && s.data && s.rows > 0 && s.cols % 16 == 0 && grid &&
           a.w.row_stride % align == 0 && a.w.expert_stride % align == 0 && aligned(a.w.data, align) &&
           aligned(a.a, 16);
}

// fp8 weights on the GEMV passes: 8-weight loads as vector_loads_fit wants them (8 bytes, on 16-byte row starts), 8
// weights under one scale, and one grid over the whole stack (an expert's `rows_per_expert` rows a whole number of
// scale blocks), as the loader stacks them.
inline bool fp8_gemv_fits(const GroupedArgs& a, int64_t rows_per_expert) {
    const WeightScales& s = a.quant.scales;
    return vector_loads_fit(a) && s.data && s.rows > 0 && s.cols % 8 == 0 && rows_per_expert % s.rows == 0;
}

}  // namespace moe

}  // namespace pagoda::kernels::cuda
