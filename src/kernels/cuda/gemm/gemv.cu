// y = x · Wᵀ for one token (decode at batch 1): one warp per output row streams the weight row once with 16-byte
// loads and multiplies it with x (read through the read-only cache). Weight bandwidth bound.
// With 16-bit weights x is rounded to the weights' type first, exactly as the cuBLASLt path (more tokens) rounds
// its input, so a row's result does not depend on how many tokens share the step (batch-invariant greedy output).
// fp8 weights are the same kernel reading 16 weights per 16-byte load, each group scaled as the cuBLASLt path's
// dequantised bf16 copy has it (and x rounded to bf16 as that path's input). Their dequantisation makes that kernel
// instruction-bound, so each block rounds x to bf16 once into shared memory instead of per row inside the loop:
// measured on an H200 (pagoda_op_bench, Qwen3-8B shapes), fp8 gate_up 94 -> 69 us and qkv 32 -> 28 us, while the
// same staging made the bf16 GEMVs slower (down 27.5 -> 34.7 us: the staging adds a block-wide read of x and a
// barrier before the first weight is used), so 16-bit weights read x as before.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/device_caps.h"
#include "kernels/cuda/gemm/column_groups.cuh"
#include "kernels/cuda/gemm/gemv.h"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kGemvUnroll = 4;                                     // 16-byte loads in flight per lane
constexpr int kPartialBytes = 2 * kWarpsPerBlock * sizeof(float);  // multiple of 16: staged x behind it stays aligned

// Whether the kernel stages x in shared memory (above): fp8 weights.
template <typename W>
constexpr bool kStagedX = std::is_same_v<W, __nv_fp8_e4m3>;

template <typename W>
struct Vec16;  // 16 bytes of weights and their fp32 values
template <>
struct Vec16<__nv_bfloat16> {
    static constexpr int kN = 8;
    __device__ static void load(const __nv_bfloat16* p, float* out) {
        const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
        const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float2 f = __bfloat1622float2(h[i]);
            out[2 * i] = f.x, out[2 * i + 1] = f.y;
        }
    }
};
template <>
struct Vec16<__half> {
    static constexpr int kN = 8;
    __device__ static void load(const __half* p, float* out) {
        const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
        const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float2 f = __half22float2(h[i]);
            out[2 * i] = f.x, out[2 * i + 1] = f.y;
        }
    }
};
template <>
struct Vec16<float> {
    static constexpr int kN = 4;
    __device__ static void load(const float* p, float* out) {
        const float4 v = __ldg(reinterpret_cast<const float4*>(p));
        out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
    }
};

template <>
struct Vec16<__nv_fp8_e4m3> {
    static constexpr int kN = 16;
    __device__ static void load(const __nv_fp8_e4m3* p, float* out) {
        const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
        const auto* pairs = reinterpret_cast<const __nv_fp8x2_storage_t*>(&raw);
#pragma unroll
        for (int i = 0; i < 8; ++i) {  // e4m3 -> f16 is exact
            const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pairs[i], __NV_E4M3)));
            out[2 * i] = f.x, out[2 * i + 1] = f.y;
        }
    }
};

// x as the GEMM sees it.
template <typename W>
__device__ __forceinline__ float4 round_like(float4 v) {
    using T = typename ComputeType<W>::T;
    if constexpr (std::is_same_v<T, float>) {
        return v;
    } else {
        return make_float4(to_f32(from_f32<T>(v.x)), to_f32(from_f32<T>(v.y)), to_f32(from_f32<T>(v.z)),
                           to_f32(from_f32<T>(v.w)));
    }
}

