// The routed experts for a few tokens (decode at batch 1 to kPairMaxTokens): no routing at all. A (token, slot) pair's
// expert is read from topk_ids where it is needed, so a layer's experts take two kernels instead of five (input
// conversion, routing, the two grouped passes, the slot sum): GateUp computes h for every pair, a warp per (pair,
// C columns), reading x in fp32 and rounding it as the conversion would; Down gives each warp R columns of one slot
// and sums the slots in slot order in shared memory. With a handful of tokens two pairs rarely share an expert,
// so reading each pair's expert weights on its own costs little over the grouped passes' once per expert.
//
// The sums are taken exactly as the grouped GEMV passes take them (each lane walks k = lane*8, lane*8 + 256, ... and
// adds element by element; warp_sum; the slots summed in order by weight), so a token's output does not depend on
// which path its step took: the loads are only issued further ahead.
//
// fp8 (e4m3) experts are read as they are stored, each weight dequantised in registers as the dequantisation kernel
// writes it (bf16(q · scale), the scale of its 128x128 block), with x and h rounded to bf16: what the dequantised
// bf16 stack would give, without writing that stack (1.2 GB a layer for Qwen3-30B-A3B) at every step. int4 experts
// likewise: 8 weights (4 bytes) a load, each dequantised as launch_dequantize_int4 writes it (dequantize_int4, the
// scale and zero of its group), so the pair passes over an int4 stack equal those over its dequantised bf16 copy.
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/moe/moe_internal.cuh"

namespace pagoda::kernels::cuda {

namespace {

using moe::Int4Pair;
using moe::StackQuant;

constexpr int kWarps = 8;
constexpr int kVec = 8;  // elements per load (16 bytes of 16-bit weights, 8 of fp8, 4 of int4)
constexpr int64_t kLaneStep = 32 * kVec;

// A load's weights as they came from memory: kept raw until used (4 registers for 8 bf16 instead of 8 floats), so
// a warp can keep many rows' loads in flight. The pair passes are few blocks of short rows (Qwen3-30B-A3B: 8 experts
// of 768 x 2,048), so what bounds them is how many bytes each lane has asked for before it waits.
template <typename W>
struct RawLoad {
    using Type = uint4;
};
template <>
struct RawLoad<__nv_fp8_e4m3> {
    using Type = uint2;
};
template <>
struct RawLoad<Int4Pair> {
    using Type = uint32_t;
};

// The load of weights [k, k + 8) of the row at p (k in weights: half a byte each for int4).
template <typename W>
__device__ __forceinline__ typename RawLoad<W>::Type load_raw(const W* p, int64_t k) {
    if constexpr (std::is_same_v<W, Int4Pair>)
        return __ldg(reinterpret_cast<const uint32_t*>(p + k / 2));
    else
        return __ldg(reinterpret_cast<const typename RawLoad<W>::Type*>(p + k));
}

// The 8 weights of a load of expert row `row` (counted over the whole stack, as its scale grid is) from column k on.
template <typename W>
__device__ __forceinline__ void unpack(const typename RawLoad<W>::Type& raw, const StackQuant& quant, int64_t row,
                                       int64_t k, float* out) {
    if constexpr (std::is_same_v<W, __nv_fp8_e4m3>) {
        moe::unpack_fp8(raw, quant, row, k, out);  // one scale: block columns % 8 == 0
    } else if constexpr (std::is_same_v<W, Int4Pair>) {
        moe::unpack_int4(raw, quant, row, k, out);  // one group: group % 8 == 0
    } else {
        const W* v = reinterpret_cast<const W*>(&raw);
#pragma unroll
        for (int i = 0; i < kVec; ++i)
            out[i] = to_f32(v[i]);
    }
}

// 8 consecutive 16-bit values as fp32 (one 16-byte load).
template <typename T>
__device__ __forceinline__ void load8(const T* p, float* out) {
    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
    const T* v = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < kVec; ++i)
        out[i] = to_f32(v[i]);
}

// x[k .. k+8) in fp32, rounded to T as launch_convert_rows rounds the grouped passes' input.
template <typename T>
__device__ __forceinline__ void load8_rounded(const float* p, float* out) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(p)), b = __ldg(reinterpret_cast<const float4*>(p + 4));
    const float v[kVec] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int i = 0; i < kVec; ++i)
        out[i] = to_f32(from_f32<T>(v[i]));
}

