// The grouped passes for few rows per expert (decode): a block takes one tile (up to kGemvRows rows of one expert)
// and 8 output columns, one per warp; the warp streams the column's weight row(s) once with 16-byte loads and dots
// them with every row of the tile. Weight bandwidth bound, as decode is: each selected expert's weights are read once
// per tile, and a decode batch rarely gives an expert more than one tile. int4 and fp8 stacks are read as stored
// (4-byte loads of 8 int4 weights, 8-byte loads of 8 fp8 ones, each dequantised in registers as
// launch_dequantize_int4 / launch_dequantize_fp8 write it) against bf16 inputs: the sums of the passes over the
// dequantised bf16 stack, without writing that stack.
#include <type_traits>

#include "kernels/cuda/moe/moe_internal.cuh"

namespace pagoda::kernels::cuda {

namespace {

using moe::GroupedArgs;
using moe::Int4Pair;
using moe::kGemvRows;
using moe::Pass;

constexpr int kWarps = 8;

// VEC consecutive elements as fp32: one 16-byte load (VEC == 8) or one element (any alignment).
template <typename W, int VEC>
__device__ __forceinline__ void load_f32(const W* p, float* out) {
    if constexpr (VEC == 8) {
        const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
        const W* v = reinterpret_cast<const W*>(&raw);
#pragma unroll
        for (int i = 0; i < 8; ++i)
            out[i] = to_f32(v[i]);
    } else {
        out[0] = to_f32(p[0]);
    }
}

// VEC weights of the row at p from column k on, as fp32; `row` is the row's index in the whole stack (int4 groups).
template <typename W, int VEC>
__device__ __forceinline__ void load_weights(const W* p, int64_t k, int64_t row, const GroupedArgs& a, float* out) {
    if constexpr (std::is_same_v<W, Int4Pair>) {
        static_assert(VEC == 8, "int4 weights are read 8 at a time");
        moe::unpack_int4(__ldg(reinterpret_cast<const uint32_t*>(p + k / 2)), a.quant, row, k, out);
    } else if constexpr (std::is_same_v<W, __nv_fp8_e4m3>) {
        static_assert(VEC == 8, "fp8 weights are read 8 at a time");
        moe::unpack_fp8(__ldg(reinterpret_cast<const uint2*>(p + k)), a.quant, row, k, out);
    } else {
        load_f32<W, VEC>(p + k, out);
    }
}

// GateUp: column i dots gate row i and up row I+i (I = a.N) with x_w[token(row)] and stores silu(g)·u into h[row, i].
// Down: column n dots down row n with h[row] and stores y[pair(row), n]. x_w and h are in T, the weights' compute type.
template <typename W, Pass P, int VEC>
__global__ void __launch_bounds__(kWarps * 32) grouped_gemv_kernel(GroupedArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    using T = typename ComputeType<W>::T;
    moe::Tile tile;
    if (!moe::find_tile(a.routing, static_cast<int32_t>(blockIdx.x), tile)) return;
    const int lane = threadIdx.x & 31;
    const int64_t n = static_cast<int64_t>(blockIdx.y) * kWarps + (threadIdx.x >> 5);
    if (n >= a.N) return;
    const T* in = static_cast<const T*>(a.a);
    const T* rows[kGemvRows];
#pragma unroll
    for (int m = 0; m < kGemvRows; ++m) {
        const int32_t row = tile.row0 + (m < tile.rows ? m : 0);
        const int64_t src = P == Pass::GateUp ? a.routing.sorted_pairs[row] / a.routing.k : row;
        rows[m] = in + src * a.K;
    }
    const W* w_expert = static_cast<const W*>(a.w.data) + tile.expert * a.w.expert_stride;
    const int64_t n1 = P == Pass::GateUp ? a.N + n : n;
    const W* w0 = w_expert + n * a.w.row_stride;
    const W* w1 = w_expert + n1 * a.w.row_stride;
    // The rows' indices in the whole stack (an expert has 2N rows in GateUp, N in Down), for int4 groups and fp8
    // scale grids.
    const int64_t expert_rows = int64_t(tile.expert) * (P == Pass::GateUp ? 2 * a.N : a.N);
    float acc0[kGemvRows] = {}, acc1[kGemvRows] = {};
    for (int64_t k = int64_t(lane) * VEC; k < a.K; k += 32 * VEC) {
        float wv0[VEC], wv1[VEC];
        load_weights<W, VEC>(w0, k, expert_rows + n, a, wv0);
        if constexpr (P == Pass::GateUp) load_weights<W, VEC>(w1, k, expert_rows + n1, a, wv1);
#pragma unroll
        for (int m = 0; m < kGemvRows; ++m) {
            if (m >= tile.rows) break;
            float av[VEC];
            load_f32<T, VEC>(rows[m] + k, av);
#pragma unroll
            for (int v = 0; v < VEC; ++v) {
                acc0[m] += wv0[v] * av[v];
                if constexpr (P == Pass::GateUp) acc1[m] += wv1[v] * av[v];
            }
        }
    }
#pragma unroll
    for (int m = 0; m < kGemvRows; ++m) {
        if (m >= tile.rows) break;  // tile.rows is the same for the whole warp
        const float d0 = warp_sum(acc0[m]);
        if constexpr (P == Pass::GateUp) {
            const float d1 = warp_sum(acc1[m]);
            if (lane == m) static_cast<T*>(a.h)[int64_t(tile.row0 + m) * a.N + n] = from_f32<T>(silu(d0) * d1);
        } else {
            if (lane == m) a.y[int64_t(a.routing.sorted_pairs[tile.row0 + m]) * a.N + n] = d0;
        }
    }
}

template <typename W, Pass P>
void launch_typed(const GroupedArgs& a, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>(a.tiles), static_cast<unsigned>((a.N + kWarps - 1) / kWarps));
    if constexpr (std::is_same_v<W, Int4Pair>) {
        PAGODA_KERNEL_REQUIRE(moe::int4_gemv_fits(a), "moe: int4 experts on the GEMV passes need int4_gemv_fits");
        launch_kernel<grouped_gemv_kernel<W, P, 8>>(grid, kWarps * 32, 0, stream, a);
    } else if constexpr (std::is_same_v<W, __nv_fp8_e4m3>) {
        PAGODA_KERNEL_REQUIRE(moe::fp8_gemv_fits(a, P == Pass::GateUp ? 2 * a.N : a.N),
                              "moe: fp8 experts on the GEMV passes need fp8_gemv_fits");
        launch_kernel<grouped_gemv_kernel<W, P, 8>>(grid, kWarps * 32, 0, stream, a);
    } else if (moe::vector_loads_fit(a))
        launch_kernel<grouped_gemv_kernel<W, P, 8>>(grid, kWarps * 32, 0, stream, a);
    else
        launch_kernel<grouped_gemv_kernel<W, P, 1>>(grid, kWarps * 32, 0, stream, a);
    PAGODA_CUDA_CHECK_LAUNCH();
}

template <typename W>
void launch_pass(Pass pass, const GroupedArgs& a, cudaStream_t stream) {
    if (pass == Pass::GateUp)
        launch_typed<W, Pass::GateUp>(a, stream);
    else
        launch_typed<W, Pass::Down>(a, stream);
}

}  // namespace

namespace moe {
void launch_grouped_gemv(Pass pass, const GroupedArgs& a, ElemType w_type, cudaStream_t stream) {
    PAGODA_KERNEL_REQUIRE(a.routing.tile_rows == kGemvRows, "moe: the GEMV passes need tiles of kGemvRows rows");
    if (a.N == 0 || a.tiles == 0) return;
    if (a.int4) {
        PAGODA_KERNEL_REQUIRE(w_type == ElemType::BF16, "moe: int4 experts run in bf16");
        launch_pass<Int4Pair>(pass, a, stream);
    } else if (a.fp8) {
        PAGODA_KERNEL_REQUIRE(w_type == ElemType::BF16, "moe: fp8 experts run in bf16");
        launch_pass<__nv_fp8_e4m3>(pass, a, stream);
    } else if (w_type == ElemType::BF16)
        launch_pass<__nv_bfloat16>(pass, a, stream);
    else
        launch_pass<__half>(pass, a, stream);
}
}  // namespace moe

}  // namespace pagoda::kernels::cuda
