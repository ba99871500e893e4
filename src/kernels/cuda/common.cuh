// Helpers shared by the .cu files: the CUDA error check, element loads/stores by ElemType, warp/block reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <utility>

#include "kernels/cuda/device_caps.h"
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

// The type a weight-only GEMM multiplies in, which its input is rounded to: the weights' own type, bf16 for fp8 (e4m3)
// weights, whose GEMMs run on their dequantised bf16 copy.
template <typename W>
struct ComputeType {
    using T = W;
};
template <>
struct ComputeType<__nv_fp8_e4m3> {
    using T = __nv_bfloat16;
};

// An e4m3 weight as its dequantised bf16 copy holds it, bf16(q · scale) (e4m3 -> f16 is exact).
__host__ __device__ __forceinline__ float dequantize_e4m3(__nv_fp8_storage_t q, float scale) {
    return __bfloat162float(__float2bfloat16_rn(__half2float(__half(__nv_cvt_fp8_to_halfraw(q, __NV_E4M3))) * scale));
}

// An int4 weight as its dequantised bf16 copy holds it: bf16((q - zero) · scale), the product first rounded to f16 when
// the format dequantises in f16 (round_to F16; BF16 and F32 round straight to bf16). One definition for the int4 GEMV,
// the dequantisation kernel and the MoE pair passes, so that every path multiplies the same weights.
__host__ __device__ __forceinline__ float dequantize_int4(uint32_t q, float scale, float zero, ElemType round_to) {
    float v = (static_cast<float>(q) - zero) * scale;
    if (round_to == ElemType::F16) v = __half2float(__float2half_rn(v));
    return __bfloat162float(__float2bfloat16_rn(v));
}

// The activations every kernel computes alike, as the CPU kernels write them (kernels/cpu/internal.h): the fused
// GEMV's silu equals silu_mul's to the bit.
__device__ __forceinline__ float silu(float x) {
    return x / (1.0f + expf(-x));
}
__device__ __forceinline__ float sigmoid(float x) {
    return 1.0f / (1.0f + expf(-x));
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

// Calls f(group) for the block's groups of `groups`: blockIdx.x, or with kPersistent blockIdx.x, + gridDim.x, ...
// (a grid of resident_blocks, below), syncing the block between groups when kSync (f exchanges through shared memory).
template <bool kPersistent, bool kSync, class F>
__device__ __forceinline__ void for_each_block_group(int64_t groups, F&& f) {
    if constexpr (!kPersistent) {
        f(static_cast<int64_t>(blockIdx.x));
    } else {
        for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
            f(g);
            if constexpr (kSync) __syncthreads();
        }
    }
}

// How many blocks of `Kernel` (`threads` each, `smem` dynamic bytes) the current GPU holds at once: the grid of a
// persistent kernel whose blocks walk its work in strides of gridDim.x.
template <auto Kernel>
unsigned resident_blocks(int threads, size_t smem) {
    int device = 0, sms = 0, per_sm = 0;
    PAGODA_CUDA_CHECK(cudaGetDevice(&device));
    PAGODA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    PAGODA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, threads, smem));
    return static_cast<unsigned>(sms * per_sm > 0 ? sms * per_sm : 1);
}

// Whether a grid of `blocks` blocks of `Kernel` (`threads` each, no dynamic shared memory) is resident all at once:
// one wave. The kernels' early-load instances (a.early_loads: loads issued before the programmatic-launch wait) take
// only such grids. Their loads overlap the kernel before only in the blocks that start while it runs, and they keep
// more registers live; a grid of many waves lost with them on an H100 (session 40, pagoda_op_bench, early / not:
// QK-norm/RoPE over 256 decoding sequences 12.38 / 9.63 us, over a 2,048-token prefill 97.1 / 58.9 us; a 2,048-token
// prefill 67.2 / 65.1 ms with PAGODA_EARLY_LOADS=0), where batch-1 decode gains with them (166.6 / 160.6 tok/s).
// Asked of the GPU once for each block size (a process drives one kind of GPU).
template <auto Kernel>
bool one_wave(unsigned blocks, int threads) {
    static std::atomic<unsigned> resident[33] = {};  // by threads / 32: the grid of one wave, 0 until asked
    const int slot = threads / 32 <= 32 ? threads / 32 : 0;
    unsigned r = resident[slot].load(std::memory_order_relaxed);
    if (r == 0) {
        r = resident_blocks<Kernel>(threads, 0);
        resident[slot].store(r, std::memory_order_relaxed);
    }
    return blocks <= r;
}

