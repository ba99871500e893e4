// CUDA launchers for multi-LoRA (runtime/lora.h): a projection's adapter deltas for every token of a step in two
// launches, whatever the adapters. The step's adapter tokens come sorted by slot (`order`) and cut into tiles of up
// to kLoraTileRows tokens of one slot; each slot keeps its adapter's matrices at fixed places (runtime's
// LoraDeviceLayout: A [rank, K] and B [rows, rank] in bf16 per part of the projection with room for the table's rank,
// B times the adapter's scale, and the adapter's rank on each part, which bounds what the kernels use: rows past it may
// be read, never added). The shrink writes u = x · Aᵀ per (token, part); the expand adds u · Bᵀ into the part's columns
// of y. Nothing depends on host data but the grid's size (the tile count, fixed for a recorded step), so a CUDA graph
// replays them for any mix of adapters.
#pragma once

#include "kernels/cuda/types.h"

namespace pagoda::kernels::cuda {

inline constexpr int kLoraMaxParts = 4;  // Qwen3.5's fused Gated DeltaNet input projection: qkv, z, b, a
inline constexpr int kLoraTileTokens = 16;
// The inputs one shrink block sums: a projection's K is split into ceil(K / kLoraSplitK) ranges, each block's sums go
// to their own slice of u, and the expand adds the slices in order (a fixed split, so a token's delta does not depend
// on what else the step holds). One block walking all of K left a decode step's shrink latency-bound (~115 µs a
// projection on an H100 at rank 16); ranges of 512 let a block load all of its inputs at once.
inline constexpr int64_t kLoraSplitK = 512;
inline constexpr int64_t lora_splits(int64_t K) {
    return (K + kLoraSplitK - 1) / kLoraSplitK;
}

// The same fields, in the same order, as runtime's LoraTile (runtime/cuda/lora.cpp checks it).
struct LoraTileDesc {
    int32_t slot, begin, count, unused;
};

struct LoraPartArgs {
    int64_t row_offset, rows;    // the part's output features in y
    int64_t a_offset, b_offset;  // bytes from a slot's start
    int64_t rank_offset;         // bytes from a slot's start: the int32 rank r_{s,p} of the slot's adapter on the part
};

// For every tile i < num_tiles with count > 0, token t = order[tiles[i].begin + j] (j < count) of slot s:
//   shrink: u[q, (begin + j), p, r] = Σ_{k in split q} x[t, k] · A_{s,p}[r, k]   for r < r_{s,p}, p < num_parts,
//           q < lora_splits(K) (split q: k in [q · kLoraSplitK, (q + 1) · kLoraSplitK))
//   expand: y[t, row_offset_p + n] += Σ_{r < r_{s,p}} (Σ_q u[q, (begin + j), p, r]) · B_{s,p}[n, r]   for n < rows_p
// with A_{s,p} [rank, K] bf16 at slots + s · slot_stride + a_offset_p, B_{s,p} [rows_p, rank] bf16 likewise (rank:
// the row stride of B and the room of A; r_{s,p} <= rank, 0 where the adapter leaves the part alone: nothing is read
// or added). x, y and u are F32; u is [lora_splits(K), u_rows, num_parts, rank] (u_rows >= order's length), summed in
// F32, the splits in order.
struct LoraArgs {
    const float* x;
    int64_t x_stride;
    float* y;
    int64_t y_stride;
    const std::byte* slots;
    int64_t slot_stride;  // bytes
    int64_t rank, K;
    LoraPartArgs parts[kLoraMaxParts];
    int32_t num_parts;
    int64_t max_rows;  // the largest part's rows (the expand's grid)
    const int32_t* order;
    const LoraTileDesc* tiles;
    int32_t num_tiles;
    float* u;
    int64_t u_rows;
    // The most tokens a tile holds (1 to kLoraTileTokens; a step of T tokens: min(T, kLoraTileTokens), fixed for a
    // recorded step): the kernels' instance, which stages and sums only that many a tile (the results do not depend
    // on it).
    int32_t tile_tokens = kLoraTileTokens;
    // Both kernels on tensor cores (lora_mma.cu: x and u rounded to bf16, f32 sums; every tile one 16-token operand,
    // tile_tokens unused) instead of CUDA cores. One choice for a process: a token's delta then depends on nothing
    // else of its step either way.
    bool tensor_cores = false;
};
void launch_lora_shrink(const LoraArgs& a, cudaStream_t stream);
void launch_lora_expand(const LoraArgs& a, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
