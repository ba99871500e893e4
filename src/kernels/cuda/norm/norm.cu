// RMSNorm over rows of [T, H, D] (H = 1 for the hidden-state norms, H = heads for QK-norm), optionally fused with
// the residual add of the previous sub-layer. One block per row; statistics in fp32.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/norm/norm.h"
#include "kernels/cuda/norm/rms_row.cuh"

namespace pagoda::kernels::cuda {

namespace {

// With kEarly (a.early_loads) each thread holds its weights (d = threadIdx.x + i · blockDim.x, i < kHeld) in registers,
// loaded before the programmatic-launch wait (no kernel writes a norm's weight), so that after the wait only the row is
// read: one memory round trip fewer on a decode step's critical path. Rows of more than kHeld · blockDim.x take the
// loop. Only grids of one wave take them (one_wave, common.cuh: a 2,048-token prefill's norms do not).
constexpr int kHeld = 8;

// w[i] = the weight of d = threadIdx.x + i · blockDim.x as row_normalize takes it (1 + w when zero-centred).
__device__ __forceinline__ void early_norm_weights(const RmsNormArgs& a, float (&w)[kHeld]) {
#pragma unroll
    for (int i = 0; i < kHeld; ++i) {
        const int64_t d = threadIdx.x + int64_t(i) * blockDim.x;
        w[i] = d < a.D ? norm_weight(a.weight, a.weight_type, a.zero_centred, d) : 0.0f;
    }
}

template <bool kEarly>
__global__ void rms_norm_kernel(RmsNormArgs a) {
    float held[kHeld];
    const bool hold = kEarly && a.D <= kHeld * int64_t(blockDim.x);
    if (hold) early_norm_weights(a, held);
    PAGODA_KERNEL_PROLOGUE();
    const int64_t row = blockIdx.x;
    const int64_t t = row / a.H, h = row % a.H;
    const float* x = a.x.data + t * a.x.stride_t + h * a.x.stride_h;
    float* out = a.out.data + t * a.out.stride_t + h * a.out.stride_h;
    float* res = a.residual.data ? a.residual.data + t * a.residual.stride_t + h * a.residual.stride_h : nullptr;
    __nv_bfloat16* out16 = a.out_bf16 ? static_cast<__nv_bfloat16*>(a.out_bf16) + row * a.D : nullptr;
    if constexpr (kEarly) {
        if (hold) {
            // The row's values stay in registers from the sum to the normalisation (the loop below reads them
            // again: one memory round trip more on a decode step's path, the row's bytes twice in a prefill), and
            // every load is issued before the first store (a store to res could alias a later load, which would
            // keep the compiler from issuing them together). The same sum as row_sum_squares' with one virtual
            // thread a thread: each thread's in order, then block_sum.
            float v[kHeld], r[kHeld];
#pragma unroll
            for (int i = 0; i < kHeld; ++i) {
                const int64_t d = threadIdx.x + int64_t(i) * blockDim.x;
                v[i] = d < a.D ? x[d] : 0.0f;
                r[i] = res && d < a.D ? res[d] : 0.0f;
            }
            float ss = 0.0f;
#pragma unroll
            for (int i = 0; i < kHeld; ++i) {
                const int64_t d = threadIdx.x + int64_t(i) * blockDim.x;
                if (d >= a.D) continue;
                if (res) {
                    v[i] += r[i];
                    res[d] = v[i];
                }
                ss += v[i] * v[i];
            }
            const float scale = rsqrtf(block_sum(ss) / static_cast<float>(a.D) + a.eps);
#pragma unroll
            for (int i = 0; i < kHeld; ++i) {  // row_normalize's expression
                const int64_t d = threadIdx.x + int64_t(i) * blockDim.x;
                if (d >= a.D) continue;
                const float o = v[i] * scale * held[i];
                out[d] = o;
                if (out16) out16[d] = from_f32<__nv_bfloat16>(o);
            }
            return;
        }
    }
    // Each thread touches the same indices in both passes, so out may alias x.
    const float ss = row_sum_squares(a.D, blockDim.x, [&](int64_t d) {
        float v = x[d];
        if (res) {
            v += res[d];
            res[d] = v;
        }
        return v;
    });
    const float scale = rsqrtf(ss / static_cast<float>(a.D) + a.eps);
    row_normalize([&](int64_t d) { return res ? res[d] : x[d]; }, out, out16, a.D, scale, a.weight, a.weight_type,
                  a.zero_centred, threadIdx.x, blockDim.x);
}

}  // namespace

void launch_rms_norm(const RmsNormArgs& a, cudaStream_t stream) {
    const int64_t rows = a.T * a.H;
    if (rows == 0) return;
    PAGODA_KERNEL_REQUIRE(rows <= 0x7fffffffLL, "rms_norm: too many rows");
    PAGODA_KERNEL_REQUIRE(a.out_bf16 == nullptr || a.H == 1, "rms_norm: a bf16 copy of out only over [T, D]");
    // About four elements per thread: a decode step's norms are one row, i.e. one block, and each of its loads
    // costs a full memory latency, so the block must issue them all at once.
    const unsigned threads = rms_norm_threads(a.D);
    if (a.early_loads && one_wave<rms_norm_kernel<true>>(static_cast<unsigned>(rows), threads))
        launch_kernel<rms_norm_kernel<true>>(static_cast<unsigned>(rows), threads, 0, stream, a);
    else
        launch_kernel<rms_norm_kernel<false>>(static_cast<unsigned>(rows), threads, 0, stream, a);
    PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::kernels::cuda
