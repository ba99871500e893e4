// RMSNorm of one row as launch_rms_norm's kernel computes it, for that kernel and for kernels that finish a row's norm
// themselves (the GEMV of a sub-layer's last projection, gemv.cu): the same sums in the same order give the same bits,
// so a fused step equals the unfused one.
#pragma once

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/grid_tail.cuh"
#include "kernels/cuda/norm/norm.h"

namespace pagoda::kernels::cuda {

// Σ v(d)² over d < D, summed as a block of V threads sums it: thread t takes d = t, t + V, ... in order, then
// block_sum's tree over the V / 32 warps. A block of B threads plays virtual threads j, j + B, ... (any B that is a
// multiple of 32), so the sum does not depend on the block that computes it. Every thread gets the result. value(d)
// is called once for each d, by the thread playing d's virtual thread.
template <class Value>
__device__ __forceinline__ float row_sum_squares(int64_t D, int V, Value&& value) {
    __shared__ float partial[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = int(blockDim.x) >> 5;
    __syncthreads();  // partial may still be read by a previous call
    for (int t = threadIdx.x, w = warp; t < V; t += blockDim.x, w += warps) {
        float ss = 0.0f;
#pragma unroll 4
        for (int64_t d = t; d < D; d += V) {
            const float v = value(d);
            ss += v * v;
        }
        ss = warp_sum(ss);
        if (lane == 0) partial[w] = ss;
    }
    __syncthreads();
    return warp_sum(lane < (V >> 5) ? partial[lane] : 0.0f);
}

// Weight d of a norm as the norm applies it: w[d], or 1 + w[d] for a zero-centred norm (Qwen3.5, Qwen3-Next).
__device__ __forceinline__ float norm_weight(const void* weight, ElemType weight_type, bool zero_centred, int64_t d) {
    const float w = load_as_f32(weight, weight_type, d);
    return zero_centred ? w + 1.0f : w;
}

// out[d] = src(d) · scale · norm_weight(d) for d = first, first + step, ...
template <class Value>
__device__ __forceinline__ void row_normalize(Value&& src, float* out, int64_t D, float scale, const void* weight,
                                              ElemType weight_type, bool zero_centred, int64_t first, int64_t step) {
#pragma unroll 4
    for (int64_t d = first; d < D; d += step)
        out[d] = src(d) * scale * norm_weight(weight, weight_type, zero_centred, d);
}

// Asks L2 for the norm's weight, from the grid's first block (a kernel with a norm tail calls it in every block before
// its programmatic-launch wait: the weight is written by no kernel, and the tail then finds it in L2).
__device__ __forceinline__ void prefetch_norm_weight(const ResidualNorm& r, int64_t D) {
    if (r.residual == nullptr || blockIdx.x != 0 || blockIdx.y != 0) return;
    const int64_t bytes = D * (r.weight_type == ElemType::F32 ? 4 : r.weight_type == ElemType::F8E4M3 ? 1 : 2);
    for (int64_t b = int64_t(threadIdx.x) * 128; b < bytes; b += int64_t(blockDim.x) * 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(static_cast<const char*>(r.weight) + b));
}

// The last block of the grid to get here normalises r.residual (D values, every block's rows stored by now) into
// r.out and re-arms the counter. Every thread of every block calls it, after its stores to the residual.
//
// The sums are row_sum_squares' for rms_norm_threads(D) virtual threads. Where each thread plays at most 4 of them
// with at most 4 elements each (D <= 4 V, V <= 4 blockDim: Qwen's hidden sizes up to 4,096 in a block of 256), it
// issues all its residual loads at once and keeps them in registers, then all its weight loads; the loops of
// row_sum_squares and row_normalize issue four loads a virtual thread at a time, a memory round trip each.
__device__ __forceinline__ void finish_residual_norm(const ResidualNorm& r, int64_t D) {
    if (!last_block_of_grid(r.counter)) return;
    const int V = rms_norm_threads(D), B = blockDim.x;
    if (V > 4 * B || D > 4 * int64_t(V)) {
        const auto residual = [&](int64_t d) { return __ldcg(r.residual + d); };
        const float ss = row_sum_squares(D, V, residual);
        const float scale = rsqrtf(ss / static_cast<float>(D) + r.eps);
        row_normalize(residual, r.out, D, scale, r.weight, r.weight_type, r.zero_centred, threadIdx.x, blockDim.x);
        return rearm_grid_tail(r.counter);
    }
    __shared__ float partial[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = B >> 5;
    // f(m, q, d) for virtual thread t = threadIdx.x + m·B's elements d = t + q·V, in the order the loops take them.
    const auto each = [&](auto&& f) {
#pragma unroll
        for (int m = 0; m < 4; ++m)
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const int t = threadIdx.x + m * B;
                const int64_t d = t + int64_t(q) * V;
                if (t < V && d < D) f(m, q, d);
            }
    };
    float v[4][4] = {}, ss[4] = {}, w[4][4] = {};
    each([&](int m, int q, int64_t d) { v[m][q] = __ldcg(r.residual + d); });
    each([&](int m, int q, int64_t) { ss[m] += v[m][q] * v[m][q]; });
#pragma unroll
    for (int m = 0; m < 4; ++m) {
        if (int(threadIdx.x) + m * B >= V) break;  // uniform in a warp: V and B are multiples of 32
        const float sum = warp_sum(ss[m]);
        if (lane == 0) partial[warp + m * warps] = sum;
    }
    __syncthreads();
    const float total = warp_sum(lane < (V >> 5) ? partial[lane] : 0.0f);
    const float scale = rsqrtf(total / static_cast<float>(D) + r.eps);
    // The weights (in L2 by now: prefetch_norm_weight), all loaded before the first store.
    each([&](int m, int q, int64_t d) { w[m][q] = norm_weight(r.weight, r.weight_type, r.zero_centred, d); });
    each([&](int m, int q, int64_t d) { r.out[d] = v[m][q] * scale * w[m][q]; });
    rearm_grid_tail(r.counter);
}

}  // namespace pagoda::kernels::cuda
