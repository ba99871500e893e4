// The routed experts for a few tokens (decode at batch 1 to kPairMaxTokens): no routing at all. A (token, slot) pair's
// expert is read from topk_ids where it is needed, so a layer's experts take two kernels instead of five (input
// conversion, routing, the two grouped passes, the slot sum): GateUp computes h for every pair, one warp per (pair,
// column), reading x in fp32 and rounding it as the conversion would; Down gives each warp one slot of one output
// column and sums the slots in slot order in shared memory. With a handful of tokens two pairs rarely share an expert,
// so reading each pair's expert weights on its own costs little over the grouped passes' once per expert.
//
// The sums are taken exactly as the grouped GEMV passes take them (each lane walks k = lane*8, lane*8 + 256, ... and
// adds element by element; warp_sum; the slots summed in order by weight), so a token's output does not depend on
// which path its step took: the loads are only issued further ahead.
//
// fp8 (e4m3) experts are read as they are stored, each weight dequantised in registers as the dequantisation kernel
// writes it (bf16(q · scale), the scale of its 128x128 block), with x and h rounded to bf16: what the dequantised
// bf16 stack would give, without writing that stack (1.2 GB a layer for Qwen3-30B-A3B) at every step.
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/moe/moe_internal.cuh"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kVec = 8;     // elements per 16-byte load
constexpr int kUnroll = 4;  // 16-byte loads in flight per lane and weight row
constexpr int64_t kLaneStep = 32 * kVec;

// 8 consecutive 16-bit values as fp32 (one 16-byte load).
template <typename T>
__device__ __forceinline__ void load8(const T* p, float* out) {
    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
    const T* v = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < kVec; ++i)
        out[i] = to_f32(v[i]);
}

// The 8 weights of expert row `row` (counted over the whole stack, as its scale grid is) from column k on.
template <typename W>
__device__ __forceinline__ void load_weights8(const W* p, const WeightScales& scales, int64_t row, int64_t k,
                                              float* out) {
    if constexpr (std::is_same_v<W, __nv_fp8_e4m3>) {
        const uint2 raw = __ldg(reinterpret_cast<const uint2*>(p));  // 8 bytes: one scale (block columns % 8 == 0)
        const auto* q = reinterpret_cast<const __nv_fp8_storage_t*>(&raw);
        const float s = __ldg(scales.data + (row / scales.rows) * scales.stride + k / scales.cols);
#pragma unroll
        for (int i = 0; i < kVec; ++i)
            out[i] = dequantize_e4m3(q[i], s);
    } else {
        load8<W>(p, out);
    }
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
// x in fp32 (In = float, rounded to the compute type) or h in the compute type.
template <typename W, typename In, int R>
__device__ __forceinline__ void lane_dots(const W* const (&w)[R], const int64_t (&rows)[R], const WeightScales& scales,
                                          const In* in, int64_t K, int lane, float (&acc)[R]) {
    using T = typename ComputeType<W>::T;
    for (int64_t k0 = int64_t(lane) * kVec; k0 < K; k0 += kUnroll * kLaneStep) {
        float wv[R][kUnroll][kVec];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
            if (k0 + u * kLaneStep < K)
#pragma unroll
                for (int r = 0; r < R; ++r)
                    load_weights8<W>(w[r] + k0 + u * kLaneStep, scales, rows[r], k0 + u * kLaneStep, wv[r][u]);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            if (k0 + u * kLaneStep >= K) break;
            float av[kVec];
            if constexpr (std::is_same_v<In, float>)
                load8_rounded<T>(in + k0 + u * kLaneStep, av);
            else
                load8<T>(in + k0 + u * kLaneStep, av);
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
                for (int v = 0; v < kVec; ++v)
                    acc[r] += wv[r][u][v] * av[v];
        }
    }
}

__device__ __forceinline__ bool valid_expert(int32_t e, int64_t E) {
    return e >= 0 && e < E;
}

// h[p, i] = silu(gate_e[i] · x[t]) · (up_e[i] · x[t]) for pair p = t*k + j, e = ids[p]; grid (I / kWarps, T*k).
template <typename W>
__global__ void __launch_bounds__(kWarps * 32) pair_gate_up_kernel(MoeExpertsArgs a, typename ComputeType<W>::T* h) {
    PAGODA_KERNEL_PROLOGUE();
    using T = typename ComputeType<W>::T;
    const int lane = threadIdx.x & 31;
    const int64_t p = blockIdx.y, i = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
    const int32_t e = a.topk_ids[p];
    if (i >= a.I || !valid_expert(e, a.E)) return;
    const W* expert = static_cast<const W*>(a.gate_up.data) + e * a.gate_up.expert_stride;
    const W* const w[2] = {expert + i * a.gate_up.row_stride, expert + (a.I + i) * a.gate_up.row_stride};
    const int64_t rows[2] = {e * 2 * a.I + i, e * 2 * a.I + a.I + i};
    float acc[2] = {0.0f, 0.0f};
    lane_dots<W, float, 2>(w, rows, a.gate_up_scales, a.x + (p / a.k) * a.x_stride, a.H, lane, acc);
    const float g = warp_sum(acc[0]), u = warp_sum(acc[1]);
    if (lane == 0) h[p * a.I + i] = from_f32<T>(silu(g) * u);
}