// acc + w · x over kN consecutive elements from k: x rounded as the GEMM sees it, from global memory (through the
// read-only cache) or, kStaged, from the block's bf16 copy xs in shared memory (16-byte loads). Summed four at a time
// in the same order either way, so both give the same sums.
template <typename W, int kN, bool kStaged>
__device__ __forceinline__ float dot_x(float acc, const float* w, const float* x, const __nv_bfloat16* xs, int64_t k) {
    if constexpr (kStaged) {
#pragma unroll
        for (int i = 0; i < kN; i += 8) {
            const uint4 raw = *reinterpret_cast<const uint4*>(xs + k + i);
            const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
            float xv[8];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float2 f = __bfloat1622float2(h[j]);
                xv[2 * j] = f.x, xv[2 * j + 1] = f.y;
            }
#pragma unroll
            for (int j = 0; j < 8; j += 4)
                acc +=
                    w[i + j] * xv[j] + w[i + j + 1] * xv[j + 1] + w[i + j + 2] * xv[j + 2] + w[i + j + 3] * xv[j + 3];
        }
    } else {
#pragma unroll
        for (int i = 0; i < kN; i += 4) {
            const float4 xv = round_like<W>(__ldg(reinterpret_cast<const float4*>(x + k + i)));
            acc += w[i] * xv.x + w[i + 1] * xv.y + w[i + 2] * xv.z + w[i + 3] * xv.w;
        }
    }
    return acc;
}

// Every thread of the block rounds its share of x (K a multiple of 4, x 16-byte aligned) to bf16 into xs; the caller
// syncs the block.
__device__ __forceinline__ void stage_x(const float* x, int64_t K, __nv_bfloat16* xs) {
    for (int64_t k = int64_t(threadIdx.x) * 4; k < K; k += int64_t(blockDim.x) * 4) {
        const float4 v = *reinterpret_cast<const float4*>(x + k);
        reinterpret_cast<__nv_bfloat162*>(xs + k)[0] = __floats2bfloat162_rn(v.x, v.y);
        reinterpret_cast<__nv_bfloat162*>(xs + k)[1] = __floats2bfloat162_rn(v.z, v.w);
    }
}

// Output row n's value y: to y, or added to add_to (linear_gated_add: the same sums).
__device__ __forceinline__ void store_row(const GemvArgs& a, int64_t n, float y) {
    if (a.add_to != nullptr)
        // The product rounded on its own (no fused multiply-add), as sigmoid_mul stores it before add reads it.
        a.add_to[n] = (a.add_gate != nullptr ? __fmul_rn(y, sigmoid(__ldcg(a.add_gate))) : y) + __ldcg(a.add_to + n);
    else
        a.y[n] = y;
}

// Row n's scales (fp8 weights): its row of the scale grid, found once a row, and the columns' groups.
struct ScaleRow {
    const float* data;
    ColumnGroups cols;
    __device__ __forceinline__ ScaleRow(const WeightScales& s, int64_t n)
        : data(s.data + ColumnGroups(s.rows).of(n) * s.stride), cols(s.cols) {}
    __device__ __forceinline__ float at(int64_t k) const { return __ldg(data + cols.of(k)); }
};

// fp8: the kN weights of one load (one scale block: launch_gemv checks that the block columns are a multiple of kN)
// as the dequantised bf16 weight holds them, bf16(q · scale). Dense weights: as loaded (no scales: s is unused).
template <typename W>
__device__ __forceinline__ void dequantize_group(const ScaleRow& scales, int64_t k, float* w) {
    if constexpr (std::is_same_v<W, __nv_fp8_e4m3>) {
        const float s = scales.at(k);
#pragma unroll
        for (int i = 0; i < Vec16<W>::kN; ++i)
            w[i] = __bfloat162float(__float2bfloat16_rn(w[i] * s));
    }
}

// This lane's share of x · w[n] (w: row n's weights): WPR warps share one row (each takes every WPR-th 16-byte column
// group), so a small N still puts enough loads in flight to reach the memory bandwidth.
template <typename W, int WPR, bool kStaged>
__device__ __forceinline__ float row_partial(const GemvArgs& a, const __nv_bfloat16* xs, const W* w, int64_t n,
                                             int64_t k) {
    constexpr int kN = Vec16<W>::kN;
    constexpr int64_t kStep = int64_t(WPR) * 32 * kN;  // elements between one lane's consecutive loads
    constexpr bool kFp8 = std::is_same_v<W, __nv_fp8_e4m3>;
    const ScaleRow scales(kFp8 ? a.scales : WeightScales{}, kFp8 ? n : 0);
    float acc = 0.0f;
    for (; k + int64_t(kGemvUnroll - 1) * kStep < a.K; k += int64_t(kGemvUnroll) * kStep) {
        float wv[kGemvUnroll][kN];
#pragma unroll
        for (int u = 0; u < kGemvUnroll; ++u)
            Vec16<W>::load(w + k + u * kStep, wv[u]);
#pragma unroll
        for (int u = 0; u < kGemvUnroll; ++u)
            dequantize_group<W>(scales, k + u * kStep, wv[u]);
#pragma unroll
        for (int u = 0; u < kGemvUnroll; ++u)
            acc = dot_x<W, kN, kStaged>(acc, wv[u], a.x, xs, k + u * kStep);
    }
    for (; k < a.K; k += kStep) {
        float wv[kN];
        Vec16<W>::load(w + k, wv);
        dequantize_group<W>(scales, k, wv);
        acc = dot_x<W, kN, kStaged>(acc, wv, a.x, xs, k);
    }
    return acc;
}

