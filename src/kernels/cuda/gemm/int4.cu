// Weight-only int4 (AWQ, GPTQ, compressed-tensors W4A16, all repacked at load into one layout) and int8 (GPTQ 8-bit,
// the same layout with one value a byte): the GEMV for one token and the bf16 copy of the weight that cuBLASLt takes
// for more. Both dequantise a weight the same way, bf16((q - zero) · scale) (the product first rounded to the format's
// scale dtype), so a token's result does not depend on the size of its batch. Every kernel is templated on the bits
// of a value (4 or 8). GEMV: WPR warps per output row; each lane reads 16 bytes (32 weights at 4 bits, 16 at 8, of
// one group: the launcher checks that the group size is a multiple of that) with their scale and zero, and multiplies
// them with x rounded to bf16, in fp32. The packed weight is read once, 4.25 (8.25) bits a weight with group-128
// scales and zeros; the dequantisation makes the kernel instruction-bound, so each block rounds x to bf16 once into
// shared memory rather than every lane rounding its x per weight (as the fp8 GEMV does, gemv.cu).
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/device_caps.h"
#include "kernels/cuda/gemm/column_groups.cuh"
#include "kernels/cuda/gemm/gemv.h"
#include "kernels/cuda/gemm/int4_dequant.cuh"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = 256;
constexpr int kPartialBytes = kWarpsPerBlock * sizeof(float);  // the row's warps' sums, before the staged x

// The packing of `kBits`-bit values: per 16-byte load, per 32-bit word, the mask of one value, the symmetric zero.
template <int kBits>
struct Packing {
    static_assert(kBits == 4 || kBits == 8);
    static constexpr int kPerLoad = 128 / kBits;
    static constexpr int kPerWord = 32 / kBits;
    static constexpr uint32_t kMask = (1u << kBits) - 1;
    static constexpr float kSymmetricZero = kBits == 8 ? 128.0f : 8.0f;
    // Byte offset of weight k in a row (k a multiple of 8 / kBits).
    static __device__ __forceinline__ int64_t byte_of(int64_t k) { return k * kBits / 8; }
    // Weight k of a row, one by one (any k).
    static __device__ __forceinline__ uint32_t at(const uint8_t* row, int64_t k) {
        if constexpr (kBits == 8) return row[k];
        return (row[k / 2] >> (4 * (k % 2))) & kMask;
    }
};

__device__ __forceinline__ float bf16_round(float v) {
    return __bfloat162float(__float2bfloat16_rn(v));
}

// Row n's group scales and zero points, found once a row, and the columns' groups (column_groups.cuh: no 64-bit
// division a load).
template <int kBits>
struct GroupRow {
    const float* scales;
    const float* zeros;
    ColumnGroups groups;
    __device__ __forceinline__ GroupRow(const Int4Weight& w, int64_t K, int64_t n)
        : scales(w.scales + n * (K / w.group_size)),
          zeros(w.zeros ? w.zeros + n * (K / w.group_size) : nullptr),
          groups(w.group_size) {}
    // Scale and zero of weight k of the row.
    __device__ __forceinline__ float2 at(int64_t k) const {
        const int64_t g = groups.of(k);
        return make_float2(__ldg(scales + g), zeros ? __ldg(zeros + g) : Packing<kBits>::kSymmetricZero);
    }
};

// Scale and zero of weight (n, k) (the kernels that take one or a few weights a row).
template <int kBits>
__device__ __forceinline__ float2 group_of(const Int4Weight& w, int64_t K, int64_t n, int64_t k) {
    return GroupRow<kBits>(w, K, n).at(k);
}

// bf16 of the format's dequantised weight (rounded to its scales' dtype first: an f16 or bf16 product).
__device__ __forceinline__ float dequantize(uint32_t q, float2 sz, ElemType round_to) {
    return dequantize_int4(q, sz.x, sz.y, round_to);
}

