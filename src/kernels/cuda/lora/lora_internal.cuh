// What the LoRA kernels share (lora.cu: every multiply-add on CUDA cores; lora_mma.cu: tensor cores): the slot's
// header, a tile's slot, and the expand's sum of the shrink's split slices of u.
#pragma once

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/lora/lora.h"

namespace pagoda::kernels::cuda::lora {

// The rank of the slot's adapter on part p, from the slot's header; never above the room its matrices have (the
// table writes no more, and a header that said more must not send the kernels past A, B or the shared tile).
__device__ __forceinline__ int64_t slot_rank(const LoraArgs& a, const std::byte* slot, const LoraPartArgs& p) {
    return min(static_cast<int64_t>(*reinterpret_cast<const int32_t*>(slot + p.rank_offset)), a.rank);
}

__device__ __forceinline__ const std::byte* tile_slot(const LoraArgs& a, const LoraTileDesc& tile) {
    return a.slots + static_cast<int64_t>(tile.slot) * a.slot_stride;
}

// Word i of `w`: the bf16 bits of row[k + 2i] (low half) and row[k + 2i + 1], zeros from `end` on (the scalar path
// of the kernels' packed loads: odd K, an unaligned row, a rank that ends inside a run).
template <int kWords>
__device__ __forceinline__ void bf16_words(const __nv_bfloat16* row, int64_t k, int64_t end, uint32_t (&w)[kWords]) {
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
        const uint32_t lo = k + 2 * i < end ? __bfloat16_as_ushort(row[k + 2 * i]) : 0;
        const uint32_t hi = k + 2 * i + 1 < end ? __bfloat16_as_ushort(row[k + 2 * i + 1]) : 0;
        w[i] = lo | (hi << 16);
    }
}

constexpr int kUSumLoads = 16;  // loads of u's splits a thread keeps in flight

// us[e] for e = j · R + r (j < kTokens, r < R = a.rank): the tile's u for part blockIdx.z, the sum over the splits in
// split order (0 for j past the tile's count), by the block's kThreads threads. A thread's (element, split) items are
// loaded kUSumLoads at a time, each element's splits in order and summed as they come.
template <int kTokens, int kThreads>
__device__ __forceinline__ void sum_splits(const LoraArgs& a, const LoraTileDesc& tile, float* us) {
    // (Counts here are small: int arithmetic.)
    const int R = static_cast<int>(a.rank), splits = static_cast<int>(lora_splits(a.K)), elems = kTokens * R;
    const int64_t u_stride = a.num_parts * a.rank;
    const int tid = static_cast<int>(threadIdx.x);
    const int items = (elems > tid ? (elems - 1 - tid) / kThreads + 1 : 0) * splits;
    float sum = 0.0f;
    for (int i0 = 0; i0 < items; i0 += kUSumLoads) {
        float v[kUSumLoads];
#pragma unroll
        for (int s = 0; s < kUSumLoads; ++s) {
            const int i = i0 + s, e = tid + (i / splits) * kThreads, j = e / R;
            v[s] = i < items && j < tile.count ? a.u[(i % splits) * a.u_rows * u_stride + (tile.begin + j) * u_stride +
                                                     static_cast<int64_t>(blockIdx.z) * R + e % R]
                                               : 0.0f;
        }
#pragma unroll
        for (int s = 0; s < kUSumLoads; ++s) {
            const int i = i0 + s;
            if (i >= items) break;
            sum += v[s];
            if (i % splits == splits - 1) {
                us[tid + (i / splits) * kThreads] = sum;
                sum = 0.0f;
            }
        }
    }
}

}  // namespace pagoda::kernels::cuda::lora

namespace pagoda::kernels::cuda {
// lora_mma.cu's launchers, which launch_lora_shrink / launch_lora_expand call for LoraArgs::tensor_cores (after their
// checks of the arguments).
void launch_lora_shrink_mma(const LoraArgs& a, cudaStream_t stream);
void launch_lora_expand_mma(const LoraArgs& a, cudaStream_t stream);
}  // namespace pagoda::kernels::cuda
