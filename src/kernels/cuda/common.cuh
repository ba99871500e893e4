// Helpers shared by the .cu files: the CUDA error check, element loads/stores by ElemType, warp/block reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "kernels/cuda/types.h"

namespace pagoda::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* condition, const char* message);
}

#define PAGODA_CUDA_CHECK(expr)                                                                         \
    do {                                                                                                \
        const cudaError_t pagoda_err_ = (expr);                                                         \
        if (pagoda_err_ != cudaSuccess)                                                                 \
            ::pagoda::detail::check_failed(__FILE__, __LINE__, #expr, cudaGetErrorString(pagoda_err_)); \
    } while (0)

// After a <<<>>> launch: configuration errors surface here, not at the next sync.
#define PAGODA_CUDA_CHECK_LAUNCH() PAGODA_CUDA_CHECK(cudaGetLastError())

#define PAGODA_KERNEL_REQUIRE(cond, msg)                                               \
    do {                                                                               \
        if (!(cond)) ::pagoda::detail::check_failed(__FILE__, __LINE__, #cond, (msg)); \
    } while (0)

namespace pagoda::kernels::cuda {

__device__ __forceinline__ float load_as_f32(const void* p, ElemType type, int64_t i) {
    switch (type) {
        case ElemType::BF16:
            return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
        case ElemType::F16:
            return __half2float(static_cast<const __half*>(p)[i]);
        case ElemType::F8E4M3:
            return static_cast<float>(static_cast<const __nv_fp8_e4m3*>(p)[i]);
        default:
            return static_cast<const float*>(p)[i];
    }
}

__device__ __forceinline__ void store_from_f32(void* p, ElemType type, int64_t i, float v) {
    switch (type) {
        case ElemType::BF16:
            static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
            break;
        case ElemType::F16:
            static_cast<__half*>(p)[i] = __float2half_rn(v);
            break;
        default:
            static_cast<float*>(p)[i] = v;
            break;
    }
}

// Typed conversions for templated kernels.
__device__ __forceinline__ float to_f32(float v) {
    return v;
}
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) {
    return __bfloat162float(v);
}
__device__ __forceinline__ float to_f32(__half v) {
    return __half2float(v);
}
template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
    return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) {
    return __float2half_rn(v);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float partial[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();  // partial may still be read by a previous call
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = lane < warps ? partial[lane] : 0.0f;
    return warp_sum(v);
}

// Lets `Kernel` take `bytes` (> 48 KB) of dynamic shared memory. The attribute belongs to a device, so it is set on
// each device's first launch: tensor-parallel ranks launch the same kernels on several GPUs. Devices past 63 set it
// at every launch (correct, only slower).
template <auto Kernel>
void allow_dynamic_smem(int bytes) {
    static std::atomic<uint64_t> devices_done{0};
    int device = 0;
    PAGODA_CUDA_CHECK(cudaGetDevice(&device));
    const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
    if (devices_done.load(std::memory_order_acquire) & bit) return;
    PAGODA_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    devices_done.fetch_or(bit, std::memory_order_release);
}

inline unsigned grid_for(int64_t n, int threads) {
    const int64_t blocks = (n + threads - 1) / threads;
    return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535LL * 512 ? 65535LL * 512 : blocks));
}

}  // namespace pagoda::kernels::cuda
