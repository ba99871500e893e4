// What the MoE expert kernels share: the routing layout on the device, the tile lookup, and the two grouped passes
// (gate_up with silu·up fused, then down), each run as a GEMV-like kernel (few rows per expert: decode) or a
// tensor-core GEMM (prefill).
#pragma once

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/moe/moe.h"

namespace pagoda::kernels::cuda::moe {

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
};

// Row tiles of kGemvRows rows; each warp streams weight rows once per tile with 16-byte loads (decode).
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

inline bool aligned16(const void* p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// Whether 16-byte (8-element) loads fit: every row start of the weights and the input on a 16-byte boundary.
inline bool vector_loads_fit(const GroupedArgs& a) {
    return a.K % 8 == 0 && a.w.expert_stride % 8 == 0 && a.w.row_stride % 8 == 0 && aligned16(a.w.data) &&
           aligned16(a.a);
}

}  // namespace pagoda::kernels::cuda::moe
