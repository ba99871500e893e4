// Gated DeltaNet norms: the per-head L2 norm of q/k (in place) and the gated RMSNorm of the mixer output. One warp
// per (t, h) row: the rows are short (128 values), so a block per row would leave most of its threads idle.
#include "kernels/cuda/delta_net/delta_net_internal.cuh"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / 32;

__global__ void __launch_bounds__(kThreads) l2_norm_kernel(L2NormArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
    if (row >= a.T * a.H) return;  // whole warps
    const int lane = threadIdx.x & 31;
    float* x = a.x.data + (row / a.H) * a.x.stride_t + (row % a.H) * a.x.stride_h;
    float ss = 0.0f;
    for (int64_t d = lane; d < a.D; d += 32)
        ss += x[d] * x[d];
    const float s = 1.0f / sqrtf(warp_sum(ss) + a.eps);
    for (int64_t d = lane; d < a.D; d += 32)
        x[d] *= s;
}

// Each lane reads and writes the same indices in both passes, so out may alias x.
template <typename W>
__global__ void __launch_bounds__(kThreads) gated_rms_norm_kernel(GatedRmsNormArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
    if (row >= a.T * a.H) return;
    const int lane = threadIdx.x & 31;
    const int64_t t = row / a.H, h = row % a.H;
    const float* x = a.x.data + t * a.x.stride_t + h * a.x.stride_h;
    const float* z = a.z.data + t * a.z.stride_t + h * a.z.stride_h;
    float* out = a.out.data + t * a.out.stride_t + h * a.out.stride_h;
    __nv_bfloat16* out16 = a.out_bf16 ? static_cast<__nv_bfloat16*>(a.out_bf16) + row * a.D : nullptr;
    const W* w = static_cast<const W*>(a.weight);
    float ss = 0.0f;
    for (int64_t d = lane; d < a.D; d += 32)
        ss += x[d] * x[d];
    const float s = 1.0f / sqrtf(warp_sum(ss) / static_cast<float>(a.D) + a.eps);
    for (int64_t d = lane; d < a.D; d += 32) {
        const float v = x[d] * s * to_f32(w[d]) * silu(z[d]);
        out[d] = v;
        if (out16) out16[d] = from_f32<__nv_bfloat16>(v);
    }
}

unsigned row_blocks(int64_t rows) {
    return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

}  // namespace

void launch_l2_norm(const L2NormArgs& a, cudaStream_t stream) {
    const int64_t rows = a.T * a.H;
    if (rows == 0) return;
    PAGODA_KERNEL_REQUIRE(rows <= 0x7fffffffLL, "l2_norm: too many rows");
    launch_kernel<l2_norm_kernel>(row_blocks(rows), kThreads, 0, stream, a);
    PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_gated_rms_norm(const GatedRmsNormArgs& a, cudaStream_t stream) {
    const int64_t rows = a.T * a.H;
    if (rows == 0) return;
    PAGODA_KERNEL_REQUIRE(rows <= 0x7fffffffLL, "gated_rms_norm: too many rows");
    switch (a.weight_type) {
        case ElemType::BF16:
            launch_kernel<gated_rms_norm_kernel<__nv_bfloat16>>(row_blocks(rows), kThreads, 0, stream, a);
            break;
        case ElemType::F16:
            launch_kernel<gated_rms_norm_kernel<__half>>(row_blocks(rows), kThreads, 0, stream, a);
            break;
        default:
            launch_kernel<gated_rms_norm_kernel<float>>(row_blocks(rows), kThreads, 0, stream, a);
            break;
    }
    PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::kernels::cuda