// The most slots a token may have on this path (Qwen's MoE models take 8 or 10).
constexpr int kMaxSlots = 32;

// out[t, n] = Σ_j w[t, j] · (down_e[n] · h[t*k + j]) in slot order, e = ids[t*k + j], skipping ids outside [0, E).
// A block takes `cols` consecutive columns of one token; its warps share the cols * k dot products.
template <typename W>
__global__ void __launch_bounds__(kWarps * 32)
    pair_down_kernel(MoeExpertsArgs a, const typename ComputeType<W>::T* h, int cols) {
    PAGODA_KERNEL_PROLOGUE();
    using T = typename ComputeType<W>::T;
    __shared__ float dots[kWarps][kMaxSlots];  // [column in block][slot]; cols * k <= kWarps * kMaxSlots
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t t = blockIdx.y, n0 = int64_t(blockIdx.x) * cols;
    for (int task = warp; task < cols * a.k; task += kWarps) {
        const int c = task / static_cast<int>(a.k), j = task % static_cast<int>(a.k);
        const int64_t n = n0 + c, p = t * a.k + j;
        const int32_t e = a.topk_ids[p];
        float acc[1] = {0.0f};
        if (n < a.H && valid_expert(e, a.E)) {
            const W* const w[1] = {static_cast<const W*>(a.down.data) + e * a.down.expert_stride +
                                   n * a.down.row_stride};
            const int64_t rows[1] = {e * a.H + n};
            lane_dots<W, T, 1>(w, rows, a.down_scales, h + p * a.I, a.I, lane, acc);
        }
        const float d = warp_sum(acc[0]);
        if (lane == 0) dots[c][j] = d;
    }
    __syncthreads();
    const int c = threadIdx.x;
    if (c >= cols || n0 + c >= a.H) return;
    float sum = 0.0f;
    for (int64_t j = 0; j < a.k; ++j)
        if (valid_expert(a.topk_ids[t * a.k + j], a.E)) sum += a.topk_weights[t * a.k + j] * dots[c][j];
    a.out[t * a.out_stride + n0 + c] = sum;
}

template <typename W>
void launch_typed(const MoeExpertsArgs& a, void* h, cudaStream_t stream) {
    using T = typename ComputeType<W>::T;
    const auto pairs = static_cast<unsigned>(a.T * a.k);
    launch_kernel<pair_gate_up_kernel<W>>(dim3(static_cast<unsigned>((a.I + kWarps - 1) / kWarps), pairs), kWarps * 32,
                                          0, stream, a, static_cast<T*>(h));
    const int cols = a.k >= kWarps ? 1 : kWarps / static_cast<int>(a.k);  // enough dot products for every warp
    launch_kernel<pair_down_kernel<W>>(dim3(static_cast<unsigned>((a.H + cols - 1) / cols), static_cast<unsigned>(a.T)),
                                       kWarps * 32, 0, stream, a, static_cast<const T*>(h), cols);
    PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace

namespace moe {

bool take_pair_passes(const MoeExpertsArgs& a) {
    const auto rows16 = [](const MoeStackedWeight& w) {
        return w.expert_stride % kVec == 0 && w.row_stride % kVec == 0 && aligned16(w.data);
    };
    // fp8: 8 weights under one scale (block columns a multiple of 8), and one grid for the whole stack (the rows of
    // an expert a whole number of scale blocks), as the loader stacks them.
    const auto grid_fits = [&a](const WeightScales& s, int64_t rows_per_expert) {
        return a.weight_type != ElemType::F8E4M3 ||
               (s.data && s.rows > 0 && s.cols % kVec == 0 && rows_per_expert % s.rows == 0);
    };
    static const bool enabled = [] {
        const char* env = std::getenv("PAGODA_MOE_PAIR_PASSES");
        return !(env && std::strcmp(env, "0") == 0);
    }();
    return enabled && a.T <= kPairMaxTokens && a.I > 0 && a.k <= kMaxSlots && a.H % kVec == 0 && a.I % kVec == 0 &&
           a.x_stride % 4 == 0 && aligned16(a.x) && rows16(a.gate_up) && rows16(a.down) &&
           grid_fits(a.gate_up_scales, 2 * a.I) && grid_fits(a.down_scales, a.H);
}

void launch_pair_passes(const MoeExpertsArgs& a, void* h, cudaStream_t stream) {
    if (a.weight_type == ElemType::BF16)
        launch_typed<__nv_bfloat16>(a, h, stream);
    else if (a.weight_type == ElemType::F16)
        launch_typed<__half>(a, h, stream);
    else
        launch_typed<__nv_fp8_e4m3>(a, h, stream);
}

}  // namespace moe

}  // namespace pagoda::kernels::cuda