// Asks L2 for the weights row_partial's first iteration loads (one request per 128-byte line). Issued before
// pdl_wait: weights are written by no kernel, so they stream in while the previous kernel finishes (unless
// PAGODA_GEMV_PREFETCH=0: gemv_prefetch, gemv.h).
template <typename W, int WPR>
__device__ __forceinline__ void prefetch_first_loads(const GemvArgs& a, const W* w, int64_t k, int lane) {
    constexpr int64_t kStep = int64_t(WPR) * 32 * Vec16<W>::kN;
    if ((lane & 7) != 0 || !a.prefetch) return;
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u)
        if (k + u * kStep < a.K) asm volatile("prefetch.global.L2 [%0];" ::"l"(w + k + u * kStep));
}

// Output rows group · (kWarpsPerBlock / WPR) + warp / WPR of the block's group: one row per WPR warps; with Glu,
// output n is silu(row n) * row (n + glu_rows), the two sums taken exactly as for two separate rows, so the result
// equals linear then silu_mul to the bit. Every thread of the block calls it (the WPR > 1 exchange syncs the block).
template <typename W, int WPR, bool Glu, bool kStaged>
__device__ __forceinline__ void gemv_rows(const GemvArgs& a, const __nv_bfloat16* xs, float (*partial)[kWarpsPerBlock],
                                          int64_t group, int warp, int lane) {
    constexpr int kN = Vec16<W>::kN;
    const int64_t n = group * int64_t(kWarpsPerBlock / WPR) + warp / WPR;
    const bool active = n < a.N;
    const W* w = static_cast<const W*>(a.w) + (active ? n : 0) * a.w_stride;
    const W* w_up = Glu ? w + a.glu_rows * a.w_stride : nullptr;
    const int64_t k = active ? (int64_t(warp % WPR) * 32 + lane) * kN : a.K;
    float acc = warp_sum(row_partial<W, WPR, kStaged>(a, xs, w, n, k));
    float acc_up = Glu ? warp_sum(row_partial<W, WPR, kStaged>(a, xs, w_up, n + a.glu_rows, k)) : 0.0f;
    if constexpr (WPR > 1) {  // the row's warps meet in shared memory
        if (lane == 0) partial[0][warp] = acc, partial[1][warp] = acc_up;
        __syncthreads();
        if (warp % WPR != 0) return;
#pragma unroll
        for (int j = 1; j < WPR; ++j)
            acc += partial[0][warp + j], acc_up += partial[1][warp + j];
    }
    if (!active || lane != 0) return;
    const float y = acc + (a.bias ? load_as_f32(a.bias, a.bias_type, n) : 0.0f);
    if constexpr (Glu)
        a.y[n] = silu(y) * (acc_up + (a.bias ? load_as_f32(a.bias, a.bias_type, n + a.glu_rows) : 0.0f));
    else
        store_row(a, n, y);
}