// Sets a function attribute of `Kernel` to `value` once per device: attributes belong to a device, so each is set on
// that device's first launch (tensor-parallel ranks launch the same kernels on several GPUs). Devices past 63 set it
// at every launch (correct, only slower). One record per (kernel, attribute); a kernel passes the same value each time.
template <auto Kernel, cudaFuncAttribute kAttribute>
void set_attribute_once(int value) {
    static std::atomic<uint64_t> devices_done{0};
    int device = 0;
    PAGODA_CUDA_CHECK(cudaGetDevice(&device));
    const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
    if (devices_done.load(std::memory_order_acquire) & bit) return;
    PAGODA_CUDA_CHECK(cudaFuncSetAttribute(Kernel, kAttribute, value));
    devices_done.fetch_or(bit, std::memory_order_release);
}

// Lets `Kernel` take `bytes` (> 48 KB) of dynamic shared memory, or as much as the device allows beside the kernel's
// static shared memory where that is less: cudaFuncSetAttribute refuses a total past the opt-in limit, so a kernel
// that declares any __shared__ array (a norm's partial sums) cannot ask for max_block_smem() whole.
template <auto Kernel>
void allow_dynamic_smem(int bytes) {
    static const int static_bytes = [] {
        cudaFuncAttributes attr{};
        PAGODA_CUDA_CHECK(cudaFuncGetAttributes(&attr, Kernel));
        return static_cast<int>(attr.sharedSizeBytes);
    }();
    const int most = max_block_smem() - static_bytes;
    set_attribute_once<Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize>(bytes < most ? bytes : most);
}

// The most blocks of `Kernel` (`threads` each, `smem` dynamic bytes; clusters of more than 8 allowed) one thread block
// cluster can hold on this GPU: the blocks of a cluster share one GPC. Asked once per kernel (a kernel passes the same
// shape each time); 8, the portable size, where the driver does not say.
template <auto Kernel>
int max_cluster_blocks(int threads, size_t smem) {
    set_attribute_once<Kernel, cudaFuncAttributeNonPortableClusterSizeAllowed>(1);  // each device's first call
    static const int most = [threads, smem] {
        cudaLaunchConfig_t config{};
        config.gridDim = dim3(16);
        config.blockDim = dim3(threads);
        config.dynamicSmemBytes = smem;
        int size = 0;
        if (cudaOccupancyMaxPotentialClusterSize(&size, Kernel, &config) != cudaSuccess) {
            (void)cudaGetLastError();  // not sticky: clear it so the next check does not report it
            return 8;
        }
        return size;
    }();
    return most;
}

// Programmatic dependent launch (sm_90+). A kernel launched by launch_kernel below may start while the kernel before
// it in the stream is still running, so that its launch, its blocks' set-up and loads of what no kernel writes (the
// weights) overlap that kernel's tail: at batch 1 a decode step is ~400 kernels of a few microseconds each, and the
// gaps between them were a fifth of the step. The price: every kernel must call pdl_wait() before it reads what an
// earlier kernel wrote or writes what an earlier kernel reads, in every block, before any early return (a block that
// exits without waiting would let the kernel complete early and break the chain the next kernel waits on).
// pdl_launch_dependents() then lets the next kernel's blocks be scheduled; it is called right after the wait, so at
// most one kernel runs ahead. Compiled for sm_80 (and as compute_80 PTX) both are no-ops, and launch_kernel launches
// such a binary the classic way: the attribute is set only for kernels whose loaded binary is sm_90 or newer.
// Hence what a kernel may read before its wait: what no kernel writes (weights: the prefetch_* helpers), what the
// step's copies wrote before its first kernel (positions, slots, block tables), and what kernels two or more launches
// back wrote (the kernel before this one started only after its own wait, i.e. once those had completed): the KV rows
// of earlier steps. The early_* helpers load such data into registers or shared memory before the wait
// (CudaOps' default, off with PAGODA_EARLY_LOADS=0; kernel_prologue_test allows them there), so that after it only the
// previous kernel's output remains to be read.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// The prologue of every kernel that launch_kernel starts (tests/unit/kernels/kernel_prologue_test.cpp checks that each
// __global__ function in src/kernels/cuda begins with it).
#define PAGODA_KERNEL_PROLOGUE() \
    do {                         \
        pdl_wait();              \
        pdl_launch_dependents(); \
    } while (0)