// This lane's share of the dot products of R weight rows (stack rows `rows`, all of length K) with one input row:
// x in fp32 (In = float, rounded to the compute type) or h in the compute type. U loads per row are issued before
// the first is used. Each row's sum runs over k = lane*8, lane*8 + 256, ... in order whatever R and U are.
template <typename W, typename In, int R, int U>
__device__ __forceinline__ void lane_dots(const W* const (&w)[R], const int64_t (&rows)[R], const StackQuant& quant,
                                          const In* in, int64_t K, int lane, float (&acc)[R]) {
    using T = typename ComputeType<W>::T;
    for (int64_t k0 = int64_t(lane) * kVec; k0 < K; k0 += U * kLaneStep) {
        typename RawLoad<W>::Type raw[R][U];
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int r = 0; r < R; ++r)
                raw[r][u] =
                    k0 + u * kLaneStep < K ? load_raw<W>(w[r], k0 + u * kLaneStep) : typename RawLoad<W>::Type{};
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int64_t k = k0 + u * kLaneStep;
            if (k >= K) break;
            float av[kVec];
            if constexpr (std::is_same_v<In, float>)
                load8_rounded<T>(in + k, av);
            else
                load8<T>(in + k, av);
#pragma unroll
            for (int r = 0; r < R; ++r) {
                float wv[kVec];
                unpack<W>(raw[r][u], quant, rows[r], k, wv);
#pragma unroll
                for (int v = 0; v < kVec; ++v)
                    acc[r] += wv[v] * av[v];
            }
        }
    }
}

// The stack index of expert `id`, or -1 where this call does not hold it (an id outside the model's experts, or with
// expert parallelism another rank's expert: the stacks start at a.first_expert).
__device__ __forceinline__ int32_t local_expert(const MoeExpertsArgs& a, int32_t id) {
    const int64_t e = int64_t(id) - a.first_expert;
    return e >= 0 && e < a.E ? static_cast<int32_t>(e) : -1;
}