// A block takes row group blockIdx.x, or with kPersistent (kernels that stage x only) groups blockIdx.x,
// + gridDim.x, ... for a grid of about as many blocks as fit the GPU at once, so that x is staged once a block
// rather than once every 2-8 rows (staged_gemv_persistent, gemv.h). Each row's sums are the same.
template <typename W, int WPR, bool Glu, bool kPersistent>
__global__ void __launch_bounds__(kWarpsPerBlock * 32, 1) gemv_vec_kernel(GemvArgs a) {
    constexpr int kN = Vec16<W>::kN;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t n = blockIdx.x * int64_t(kWarpsPerBlock / WPR) + warp / WPR;
    const bool active = n < a.N;
    const W* w = static_cast<const W*>(a.w) + (active ? n : 0) * a.w_stride;
    const W* w_up = Glu ? w + a.glu_rows * a.w_stride : nullptr;
    const int64_t k = active ? (int64_t(warp % WPR) * 32 + lane) * kN : a.K;
    prefetch_first_loads<W, WPR>(a, w, k, lane);
    if constexpr (Glu) prefetch_first_loads<W, WPR>(a, w_up, k, lane);
    PAGODA_KERNEL_PROLOGUE();
    // All of the block's shared memory is dynamic (the warps' partial sums, then staged x), so that launch_vec_wpr can
    // allow it the device's whole per-block limit.
    extern __shared__ __align__(16) unsigned char smem_raw[];
    auto* partial = reinterpret_cast<float(*)[kWarpsPerBlock]>(smem_raw);  // [2][kWarpsPerBlock]
    auto* xs = reinterpret_cast<__nv_bfloat16*>(smem_raw + kPartialBytes);
    if constexpr (kStagedX<W>) {
        stage_x(a.x, a.K, xs);
        __syncthreads();
    }
    const int64_t groups = (a.N + kWarpsPerBlock / WPR - 1) / (kWarpsPerBlock / WPR);
    for_each_block_group<kPersistent, (WPR > 1)>(
        groups, [&](int64_t g) { gemv_rows<W, WPR, Glu, kStagedX<W>>(a, xs, partial, g, warp, lane); });
}

// Any alignment, any weight type: element by element (odd shapes in tests and tiny models).
__device__ float scalar_row(const GemvArgs& a, int64_t n, int lane) {
    const bool fp8 = a.w_type == ElemType::F8E4M3;
    const ScaleRow scales(fp8 ? a.scales : WeightScales{}, fp8 ? n : 0);
    float acc = 0.0f;
    for (int64_t k = lane; k < a.K; k += 32) {
        float x = a.x[k];
        if (a.w_type == ElemType::BF16 || fp8) x = __bfloat162float(__float2bfloat16_rn(x));
        if (a.w_type == ElemType::F16) x = __half2float(__float2half_rn(x));
        float w = load_as_f32(a.w, a.w_type, n * a.w_stride + k);
        if (fp8) w = __bfloat162float(__float2bfloat16_rn(w * scales.at(k)));
        acc += w * x;
    }
    return warp_sum(acc) + (a.bias ? load_as_f32(a.bias, a.bias_type, n) : 0.0f);
}

__global__ void gemv_scalar_kernel(GemvArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    const int lane = threadIdx.x & 31;
    const int64_t n = blockIdx.x * int64_t(kWarpsPerBlock) + (threadIdx.x >> 5);
    if (n < a.N) {
        const float y = scalar_row(a, n, lane);
        if (a.glu_rows) {
            const float y_up = scalar_row(a, n + a.glu_rows, lane);
            if (lane == 0) a.y[n] = silu(y) * y_up;
        } else if (lane == 0) {
            store_row(a, n, y);
        }
    }
}

}  // namespace

bool gemv_prefetch() {
    static const bool on = [] {
        const char* env = std::getenv("PAGODA_GEMV_PREFETCH");
        return env == nullptr || std::strcmp(env, "0") != 0;
    }();
    return on;
}

bool staged_gemv_persistent() {
    static const bool on = [] {
        const char* env = std::getenv("PAGODA_GEMV_PERSISTENT");
        return env == nullptr || std::strcmp(env, "0") != 0;
    }();
    return on;
}