// x rounded to bf16 in shared memory, one 16-byte load's kPerLoad values a chunk, each chunk followed by 8 bytes of
// padding: lane l reads chunk (first + l) (+ steps), so unpadded chunks 64 (32) bytes apart would put the lanes'
// 8-byte reads in a few banks; 72 (40) bytes apart a half-warp's reads fall in distinct banks.
template <int kBits>
struct StagedX {
    static constexpr int kChunkBytes = Packing<kBits>::kPerLoad * 2 + 8;
    static size_t bytes(int64_t K) { return size_t(K / Packing<kBits>::kPerLoad) * kChunkBytes; }
    // Four values from weight k on (k a multiple of 4).
    static __device__ __forceinline__ float4 at(const unsigned char* xs, int64_t k) {
        constexpr int64_t kPer = Packing<kBits>::kPerLoad;
        const uint2 raw = *reinterpret_cast<const uint2*>(xs + (k / kPer) * kChunkBytes + (k % kPer) * 2);
        const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
        const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
        return make_float4(lo.x, lo.y, hi.x, hi.y);
    }
    // The block writes x (K a multiple of kPerLoad, 16-byte aligned); the caller syncs.
    static __device__ __forceinline__ void stage(const float* x, int64_t K, unsigned char* xs) {
        constexpr int64_t kPer = Packing<kBits>::kPerLoad;
        for (int64_t k = int64_t(threadIdx.x) * 4; k < K; k += int64_t(blockDim.x) * 4) {
            const float4 v = *reinterpret_cast<const float4*>(x + k);
            auto* dst = reinterpret_cast<__nv_bfloat162*>(xs + (k / kPer) * kChunkBytes + (k % kPer) * 2);
            dst[0] = __floats2bfloat162_rn(v.x, v.y);
            dst[1] = __floats2bfloat162_rn(v.z, v.w);
        }
    }
};

// This lane's share of row n: from 16-byte chunk `first` on, every `step`-th chunk.
// kRound: the format's rounding when it is F16 or BF16 (weights dequantised two at a time, dequantize_word); F32
// (unrounded): one by one.
template <int kBits, ElemType kRound>
__device__ __forceinline__ float row_partial(const GemvInt4Args& a, const unsigned char* xs, int64_t n, int64_t first,
                                             int64_t step) {
    using P = Packing<kBits>;
    const auto* row = static_cast<const uint8_t*>(a.w.data) + n * a.w.row_bytes;
    const GroupRow<kBits> groups(a.w, a.K, n);
    float acc = 0.0f;
#pragma unroll 4
    for (int64_t k = first * P::kPerLoad; k < a.K; k += step * P::kPerLoad) {
        const uint4 raw = __ldg(reinterpret_cast<const uint4*>(row + P::byte_of(k)));
        const float2 sz = groups.at(k);
        const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
        constexpr bool kPacked = kRound != ElemType::F32;
        const PackedGroup<kBits, kRound == ElemType::BF16> group(sz.x, sz.y);  // (unused unless kPacked)
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // word i holds weights k + kPerWord·i ..., value j weight k + kPerWord·i + j
            float wv[P::kPerWord];
            if constexpr (kPacked) {
                dequantize_word<kBits>(words[i], group, wv);
            } else {
#pragma unroll
                for (int j = 0; j < P::kPerWord; ++j)
                    wv[j] = dequantize((words[i] >> (kBits * j)) & P::kMask, sz, a.w.round_to);
            }
#pragma unroll
            for (int j = 0; j < P::kPerWord; j += 4) {
                const float4 x4 = StagedX<kBits>::at(xs, k + P::kPerWord * i + j);
                acc += wv[j] * x4.x;
                acc += wv[j + 1] * x4.y;
                acc += wv[j + 2] * x4.z;
                acc += wv[j + 3] * x4.w;
            }
        }
    }
    return acc;
}

// Asks L2 for the first chunks row_partial loads (one request per 128-byte line), before pdl_wait and the staging of
// x: weights are written by no kernel, so they stream in while the previous kernel finishes and x is staged. At one
// token a lane takes one to four 16-byte chunks a row (4,096 inputs over 4 warps: one), so a block's weight loads
// otherwise wait a whole L2 round trip for x first (session 24, H100, --cold: 4,096 x 4,096 AWQ in 16.7 µs, 0.5 TB/s).
template <int kBits, int WPR>
__device__ __forceinline__ void prefetch_first_loads(const GemvInt4Args& a, int64_t n, int warp, int lane) {
    using P = Packing<kBits>;
    if (n >= a.N || (lane & 7) != 0) return;
    const auto* row = static_cast<const uint8_t*>(a.w.data) + n * a.w.row_bytes;
    const int64_t first = int64_t(warp % WPR) * 32 + lane, step = int64_t(WPR) * 32;
#pragma unroll
    for (int u = 0; u < 4; ++u) {
        const int64_t k = (first + u * step) * P::kPerLoad;
        if (k < a.K) asm volatile("prefetch.global.L2 [%0];" ::"l"(row + P::byte_of(k)));
    }
}