// h[p, i] = silu(gate_e[i] · x[t]) · (up_e[i] · x[t]) for pair p = t*k + j, e = ids[p]; each warp takes C columns
// (2C rows); grid (I / (kWarps C), T*k).
template <typename W, int C, int U>
__global__ void __launch_bounds__(kWarps * 32) pair_gate_up_kernel(MoeExpertsArgs a, typename ComputeType<W>::T* h) {
    PAGODA_KERNEL_PROLOGUE();
    using T = typename ComputeType<W>::T;
    const int lane = threadIdx.x & 31;
    const int64_t p = blockIdx.y, i0 = (int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * C;
    const int32_t e = local_expert(a, a.topk_ids[p]);
    if (i0 >= a.I || e < 0) return;
    const W* expert = static_cast<const W*>(a.gate_up.data) + e * a.gate_up.expert_stride;
    const W* w[2 * C];
    int64_t rows[2 * C];
#pragma unroll
    for (int c = 0; c < C; ++c) {
        const int64_t i = i0 + c < a.I ? i0 + c : a.I - 1;  // a partial group repeats its last column, unused
        w[2 * c] = expert + i * a.gate_up.row_stride, rows[2 * c] = e * 2 * a.I + i;
        w[2 * c + 1] = expert + (a.I + i) * a.gate_up.row_stride, rows[2 * c + 1] = e * 2 * a.I + a.I + i;
    }
    float acc[2 * C] = {};
    const StackQuant quant{a.gate_up_scales, a.gate_up_zeros, a.int4_round_to};
    lane_dots<W, float, 2 * C, U>(w, rows, quant, a.x + (p / a.k) * a.x_stride, a.H, lane, acc);
#pragma unroll
    for (int c = 0; c < C; ++c) {
        const float g = warp_sum(acc[2 * c]), u = warp_sum(acc[2 * c + 1]);
        if (lane == 0 && i0 + c < a.I) h[p * a.I + i0 + c] = from_f32<T>(silu(g) * u);
    }
}

// The most slots a token may have on this path (Qwen's MoE models take 8 or 10).
constexpr int kMaxSlots = 32;

// With a.early_loads: asks L2 for the down rows of this warp's first task (below) before the programmatic-launch
// wait, so that they stream in while the gate/up pass finishes. Its expert comes from topk_ids, which the kernel two
// launches back wrote (the router's top-k, or a copy: common.cuh), and the weights from no kernel. At Qwen3-30B-A3B's
// shape each warp has one task, so this is all the pass's weights.
template <typename W, int R>
__device__ __forceinline__ void prefetch_down_rows(const MoeExpertsArgs& a, int groups) {
    const int lane = threadIdx.x & 31, task = threadIdx.x >> 5;
    if (!a.early_loads || task >= groups * a.k) return;
    const int g = task / static_cast<int>(a.k), j = task % static_cast<int>(a.k);
    const int64_t t = blockIdx.y, ng = int64_t(blockIdx.x) * groups * R + int64_t(g) * R;
    const int32_t e = local_expert(a, a.topk_ids[t * a.k + j]);
    if (ng >= a.H || e < 0) return;
    const int64_t row_bytes = std::is_same_v<W, Int4Pair> ? a.I / 2 : a.I * int64_t(sizeof(W));
    for (int r = 0; r < R && ng + r < a.H; ++r) {
        const auto* row = reinterpret_cast<const char*>(static_cast<const W*>(a.down.data) + e * a.down.expert_stride +
                                                        (ng + r) * a.down.row_stride);
        const auto* line = reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(row) & ~uintptr_t(127));
        for (line += lane * 128; line < row + row_bytes; line += 32 * 128)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(line));
    }
}

// out[t, n] = Σ_j w[t, j] · (down_e[n] · h[t*k + j]) in slot order, e = ids[t*k + j], skipping experts not held here.
// A block takes `groups` x R consecutive columns of one token; a warp's task is R columns of one slot (R rows of
// one expert against the same h), and the block's warps share the groups * k tasks.
template <typename W, int R, int U>
__global__ void __launch_bounds__(kWarps * 32)
    pair_down_kernel(MoeExpertsArgs a, const typename ComputeType<W>::T* h, int groups) {
    prefetch_down_rows<W, R>(a, groups);
    PAGODA_KERNEL_PROLOGUE();
    using T = typename ComputeType<W>::T;
    __shared__ float dots[kWarps * R][kMaxSlots];  // [column in block][slot]; groups <= kWarps
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int cols = groups * R;
    const int64_t t = blockIdx.y, n0 = int64_t(blockIdx.x) * cols;
    for (int task = warp; task < groups * a.k; task += kWarps) {
        const int g = task / static_cast<int>(a.k), j = task % static_cast<int>(a.k);
        const int64_t p = t * a.k + j, ng = n0 + int64_t(g) * R;
        const int32_t e = local_expert(a, a.topk_ids[p]);
        float acc[R] = {};
        if (ng < a.H && e >= 0) {
            const W* w[R];
            int64_t rows[R];
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const int64_t n = ng + r < a.H ? ng + r : a.H - 1;  // past the end: a repeat, never stored
                w[r] = static_cast<const W*>(a.down.data) + e * a.down.expert_stride + n * a.down.row_stride;
                rows[r] = e * a.H + n;
            }
            const StackQuant quant{a.down_scales, a.down_zeros, a.int4_round_to};
            lane_dots<W, T, R, U>(w, rows, quant, h + p * a.I, a.I, lane, acc);
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const float d = warp_sum(acc[r]);
            if (lane == 0) dots[g * R + r][j] = d;
        }
    }
    __syncthreads();
    const int c = threadIdx.x;
    if (c >= cols || n0 + c >= a.H) return;
    float sum = 0.0f;
    for (int64_t j = 0; j < a.k; ++j)
        if (local_expert(a, a.topk_ids[t * a.k + j]) >= 0) sum += a.topk_weights[t * a.k + j] * dots[c][j];
    a.out[t * a.out_stride + n0 + c] = sum;
}