namespace {

template <typename W, int WPR, bool Glu, bool kPersistent>
void launch_vec_kernel(const GemvArgs& a, unsigned groups, size_t smem, cudaStream_t stream) {
    constexpr auto kernel = gemv_vec_kernel<W, WPR, Glu, kPersistent>;
    if constexpr (kStagedX<W>) allow_dynamic_smem<kernel>(max_block_smem());
    // Persistent: as many blocks as fit the GPU at once, at most one a group.
    const unsigned blocks = kPersistent ? std::min(groups, resident_blocks<kernel>(kWarpsPerBlock * 32, smem)) : groups;
    launch_kernel<kernel>(blocks, kWarpsPerBlock * 32, smem, stream, a);
}

template <typename W, int WPR>
void launch_vec_wpr(const GemvArgs& a, cudaStream_t stream) {
    constexpr int kRowsPerBlock = kWarpsPerBlock / WPR;
    const unsigned groups = static_cast<unsigned>((a.N + kRowsPerBlock - 1) / kRowsPerBlock);
    const size_t smem = kPartialBytes + (kStagedX<W> ? size_t(a.K) * sizeof(__nv_bfloat16) : 0);
    const bool persistent = kStagedX<W> && staged_gemv_persistent();
    if (a.glu_rows) {
        if (persistent)
            launch_vec_kernel<W, WPR, true, kStagedX<W>>(a, groups, smem, stream);
        else
            launch_vec_kernel<W, WPR, true, false>(a, groups, smem, stream);
    } else {
        if (persistent)
            launch_vec_kernel<W, WPR, false, kStagedX<W>>(a, groups, smem, stream);
        else
            launch_vec_kernel<W, WPR, false, false>(a, groups, smem, stream);
    }
}

// Rows that fill the GPU with one warp each get one; fewer rows get four warps each (staged_gemv_one_warp_rows for
// the kernels that stage x). A fused gate/up GEMV reads two rows per output and chooses as the unfused one over all
// its rows did, so both sum alike.
constexpr int64_t kOneWarpRows = 8192, kFp8OneWarpRows = 1024;

template <typename W>
void launch_vec(const GemvArgs& a, cudaStream_t stream) {
    if ((a.glu_rows ? 2 * a.N : a.N) >= (kStagedX<W> ? staged_gemv_one_warp_rows(true) : kOneWarpRows))
        launch_vec_wpr<W, 1>(a, stream);
    else
        launch_vec_wpr<W, 4>(a, stream);
}

}  // namespace

int64_t staged_gemv_one_warp_rows(bool fp8) {
    static const int64_t set = [] {
        const char* env = std::getenv("PAGODA_GEMV_ONE_WARP_ROWS");
        return env ? std::max<int64_t>(0, std::atoll(env)) : int64_t{-1};
    }();
    return set >= 0 ? set : fp8 ? kFp8OneWarpRows : kOneWarpRows;
}

void launch_gemv(const GemvArgs& args, cudaStream_t stream) {
    if (args.N == 0) return;
    GemvArgs a = args;
    a.prefetch = gemv_prefetch();
    PAGODA_KERNEL_REQUIRE(a.glu_rows == 0 || a.glu_rows == a.N, "a fused gate/up GEMV has one output per row pair");
    PAGODA_KERNEL_REQUIRE(a.add_to == nullptr || a.glu_rows == 0, "a GEMV adding its rows has no gated rows");
    PAGODA_KERNEL_REQUIRE(a.add_gate == nullptr || a.add_to != nullptr, "a GEMV's gate applies to what it adds");
    const unsigned blocks = static_cast<unsigned>((a.N + kWarpsPerBlock - 1) / kWarpsPerBlock);
    const bool fp8 = a.w_type == ElemType::F8E4M3;
    PAGODA_KERNEL_REQUIRE(!fp8 || (a.scales.data && a.scales.rows > 0 && a.scales.cols > 0), "fp8 GEMV needs scales");
    const int64_t vec = a.w_type == ElemType::F32 ? 4 : fp8 ? 16 : 8;  // elements per 16-byte load
    const bool vec_ok = a.K % vec == 0 && a.w_stride % vec == 0 && aligned(a.w, 16) && aligned(a.x, 16) &&
                        (!fp8 || (a.scales.cols % vec == 0 && kPartialBytes + 2 * a.K <= max_block_smem()));
    if (!vec_ok) {
        launch_kernel<gemv_scalar_kernel>(blocks, kWarpsPerBlock * 32, 0, stream, a);
    } else if (fp8) {
        launch_vec<__nv_fp8_e4m3>(a, stream);
    } else if (a.w_type == ElemType::BF16) {
        launch_vec<__nv_bfloat16>(a, stream);
    } else if (a.w_type == ElemType::F16) {
        launch_vec<__half>(a, stream);
    } else {
        launch_vec<float>(a, stream);
    }
    PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::kernels::cuda