// Output row group · (kWarpsPerBlock / WPR) + warp / WPR of the block's group, WPR warps a row. Every thread of the
// block calls it (the WPR > 1 exchange syncs the block).
template <int kBits, int WPR, ElemType kRound>
__device__ __forceinline__ void gemv_int4_rows(const GemvInt4Args& a, const unsigned char* xs, float* partial,
                                               int64_t group, int warp, int lane) {
    const int64_t n = group * int64_t(kWarpsPerBlock / WPR) + warp / WPR;
    const bool active = n < a.N;
    float acc = active
                    ? warp_sum(row_partial<kBits, kRound>(a, xs, n, int64_t(warp % WPR) * 32 + lane, int64_t(WPR) * 32))
                    : 0.0f;
    if constexpr (WPR > 1) {  // the row's warps meet in shared memory
        if (lane == 0) partial[warp] = acc;
        __syncthreads();
        if (warp % WPR != 0) return;
#pragma unroll
        for (int j = 1; j < WPR; ++j)
            acc += partial[warp + j];
    }
    if (active && lane == 0) a.y[n] = acc + (a.bias ? load_as_f32(a.bias, a.bias_type, n) : 0.0f);
}

// A block takes row group blockIdx.x, or with kPersistent groups blockIdx.x, + gridDim.x, ... (as the fp8 GEMV:
// staged_gemv_persistent, gemv.h).
template <int kBits, int WPR, ElemType kRound, bool kPersistent>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) gemv_int4_kernel(GemvInt4Args a) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t n = blockIdx.x * int64_t(kWarpsPerBlock / WPR) + warp / WPR;
    prefetch_first_loads<kBits, WPR>(a, n, warp, lane);
    PAGODA_KERNEL_PROLOGUE();
    extern __shared__ __align__(16) unsigned char smem_raw[];  // the warps' sums, then x
    auto* partial = reinterpret_cast<float*>(smem_raw);
    unsigned char* xs = smem_raw + kPartialBytes;
    StagedX<kBits>::stage(a.x, a.K, xs);
    __syncthreads();
    const int64_t groups = (a.N + kWarpsPerBlock / WPR - 1) / (kWarpsPerBlock / WPR);
    for_each_block_group<kPersistent, (WPR > 1)>(
        groups, [&](int64_t g) { gemv_int4_rows<kBits, WPR, kRound>(a, xs, partial, g, warp, lane); });
}

// Any group size and alignment: weight by weight, one warp per row (tiny models and odd shapes in tests).
template <int kBits>
__global__ void gemv_int4_scalar_kernel(GemvInt4Args a) {
    const int lane = threadIdx.x & 31;
    const int64_t n = blockIdx.x * int64_t(kWarpsPerBlock) + (threadIdx.x >> 5);
    PAGODA_KERNEL_PROLOGUE();
    if (n >= a.N) return;
    const auto* row = static_cast<const uint8_t*>(a.w.data) + n * a.w.row_bytes;
    const GroupRow<kBits> groups(a.w, a.K, n);
    float acc = 0.0f;
    for (int64_t k = lane; k < a.K; k += 32) {
        const uint32_t q = Packing<kBits>::at(row, k);
        acc += dequantize(q, groups.at(k), a.w.round_to) * bf16_round(a.x[k]);
    }
    acc = warp_sum(acc);
    if (lane == 0) a.y[n] = acc + (a.bias ? load_as_f32(a.bias, a.bias_type, n) : 0.0f);
}

// 8 weights (kBits 4-byte words) per thread; the launcher checks that the 8 share a group.
template <int kBits>
__global__ void dequantize_int4_by8_kernel(DequantizeInt4Args a) {
    using P = Packing<kBits>;
    const int64_t chunks = a.K / 8;
    const int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x;
    PAGODA_KERNEL_PROLOGUE();
    if (i >= a.N * chunks) return;
    const int64_t n = i / chunks, k = (i % chunks) * 8;
    const auto* src =
        reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(a.w.data) + n * a.w.row_bytes + P::byte_of(k));
    uint32_t words[kBits / 4];
#pragma unroll
    for (int w = 0; w < kBits / 4; ++w)
        words[w] = __ldg(src + w);
    const float2 sz = group_of<kBits>(a.w, a.K, n, k);
    __align__(16) __nv_bfloat16 out[8];
#pragma unroll
    for (int j = 0; j < 8; ++j)
        out[j] = __float2bfloat16_rn(
            dequantize((words[j / P::kPerWord] >> (kBits * (j % P::kPerWord))) & P::kMask, sz, a.w.round_to));
    *reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(a.out) + n * a.K + k) = *reinterpret_cast<const uint4*>(out);
}

template <int kBits>
__global__ void dequantize_int4_scalar_kernel(DequantizeInt4Args a) {
    const int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x;
    PAGODA_KERNEL_PROLOGUE();
    if (i >= a.N * a.K) return;
    const int64_t n = i / a.K, k = i % a.K;
    const uint32_t q = Packing<kBits>::at(static_cast<const uint8_t*>(a.w.data) + n * a.w.row_bytes, k);
    static_cast<__nv_bfloat16*>(a.out)[i] =
        __float2bfloat16_rn(dequantize(q, group_of<kBits>(a.w, a.K, n, k), a.w.round_to));
}

