// Weight-only int4 (AWQ, GPTQ, compressed-tensors W4A16, all repacked at load into one layout): the GEMV for one token
// and the bf16 copy of the weight that cuBLASLt takes for more. Both dequantise a weight the same way,
// bf16((q - zero) · scale) (the product first rounded to the format's scale dtype), so a token's result does not depend
// on the size of its batch. GEMV: WPR warps per output row; each lane reads 16 bytes (32 weights of one group: the
// launcher checks that the group size is a multiple of 32) with their scale and zero, and multiplies them with x
// rounded to bf16, in fp32. Bandwidth bound: the packed weight is read once, 4.25 bits a weight with group-128 scales
// and zeros.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm/gemv.h"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kWeightsPerLoad = 32;  // one 16-byte load
constexpr int kThreads = 256;

__device__ __forceinline__ float bf16_round(float v) {
    return __bfloat162float(__float2bfloat16_rn(v));
}

// Scale and zero of weight (n, k).
__device__ __forceinline__ float2 group_of(const Int4Weight& w, int64_t K, int64_t n, int64_t k) {
    const int64_t i = n * (K / w.group_size) + k / w.group_size;
    return make_float2(__ldg(w.scales + i), w.zeros ? __ldg(w.zeros + i) : 8.0f);
}

// bf16 of the format's dequantised weight (rounded to its scales' dtype first: an f16 or bf16 product).
__device__ __forceinline__ float dequantize(uint32_t q, float2 sz, ElemType round_to) {
    return dequantize_int4(q, sz.x, sz.y, round_to);
}

// This lane's share of row n: from 32-weight chunk `first` on, every `step`-th chunk.
__device__ __forceinline__ float row_partial(const GemvInt4Args& a, int64_t n, int64_t first, int64_t step) {
    const auto* row = static_cast<const uint8_t*>(a.w.data) + n * a.w.row_bytes;
    float acc = 0.0f;
#pragma unroll 4
    for (int64_t k = first * kWeightsPerLoad; k < a.K; k += step * kWeightsPerLoad) {
        const uint4 raw = __ldg(reinterpret_cast<const uint4*>(row + k / 2));
        const float2 sz = group_of(a.w, a.K, n, k);
        const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // word i holds weights k + 8i .. k + 8i + 7, nibble j weight k + 8i + j
            const float4 x0 = __ldg(reinterpret_cast<const float4*>(a.x + k + 8 * i));
            const float4 x1 = __ldg(reinterpret_cast<const float4*>(a.x + k + 8 * i + 4));
            const float xs[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
            for (int j = 0; j < 8; ++j)
                acc += dequantize((words[i] >> (4 * j)) & 0xFu, sz, a.w.round_to) * bf16_round(xs[j]);
        }
    }
    return acc;
}

template <int WPR>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) gemv_int4_kernel(GemvInt4Args a) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t n = blockIdx.x * int64_t(kWarpsPerBlock / WPR) + warp / WPR;
    const bool active = n < a.N;
    PAGODA_KERNEL_PROLOGUE();
    float acc = active ? warp_sum(row_partial(a, n, int64_t(warp % WPR) * 32 + lane, int64_t(WPR) * 32)) : 0.0f;
    if constexpr (WPR > 1) {  // the row's warps meet in shared memory
        __shared__ float partial[kWarpsPerBlock];
        if (lane == 0) partial[warp] = acc;
        __syncthreads();
        if (warp % WPR != 0) return;
#pragma unroll
        for (int j = 1; j < WPR; ++j)
            acc += partial[warp + j];
    }
    if (active && lane == 0) a.y[n] = acc + (a.bias ? load_as_f32(a.bias, a.bias_type, n) : 0.0f);
}

// Any group size and alignment: weight by weight, one warp per row (tiny models and odd shapes in tests).
__global__ void gemv_int4_scalar_kernel(GemvInt4Args a) {
    const int lane = threadIdx.x & 31;
    const int64_t n = blockIdx.x * int64_t(kWarpsPerBlock) + (threadIdx.x >> 5);
    PAGODA_KERNEL_PROLOGUE();
    if (n >= a.N) return;
    const auto* row = static_cast<const uint8_t*>(a.w.data) + n * a.w.row_bytes;
    float acc = 0.0f;
    for (int64_t k = lane; k < a.K; k += 32) {
        const uint32_t q = (row[k / 2] >> (4 * (k % 2))) & 0xFu;
        acc += dequantize(q, group_of(a.w, a.K, n, k), a.w.round_to) * bf16_round(a.x[k]);
    }
    acc = warp_sum(acc);
    if (lane == 0) a.y[n] = acc + (a.bias ? load_as_f32(a.bias, a.bias_type, n) : 0.0f);
}