// The architecture a loaded kernel's code was compiled for (major * 10 + minor): what its __CUDA_ARCH__ was. A
// compute_80 PTX JIT-compiled for a Hopper GPU (CUDA_FORCE_PTX_JIT=1, or a GPU newer than the build's SASS) has a
// binaryVersion of 90 or more but was compiled without griddepcontrol or clusters: its PTX version (80) says so.
inline int code_version(const cudaFuncAttributes& attr) {
    return attr.ptxVersion > 0 && attr.ptxVersion < attr.binaryVersion ? attr.ptxVersion : attr.binaryVersion;
}

// Whether launch_kernel may set the attribute for a kernel whose code targets `code_version` (above): sm_90 code or
// newer, unless PAGODA_CUDA_PDL=0 (for measuring what it gains) or the kernel's (mangled) name contains one of the
// comma-separated PAGODA_CUDA_PDL_OFF substrings (for finding which kernel it costs).
bool pdl_allowed(int code_version, const void* kernel);

namespace detail {
// cluster > 1: thread block clusters of that many blocks along x (sm_90 binaries only: cluster_launch_allowed).
template <auto Kernel, bool kEarly, typename... Args>
void launch(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, unsigned cluster, Args&&... args) {
    static std::atomic<int> pdl{-1};  // -1 not known yet, else 0 / 1
    int use = kEarly ? pdl.load(std::memory_order_relaxed) : 0;
    if (use < 0) {
        cudaFuncAttributes attr{};
        PAGODA_CUDA_CHECK(cudaFuncGetAttributes(&attr, Kernel));
        use = pdl_allowed(code_version(attr), reinterpret_cast<const void*>(Kernel)) ? 1 : 0;
        pdl.store(use, std::memory_order_relaxed);
    }
    cudaLaunchAttribute attributes[2] = {};
    unsigned count = 0;
    if (use) {
        attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attributes[count++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (cluster > 1) {
        attributes[count].id = cudaLaunchAttributeClusterDimension;
        attributes[count++].val.clusterDim = {cluster, 1, 1};
    }
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = attributes;
    config.numAttrs = count;
    PAGODA_CUDA_CHECK(cudaLaunchKernelEx(&config, Kernel, std::forward<Args>(args)...));
}
}  // namespace detail

// Launches Kernel<<<grid, block, smem, stream>>>(args...), with programmatic dependent launch where pdl_allowed says so
// (decided once per kernel: the binary the driver loaded for it does not change).
template <auto Kernel, typename... Args>
void launch_kernel(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
    detail::launch<Kernel, true>(grid, block, smem, stream, 1u, std::forward<Args>(args)...);
}

// Whether Kernel's code was compiled for sm_90 or newer (code_version), as thread block clusters need. Decided once
// per kernel.
template <auto Kernel>
bool cluster_launch_allowed() {
    static const bool allowed = [] {
        cudaFuncAttributes attr{};
        PAGODA_CUDA_CHECK(cudaFuncGetAttributes(&attr, Kernel));
        return code_version(attr) >= 90;
    }();
    return allowed;
}

// launch_kernel in clusters of `cluster` blocks along x (grid.x a multiple of it; 1: no clusters), for kernels whose
// blocks exchange through each other's shared memory. Only where cluster_launch_allowed.
template <auto Kernel, typename... Args>
void launch_kernel_cluster(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, unsigned cluster, Args&&... args) {
    detail::launch<Kernel, true>(grid, block, smem, stream, cluster, std::forward<Args>(args)...);
}

// The same without programmatic dependent launch: the kernel starts when the one before it has finished. For a kernel
// of fewer blocks than SMs that run long (the prefill delta rule: 128 blocks walking 2,048 tokens each). Let in early,
// its blocks are placed wherever the previous kernel's last blocks leave room, likely several to an SM, and the most
// crowded SM sets the time: on the H200 Qwen3.5-9B's 2,048-token prefill took 126 ms with it, 86 ms without (PDL on
// for every other kernel in both), while the kernel alone, back to back with itself, times the same either way.
template <auto Kernel, typename... Args>
void launch_kernel_after(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
    detail::launch<Kernel, false>(grid, block, smem, stream, 1u, std::forward<Args>(args)...);
}

// Whether p lies on a `bytes` boundary (a power of two): what a vector load of that width needs.
inline bool aligned(const void* p, uintptr_t bytes) {
    return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

inline unsigned grid_for(int64_t n, int threads) {
    const int64_t blocks = (n + threads - 1) / threads;
    return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535LL * 512 ? 65535LL * 512 : blocks));
}

}  // namespace pagoda::kernels::cuda