void require_weight(const Int4Weight& w, int64_t K) {
    PAGODA_KERNEL_REQUIRE(
        w.data && w.scales && w.group_size > 0 && K % w.group_size == 0 && K % 2 == 0 && (w.bits == 4 || w.bits == 8),
        "int4/int8 weight needs 4 or 8 bits, scales and a group size dividing an even K");
}

// As the fp8 GEMV: rows that fill the GPU get one warp each, fewer rows four (staged_gemv_one_warp_rows, gemv.h).

template <int kBits, int WPR, ElemType kRound, bool kPersistent>
void launch_vec_kernel(const GemvInt4Args& a, size_t smem, cudaStream_t stream) {
    constexpr auto kernel = gemv_int4_kernel<kBits, WPR, kRound, kPersistent>;
    constexpr int kRowsPerBlock = kWarpsPerBlock / WPR;
    const auto groups = static_cast<unsigned>((a.N + kRowsPerBlock - 1) / kRowsPerBlock);
    allow_dynamic_smem<kernel>(max_block_smem());
    const unsigned blocks = kPersistent ? std::min(groups, resident_blocks<kernel>(kWarpsPerBlock * 32, smem)) : groups;
    launch_kernel<kernel>(blocks, kWarpsPerBlock * 32, smem, stream, a);
}

template <int kBits, int WPR, ElemType kRound>
void launch_vec_packing(const GemvInt4Args& a, size_t smem, cudaStream_t stream) {
    if (staged_gemv_persistent())
        launch_vec_kernel<kBits, WPR, kRound, true>(a, smem, stream);
    else
        launch_vec_kernel<kBits, WPR, kRound, false>(a, smem, stream);
}

// Formats that round to F16 or BF16 dequantise two weights at a time (dequantize_word); F32 (unrounded) one by one.
template <int kBits, int WPR>
void launch_vec(const GemvInt4Args& a, size_t smem, cudaStream_t stream) {
    if (a.w.round_to == ElemType::F16)
        launch_vec_packing<kBits, WPR, ElemType::F16>(a, smem, stream);
    else if (a.w.round_to == ElemType::BF16)
        launch_vec_packing<kBits, WPR, ElemType::BF16>(a, smem, stream);
    else
        launch_vec_packing<kBits, WPR, ElemType::F32>(a, smem, stream);
}

template <int kBits>
void run_gemv(const GemvInt4Args& a, cudaStream_t stream) {
    const size_t smem = kPartialBytes + StagedX<kBits>::bytes(a.K);
    const bool vec = a.w.group_size % Packing<kBits>::kPerLoad == 0 && a.w.row_bytes % 16 == 0 &&
                     aligned(a.w.data, 16) && aligned(a.x, 16) && smem <= size_t(max_block_smem());
    if (!vec) {
        const auto blocks = static_cast<unsigned>((a.N + kWarpsPerBlock - 1) / kWarpsPerBlock);
        launch_kernel<gemv_int4_scalar_kernel<kBits>>(blocks, kWarpsPerBlock * 32, 0, stream, a);
    } else if (a.N >= staged_gemv_one_warp_rows(false)) {
        launch_vec<kBits, 1>(a, smem, stream);
    } else {
        launch_vec<kBits, 4>(a, smem, stream);
    }
}

template <int kBits>
void run_dequantize(const DequantizeInt4Args& a, cudaStream_t stream) {
    const bool by8 =
        a.K % 8 == 0 && a.w.group_size % 8 == 0 && a.w.row_bytes % 4 == 0 && aligned(a.w.data, 4) && aligned(a.out, 16);
    const int64_t work = by8 ? a.N * (a.K / 8) : a.N * a.K;
    const auto blocks = static_cast<unsigned>((work + kThreads - 1) / kThreads);
    if (by8)
        launch_kernel<dequantize_int4_by8_kernel<kBits>>(blocks, kThreads, 0, stream, a);
    else
        launch_kernel<dequantize_int4_scalar_kernel<kBits>>(blocks, kThreads, 0, stream, a);
}

}  // namespace

void launch_gemv_int4(const GemvInt4Args& a, cudaStream_t stream) {
    if (a.N == 0) return;
    require_weight(a.w, a.K);
    PAGODA_KERNEL_REQUIRE(a.glu_rows == 0, "int4 GEMV: glu_rows is the tensor-core GEMV's alone");
    if (a.w.bits == 8)
        run_gemv<8>(a, stream);
    else
        run_gemv<4>(a, stream);
    PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_dequantize_int4(const DequantizeInt4Args& a, cudaStream_t stream) {
    if (a.N == 0 || a.K == 0) return;
    require_weight(a.w, a.K);
    if (a.w.bits == 8)
        run_dequantize<8>(a, stream);
    else
        run_dequantize<4>(a, stream);
    PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::kernels::cuda