// 8 weights (one 4-byte word) per thread; the launcher checks that the 8 share a group.
__global__ void dequantize_int4_by8_kernel(DequantizeInt4Args a) {
    const int64_t words = a.K / 8;
    const int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x;
    PAGODA_KERNEL_PROLOGUE();
    if (i >= a.N * words) return;
    const int64_t n = i / words, k = (i % words) * 8;
    const uint32_t word =
        __ldg(reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(a.w.data) + n * a.w.row_bytes + k / 2));
    const float2 sz = group_of(a.w, a.K, n, k);
    __align__(16) __nv_bfloat16 out[8];
#pragma unroll
    for (int j = 0; j < 8; ++j)
        out[j] = __float2bfloat16_rn(dequantize((word >> (4 * j)) & 0xFu, sz, a.w.round_to));
    *reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(a.out) + n * a.K + k) = *reinterpret_cast<const uint4*>(out);
}

__global__ void dequantize_int4_scalar_kernel(DequantizeInt4Args a) {
    const int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x;
    PAGODA_KERNEL_PROLOGUE();
    if (i >= a.N * a.K) return;
    const int64_t n = i / a.K, k = i % a.K;
    const uint8_t byte = static_cast<const uint8_t*>(a.w.data)[n * a.w.row_bytes + k / 2];
    static_cast<__nv_bfloat16*>(a.out)[i] =
        __float2bfloat16_rn(dequantize((byte >> (4 * (k % 2))) & 0xFu, group_of(a.w, a.K, n, k), a.w.round_to));
}

bool aligned(const void* p, uintptr_t bytes) {
    return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

void require_weight(const Int4Weight& w, int64_t K) {
    PAGODA_KERNEL_REQUIRE(w.data && w.scales && w.group_size > 0 && K % w.group_size == 0 && K % 2 == 0,
                          "int4 weight needs scales and a group size dividing an even K");
}

// As the fp8 GEMV: rows that fill the GPU get one warp each, fewer rows four.
constexpr int64_t kOneWarpRows = 8192;

}  // namespace

void launch_gemv_int4(const GemvInt4Args& a, cudaStream_t stream) {
    if (a.N == 0) return;
    require_weight(a.w, a.K);
    const bool vec =
        a.w.group_size % kWeightsPerLoad == 0 && a.w.row_bytes % 16 == 0 && aligned(a.w.data, 16) && aligned(a.x, 16);
    if (!vec) {
        const auto blocks = static_cast<unsigned>((a.N + kWarpsPerBlock - 1) / kWarpsPerBlock);
        launch_kernel<gemv_int4_scalar_kernel>(blocks, kWarpsPerBlock * 32, 0, stream, a);
    } else if (a.N >= kOneWarpRows) {
        const auto blocks = static_cast<unsigned>((a.N + kWarpsPerBlock - 1) / kWarpsPerBlock);
        launch_kernel<gemv_int4_kernel<1>>(blocks, kWarpsPerBlock * 32, 0, stream, a);
    } else {
        constexpr int kRowsPerBlock = kWarpsPerBlock / 4;
        const auto blocks = static_cast<unsigned>((a.N + kRowsPerBlock - 1) / kRowsPerBlock);
        launch_kernel<gemv_int4_kernel<4>>(blocks, kWarpsPerBlock * 32, 0, stream, a);
    }
    PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_dequantize_int4(const DequantizeInt4Args& a, cudaStream_t stream) {
    if (a.N == 0 || a.K == 0) return;
    require_weight(a.w, a.K);
    const bool by8 =
        a.K % 8 == 0 && a.w.group_size % 8 == 0 && a.w.row_bytes % 4 == 0 && aligned(a.w.data, 4) && aligned(a.out, 16);
    const int64_t work = by8 ? a.N * (a.K / 8) : a.N * a.K;
    const auto blocks = static_cast<unsigned>((work + kThreads - 1) / kThreads);
    if (by8)
        launch_kernel<dequantize_int4_by8_kernel>(blocks, kThreads, 0, stream, a);
    else
        launch_kernel<dequantize_int4_scalar_kernel>(blocks, kThreads, 0, stream, a);
    PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::kernels::cuda
