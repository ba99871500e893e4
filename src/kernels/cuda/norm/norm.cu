// RMSNorm over rows of [T, H, D] (H = 1 for the hidden-state norms, H = heads for QK-norm), optionally fused with
// the residual add of the previous sub-layer. One block per row; statistics in fp32.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/norm/norm.h"

namespace pagoda::kernels::cuda {

namespace {

__global__ void rms_norm_kernel(RmsNormArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    const int64_t row = blockIdx.x;
    const int64_t t = row / a.H, h = row % a.H;
    const float* x = a.x.data + t * a.x.stride_t + h * a.x.stride_h;
    float* out = a.out.data + t * a.out.stride_t + h * a.out.stride_h;
    float* res = a.residual.data ? a.residual.data + t * a.residual.stride_t + h * a.residual.stride_h : nullptr;
    float ss = 0.0f;
    // Each thread touches the same indices in both passes, so out may alias x.
#pragma unroll 4
    for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x) {
        float v = x[d];
        if (res) {
            v += res[d];
            res[d] = v;
        }
        ss += v * v;
    }
    ss = block_sum(ss);
    const float scale = rsqrtf(ss / static_cast<float>(a.D) + a.eps);
    const float* src = res ? res : x;
#pragma unroll 4
    for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x) {
        float w = load_as_f32(a.weight, a.weight_type, d);
        if (a.zero_centred) w += 1.0f;
        out[d] = src[d] * scale * w;
    }
}

}  // namespace

void launch_rms_norm(const RmsNormArgs& a, cudaStream_t stream) {
    const int64_t rows = a.T * a.H;
    if (rows == 0) return;
    PAGODA_KERNEL_REQUIRE(rows <= 0x7fffffffLL, "rms_norm: too many rows");
    // About four elements per thread: a decode step's norms are one row, i.e. one block, and each of its loads
    // costs a full memory latency, so the block must issue them all at once.
    const int64_t want = (a.D / 4 + 31) / 32 * 32;
    const int threads = static_cast<int>(want < 32 ? 32 : want > 1024 ? 1024 : want);
    launch_kernel<rms_norm_kernel>(static_cast<unsigned>(rows), threads, 0, stream, a);
    PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::kernels::cuda
