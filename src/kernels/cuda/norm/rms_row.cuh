// RMSNorm of one row as launch_rms_norm's kernel computes it, for that kernel and for the attention prologue's QK-norm
// (attention/rope_kv.cu), which applies the norm's weights as it does.
#pragma once

#include "kernels/cuda/common.cuh"
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

// out[d] = src(d) · scale · norm_weight(d) for d = first, first + step, ..., and out16[d] the same rounded to bf16
// when out16 is given (RmsNormArgs::out_bf16).
template <class Value>
__device__ __forceinline__ void row_normalize(Value&& src, float* out, __nv_bfloat16* out16, int64_t D, float scale,
                                              const void* weight, ElemType weight_type, bool zero_centred,
                                              int64_t first, int64_t step) {
#pragma unroll 4
    for (int64_t d = first; d < D; d += step) {
        const float v = src(d) * scale * norm_weight(weight, weight_type, zero_centred, d);
        out[d] = v;
        if (out16) out16[d] = from_f32<__nv_bfloat16>(v);
    }
}

}  // namespace pagoda::kernels::cuda
