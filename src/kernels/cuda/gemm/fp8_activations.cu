// One block per (group, token): the group's amax by a block reduction, then each input rounded to e4m3 with the
// group's scale. The divisions are IEEE (the build has no fast math), so the bytes are the CPU's. A block has enough
// threads (up to 1,024) for each to keep its kHold inputs in registers between the two passes and load them at once:
// a whole-row group (per-token scales) of 4,096 inputs walked by 128 threads was 32 loads a thread in a loop, twice,
// for every projection of a one-token step: likely much of why W8A8 decoded slower than weight-only fp8 (session 23 on
// an H100: 7.54 against 5.82 ms a step; not profiled op by op). This change has not run on a GPU.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm/fp8_activations.h"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kMinThreads = 128, kMaxThreads = 1024;
constexpr int kHold = 8;  // inputs a thread keeps between the amax and the rounding

// The block's largest v (a multiple of 32 threads).
__device__ __forceinline__ float block_max(float v) {
    __shared__ float partial[kMaxThreads / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = lane < static_cast<int>(blockDim.x / 32) ? partial[lane] : 0.0f;
    return warp_max(v);
}

// Input k of the row rounded with `scale`, written where the caller wants it.
__device__ __forceinline__ void put(const QuantizeFp8ActivationsArgs& a, int64_t t, int64_t k, float v, float scale) {
    const __nv_fp8_storage_t q = __nv_cvt_float_to_fp8(__fdiv_rn(v, scale), __NV_SATFINITE, __NV_E4M3);
    if (a.q) a.q[t * a.K + k] = q;
    // e4m3 -> f16 is exact, and so the product is the f32 one the CPU computes (not rounded to bf16 as a weight's).
    if (a.qdq) a.qdq[t * a.K + k] = __half2float(__half(__nv_cvt_fp8_to_halfraw(q, __NV_E4M3))) * scale;
}

__global__ void quantize_fp8_activations_kernel(QuantizeFp8ActivationsArgs a, int64_t group) {
    PAGODA_KERNEL_PROLOGUE();
    const int64_t t = blockIdx.x, g = blockIdx.y, threads = blockDim.x;
    const int64_t k0 = g * group, k1 = min(a.K, k0 + group);
    if (t >= a.T) {  // a padding row of the GEMM's input: zeros
        if (threadIdx.x == 0) a.scales[g * a.scale_ld + t] = 1e-12f;
        for (int64_t k = k0 + threadIdx.x; k < k1; k += threads)
            a.q[t * a.K + k] = 0;
        return;
    }
    const float* x = a.x + t * a.x_stride;
    // Input k0 + threadIdx.x + i · threads in held[i], the rest (a group longer than kHold · threads) read twice.
    float held[kHold];
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < kHold; ++i) {
        const int64_t k = k0 + threadIdx.x + i * threads;
        held[i] = k < k1 ? x[k] : 0.0f;
        amax = fmaxf(amax, fabsf(held[i]));
    }
    for (int64_t k = k0 + threadIdx.x + kHold * threads; k < k1; k += threads)
        amax = fmaxf(amax, fabsf(x[k]));
    amax = block_max(amax);
    const float scale = fmaxf(__fdiv_rn(amax, 448.0f), 1e-12f);
    if (a.scales && threadIdx.x == 0) a.scales[g * a.scale_ld + t] = scale;
#pragma unroll
    for (int i = 0; i < kHold; ++i) {
        const int64_t k = k0 + threadIdx.x + i * threads;
        if (k < k1) put(a, t, k, held[i], scale);
    }
    for (int64_t k = k0 + threadIdx.x + kHold * threads; k < k1; k += threads)
        put(a, t, k, x[k], scale);
}

}  // namespace

void launch_quantize_fp8_activations(const QuantizeFp8ActivationsArgs& a, cudaStream_t stream) {
    if (a.T == 0 || a.K == 0) return;
    const int64_t rows = a.q && a.padded_T > a.T ? a.padded_T : a.T;
    PAGODA_KERNEL_REQUIRE(a.x && (a.qdq || a.q) && (!a.q || (a.scales && a.scale_ld >= rows)),
                          "fp8 activation quantization needs an input, an output and (for e4m3 bytes) scales");
    const int64_t group = a.group > 0 ? a.group : a.K;
    const int64_t groups = (a.K + group - 1) / group;
    PAGODA_KERNEL_REQUIRE(groups <= 65535, "fp8 activation quantization takes at most 65,535 groups a token");
    // Enough threads for a group's inputs to fit kHold a thread (whole warps, 128 to 1,024).
    const int64_t want = (group + kHold - 1) / kHold;
    const int threads =
        static_cast<int>(std::min<int64_t>(kMaxThreads, std::max<int64_t>(kMinThreads, (want + 31) / 32 * 32)));
    // Tokens on grid.x (up to 2^31 - 1), groups on grid.y.
    launch_kernel<quantize_fp8_activations_kernel>(dim3(static_cast<unsigned>(rows), static_cast<unsigned>(groups)),
                                                   dim3(static_cast<unsigned>(threads)), 0, stream, a, group);
}

}  // namespace pagoda::kernels::cuda
