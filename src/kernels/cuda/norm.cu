// RMSNorm over rows of [T, H, D] (H = 1 for the hidden-state norms, H = heads for QK-norm), optionally fused with
// the residual add of the previous sub-layer. One block per row; statistics in fp32.
#include "kernels/cuda/common.cuh"

namespace pagoda::kernels::cuda {

namespace {

__global__ void rms_norm_kernel(RmsNormArgs a) {
    const int64_t row = blockIdx.x;
    const int64_t t = row / a.H, h = row % a.H;
    const float* x = a.x.data + t * a.x.stride_t + h * a.x.stride_h;
    float* out = a.out.data + t * a.out.stride_t + h * a.out.stride_h;
    float* res = a.residual.data ? a.residual.data + t * a.residual.stride_t + h * a.residual.stride_h : nullptr;
    float ss = 0.0f;
    // Each thread touches the same indices in both passes, so out may alias x.
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
    const int threads = a.D >= 2048 ? 512 : a.D >= 512 ? 256 : a.D > 64 ? 128 : 64;
    rms_norm_kernel<<<static_cast<unsigned>(rows), threads, 0, stream>>>(a);
    PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::kernels::cuda