template <typename W, int C, int GU, int R, int DU>
void launch_shape(const MoeExpertsArgs& a, void* h, cudaStream_t stream) {
    using T = typename ComputeType<W>::T;
    const auto pairs = static_cast<unsigned>(a.T * a.k);
    const int64_t per_block = int64_t(kWarps) * C;
    launch_kernel<pair_gate_up_kernel<W, C, GU>>(dim3(static_cast<unsigned>((a.I + per_block - 1) / per_block), pairs),
                                                 kWarps * 32, 0, stream, a, static_cast<T*>(h));
    const int groups = a.k >= kWarps ? 1 : kWarps / static_cast<int>(a.k);  // enough tasks for every warp
    const int64_t cols = int64_t(groups) * R;
    launch_kernel<pair_down_kernel<W, R, DU>>(
        dim3(static_cast<unsigned>((a.H + cols - 1) / cols), static_cast<unsigned>(a.T)), kWarps * 32, 0, stream, a,
        static_cast<const T*>(h), groups);
    PAGODA_CUDA_CHECK_LAUNCH();
}

// Columns per warp in the gate/up pass (C = 1) and in the down pass (R = 4), with the loads each row issues ahead
// (4 in both). Qwen3-30B-A3B at T = 1 on an H200, each kernel timed cold by ncu at the GPU's own clocks (2026-12-04,
// median of 8): gate/up 17.5 us with C = 1, U = 4; 19.9 with U = 8; 19.2 with C = 2, U = 4. Down 11.7 us with
// R = 4; 12.1 with R = 2; 14.0 with R = 1.
template <typename W>
void launch_typed(const MoeExpertsArgs& a, void* h, cudaStream_t stream) {
    launch_shape<W, 1, 4, 4, 4>(a, h, stream);
}

}  // namespace

namespace moe {

bool take_pair_passes(const MoeExpertsArgs& a) {
    const auto rows16 = [](const MoeStackedWeight& w) {
        return w.expert_stride % kVec == 0 && w.row_stride % kVec == 0 && aligned(w.data, 16);
    };
    // fp8: 8 weights under one scale (block columns a multiple of 8), and one grid for the whole stack (the rows of
    // an expert a whole number of scale blocks), as the loader stacks them.
    const auto grid_fits = [&a](const WeightScales& s, int64_t rows_per_expert) {
        if (a.int4) return s.data && s.rows == 1 && s.cols > 0 && s.cols % kVec == 0;  // 8 weights in one group
        return a.weight_type != ElemType::F8E4M3 ||
               (s.data && s.rows > 0 && s.cols % kVec == 0 && rows_per_expert % s.rows == 0);
    };
    static const bool enabled = [] {
        const char* env = std::getenv("PAGODA_MOE_PAIR_PASSES");
        return !(env && std::strcmp(env, "0") == 0);
    }();
    return enabled && a.T <= kPairMaxTokens && a.I > 0 && a.k <= kMaxSlots && a.H % kVec == 0 && a.I % kVec == 0 &&
           a.x_stride % 4 == 0 && aligned(a.x, 16) && rows16(a.gate_up) && rows16(a.down) &&
           grid_fits(a.gate_up_scales, 2 * a.I) && grid_fits(a.down_scales, a.H);
}

void launch_pair_passes(const MoeExpertsArgs& a, void* h, cudaStream_t stream) {
    if (a.int4)
        launch_typed<Int4Pair>(a, h, stream);
    else if (a.weight_type == ElemType::BF16)
        launch_typed<__nv_bfloat16>(a, h, stream);
    else if (a.weight_type == ElemType::F16)
        launch_typed<__half>(a, h, stream);
    else
        launch_typed<__nv_fp8_e4m3>(a, h, stream);
}

}  // namespace moe

}  // namespace pagoda::kernels::cuda
