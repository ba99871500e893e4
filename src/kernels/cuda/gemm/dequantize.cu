// fp8 weight -> bf16 copy for the cuBLASLt GEMM when more tokens than the GEMV serves share a step (weight-only fp8:
// simple and exact to the GEMV's dequantisation; a GEMM that dequantises in its prologue would skip the copy).
// Each thread converts 8 consecutive weights of one row (one 8-byte load, one 16-byte store) where the shape allows,
// else one weight. The 8-weight kernel's blocks take 2,048 columns of a row (grid: column blocks x rows, looping past
// 65,535 rows), so no thread divides a 64-bit index (a ~70-instruction subroutine: four of them per 8 weights before,
// session 22), and the scale's place is two shifts for power-of-two blocks (column_groups.cuh).
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm/column_groups.cuh"
#include "kernels/cuda/gemm/gemv.h"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float scale_at(const WeightScales& s, int64_t n, int64_t k) {
    return __ldg(s.data + ColumnGroups(s.rows).of(n) * s.stride + ColumnGroups(s.cols).of(k));
}

__device__ __forceinline__ __nv_bfloat16 dequantize(__nv_fp8_storage_t q, float scale) {
    return __float2bfloat16_rn(dequantize_e4m3(q, scale));  // exact: the value is a bf16 already
}

// 8 weights per thread; the 8 share a scale (block columns are a multiple of 8: the launcher checks).
__global__ void dequantize8_kernel(DequantizeFp8Args a) {
    PAGODA_KERNEL_PROLOGUE();
    const int64_t k = (blockIdx.x * int64_t(kThreads) + threadIdx.x) * 8;
    if (k >= a.K) return;
    for (int64_t n = blockIdx.y; n < a.N; n += gridDim.y) {
        const uint2 raw = __ldg(reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(a.w) + n * a.w_stride + k));
        const auto* q = reinterpret_cast<const __nv_fp8_storage_t*>(&raw);
        const float s = scale_at(a.scales, n, k);
        __align__(16) __nv_bfloat16 out[8];
#pragma unroll
        for (int j = 0; j < 8; ++j)
            out[j] = dequantize(q[j], s);
        *reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(a.out) + n * a.K + k) =
            *reinterpret_cast<const uint4*>(out);
    }
}

__global__ void dequantize1_kernel(DequantizeFp8Args a) {
    PAGODA_KERNEL_PROLOGUE();
    const int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x;
    if (i >= a.N * a.K) return;
    const int64_t n = i / a.K, k = i % a.K;
    const auto q = static_cast<const __nv_fp8_storage_t*>(a.w)[n * a.w_stride + k];
    static_cast<__nv_bfloat16*>(a.out)[i] = dequantize(q, scale_at(a.scales, n, k));
}

}  // namespace

void launch_dequantize_fp8(const DequantizeFp8Args& a, cudaStream_t stream) {
    if (a.N == 0 || a.K == 0) return;
    PAGODA_KERNEL_REQUIRE(a.scales.data && a.scales.rows > 0 && a.scales.cols > 0, "fp8 dequantisation needs scales");
    const bool by8 =
        a.K % 8 == 0 && a.w_stride % 8 == 0 && a.scales.cols % 8 == 0 && aligned(a.w, 8) && aligned(a.out, 16);
    if (by8) {
        const dim3 grid(static_cast<unsigned>((a.K / 8 + kThreads - 1) / kThreads),
                        static_cast<unsigned>(std::min<int64_t>(a.N, 65535)));
        launch_kernel<dequantize8_kernel>(grid, kThreads, 0, stream, a);
    } else {
        const auto blocks = static_cast<unsigned>((a.N * a.K + kThreads - 1) / kThreads);
        launch_kernel<dequantize1_kernel>(blocks, kThreads, 0, stream, a);
    }
    PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::kernels::cuda
