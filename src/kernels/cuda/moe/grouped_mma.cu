// The grouped passes for many rows per expert (prefill): a block takes one tile (up to 64 rows of one expert) and
// 128 weight rows, stages 64x32 and 128x32 slices of both through shared memory with cp.async (two stages: the next
// slice loads while this one is multiplied) and multiplies them with mma.sync m16n8k16 (bf16 or f16 in, fp32
// accumulate). 8 warps as 2 x 4, each 32 rows x 32 weight rows.
//
// GateUp fuses silu(gate)·up into the epilogue: each warp's 32 weight rows are 16 gate rows and the 16 up rows of the
// same intermediate columns, so one thread holds both accumulators of an output. Rows of the tile past the expert's
// last row, weight rows past N and dot positions past K are zero-filled in shared memory and never stored. fp8 and
// int4 stacks take grouped_mma_quant_kernel: the same tile over weights dequantised into shared memory.
#include "kernels/cuda/gemm/mma_tile.cuh"
#include "kernels/cuda/gemm/quant_slice.cuh"
#include "kernels/cuda/moe/moe_internal.cuh"

namespace pagoda::kernels::cuda {

namespace {

using moe::GroupedArgs;
using moe::Pass;

using mma::cp_async16, mma::cp_async_commit, mma::cp_async_wait;
using mma::kBK, mma::kBM, mma::kBN, mma::kLd, mma::kThreads;  // the block tile (gemm/mma_tile.cuh)
constexpr int kStages = 2;
static_assert(kBM == moe::kMmaRows, "a routing tile is one block tile of rows");
static_assert(kBM * kBK / 8 == kThreads && kBN * kBK / 8 == 2 * kThreads, "one A chunk and two B chunks a thread");

template <typename W, Pass P>
struct TileRows {
    const GroupedArgs& a;
    moe::Tile tile;
    const W* w_expert;
    int64_t c0;  // first output column of the block

    // The input row behind shared A row m; null past the tile.
    __device__ const W* a_row(int m) const {
        if (m >= tile.rows) return nullptr;
        const int32_t row = tile.row0 + m;
        const int64_t src = P == Pass::GateUp ? a.routing.sorted_pairs[row] / a.routing.k : row;
        return static_cast<const W*>(a.a) + src * a.K;
    }
    // The expert's weight row behind shared B row nb; -1 past N. GateUp: in each 32 rows, 16 gate rows then the 16
    // up rows of the same intermediate columns.
    __device__ int64_t b_index(int nb) const {
        if constexpr (P == Pass::GateUp) {
            const int q = nb & 31;
            const int64_t i = c0 + 16 * (nb >> 5) + (q & 15);
            return i < a.N ? (q < 16 ? i : a.N + i) : -1;
        } else {
            const int64_t n = c0 + nb;
            return n < a.N ? n : -1;
        }
    }
    __device__ const W* b_row(int nb) const {
        const int64_t i = b_index(nb);
        return i < 0 ? nullptr : w_expert + i * a.w.row_stride;
    }
};

// Stores the block's accumulators (mma_tile.cuh's layout): GateUp silu(gate)·up into h (in T), Down into y by pair.
template <typename T, Pass P>
__device__ __forceinline__ void store_tile(const GroupedArgs& a, const moe::Tile& tile, int64_t c0, int wm, int wn,
                                           int lane, const float (&acc)[2][4][4]) {
    const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int m = wm * 32 + mt * 16 + g + 8 * half;
            if (m >= tile.rows) continue;
            const int32_t row = tile.row0 + m;
            if constexpr (P == Pass::GateUp) {
                T* h = static_cast<T*>(a.h) + int64_t(row) * a.N;
#pragma unroll
                for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                    for (int c = 0; c < 2; ++c) {
                        const int64_t i = c0 + 16 * wn + nt * 8 + 2 * t4 + c;
                        const float gate = acc[mt][nt][2 * half + c], up = acc[mt][nt + 2][2 * half + c];
                        if (i < a.N) h[i] = from_f32<T>(silu(gate) * up);
                    }
            } else {
                float* y = a.y + int64_t(a.routing.sorted_pairs[row]) * a.N;
#pragma unroll
                for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                    for (int c = 0; c < 2; ++c) {
                        const int64_t n = c0 + wn * 32 + nt * 8 + 2 * t4 + c;
                        if (n < a.N) y[n] = acc[mt][nt][2 * half + c];
                    }
            }
        }
}

template <typename W, Pass P, bool VEC>
__global__ void __launch_bounds__(kThreads) grouped_mma_kernel(GroupedArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    __shared__ __align__(16) W As[kStages][kBM][kLd];
    __shared__ __align__(16) W Bs[kStages][kBN][kLd];
    moe::Tile tile;
    if (!moe::find_tile(a.routing, static_cast<int32_t>(blockIdx.x), tile)) return;  // the whole block
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp & 1, wn = warp >> 1;  // the warp's tile (mma_tile.cuh)
    const TileRows<W, P> src{a, tile, static_cast<const W*>(a.w.data) + tile.expert * a.w.expert_stride,
                             static_cast<int64_t>(blockIdx.y) * (P == Pass::GateUp ? kBN / 2 : kBN)};

    // VEC: each thread copies 16-byte chunk (tid & 3) of A row tid/4 and of B rows tid/4 and tid/4 + 64.
    const int chunk = (tid & 3) * 8, r = tid >> 2;
    const W* a_src = VEC ? src.a_row(r) : nullptr;
    const W* b_src0 = VEC ? src.b_row(r) : nullptr;
    const W* b_src1 = VEC ? src.b_row(r + kBM) : nullptr;
    auto load = [&](int stage, int64_t k0) {
        if constexpr (VEC) {
            const int64_t k = k0 + chunk;
            const bool in_k = k < a.K;  // K % 8 == 0: a chunk is all in or all out
            cp_async16(&As[stage][r][chunk], a_src && in_k ? a_src + k : a.a, a_src && in_k);
            cp_async16(&Bs[stage][r][chunk], b_src0 && in_k ? b_src0 + k : a.w.data, b_src0 && in_k);
            cp_async16(&Bs[stage][r + kBM][chunk], b_src1 && in_k ? b_src1 + k : a.w.data, b_src1 && in_k);
        } else {  // odd shapes: element by element, column tid & 31 of rows tid/32 + 8i
            const int col = tid & 31;
            const int64_t k = k0 + col;
            const W zero = from_f32<W>(0.0f);
            for (int m = tid >> 5; m < kBM; m += kThreads / 32) {
                const W* p = src.a_row(m);
                As[stage][m][col] = p && k < a.K ? p[k] : zero;
            }
            for (int nb = tid >> 5; nb < kBN; nb += kThreads / 32) {
                const W* p = src.b_row(nb);
                Bs[stage][nb][col] = p && k < a.K ? p[k] : zero;
            }
        }
    };

    float acc[2][4][4] = {};
    const int64_t k_tiles = (a.K + kBK - 1) / kBK;
    load(0, 0);
    cp_async_commit();
    for (int64_t kt = 0; kt < k_tiles; ++kt) {
        const int stage = static_cast<int>(kt & 1);
        if (kt + 1 < k_tiles) load(stage ^ 1, (kt + 1) * kBK);  // that stage was last read before the loop's end sync
        cp_async_commit();
        cp_async_wait<1>();  // this stage's copies are done (the next stage's may still fly)
        __syncthreads();
        mma::warp_tile_mma<W>(As[stage], Bs[stage], wm, wn, lane, acc);
        __syncthreads();
    }

    store_tile<W, P>(a, tile, src.c0, wm, wn, lane, acc);
}

// The passes over quantized stacks (fp8, int4): x (GateUp) or h (Down) in bf16 through cp.async as above, the
// weights fetched as stored a slice ahead and written to shared memory dequantised (gemm/quant_slice.cuh), so the
// passes multiply what the dequantised bf16 stack holds without writing that stack. K a multiple of kBK.
template <quant::Format F, Pass P>
__global__ void __launch_bounds__(kThreads) grouped_mma_quant_kernel(GroupedArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    __shared__ __align__(16) __nv_bfloat16 As[kStages][kBM][kLd];
    __shared__ __align__(16) __nv_bfloat16 Bs[kStages][kBN][kLd];
    moe::Tile tile;
    if (!moe::find_tile(a.routing, static_cast<int32_t>(blockIdx.x), tile)) return;  // the whole block
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp & 1, wn = warp >> 1;  // the warp's tile (mma_tile.cuh)
    const TileRows<__nv_bfloat16, P> src{a, tile, nullptr,
                                         static_cast<int64_t>(blockIdx.y) * (P == Pass::GateUp ? kBN / 2 : kBN)};
    // A: 16 bytes (8 values) of tile row a_r at a_c; B: 16 weights of shared B row b_r at b_c.
    const int a_r = tid >> 2, a_c = (tid & 3) * 8;
    const int b_r = tid >> 1, b_c = (tid & 1) * quant::kChunk;
    const __nv_bfloat16* a_src = src.a_row(a_r);
    const int64_t b_i = src.b_index(b_r);  // the row within the expert
    // Its first byte (fp8: one a weight; int4: the stack's byte strides) and its row of the stack's scale grid.
    const uint8_t* b_row =
        static_cast<const uint8_t*>(a.w.data) + tile.expert * a.w.expert_stride + (b_i < 0 ? 0 : b_i) * a.w.row_stride;
    const int64_t b_grid_row = int64_t(tile.expert) * (P == Pass::GateUp ? 2 * a.N : a.N) + b_i;
    auto load_a = [&](int stage, int64_t slice) {
        cp_async16(&As[stage][a_r][a_c], a_src ? a_src + slice * kBK + a_c : a.a, a_src != nullptr);
    };
    auto fetch_b = [&](int64_t slice) {
        return b_i >= 0 ? quant::fetch<F>(b_row, b_grid_row, slice * kBK + b_c, a.quant) : quant::Chunk{};
    };
    auto store_b = [&](int stage, const quant::Chunk& c) {
        quant::store<F>(c, b_i >= 0, a.quant.round_to, &Bs[stage][b_r][b_c]);
    };

    float acc[2][4][4] = {};
    const int64_t slices = a.K / kBK;
    load_a(0, 0);
    cp_async_commit();
    store_b(0, fetch_b(0));
    for (int64_t s = 0; s < slices; ++s) {
        const int stage = static_cast<int>(s & 1);
        const bool more = s + 1 < slices;
        quant::Chunk next{};
        if (more) {  // stage ^ 1 was last read before the previous slice's closing barrier
            load_a(stage ^ 1, s + 1);
            next = fetch_b(s + 1);
        }
        cp_async_commit();
        cp_async_wait<1>();  // this stage's A is in (the next stage's may still fly)
        __syncthreads();     // and every thread's weights of it
        mma::warp_tile_mma<__nv_bfloat16>(As[stage], Bs[stage], wm, wn, lane, acc);
        if (more) store_b(stage ^ 1, next);
        __syncthreads();
    }
    store_tile<__nv_bfloat16, P>(a, tile, src.c0, wm, wn, lane, acc);
}

template <typename W, Pass P>
void launch_typed(const GroupedArgs& a, cudaStream_t stream) {
    constexpr int64_t cols = P == Pass::GateUp ? kBN / 2 : kBN;
    const dim3 grid(static_cast<unsigned>(a.tiles), static_cast<unsigned>((a.N + cols - 1) / cols));
    if (moe::vector_loads_fit(a))
        launch_kernel<grouped_mma_kernel<W, P, true>>(grid, kThreads, 0, stream, a);
    else
        launch_kernel<grouped_mma_kernel<W, P, false>>(grid, kThreads, 0, stream, a);
    PAGODA_CUDA_CHECK_LAUNCH();
}

template <typename W>
void launch_pass(Pass pass, const GroupedArgs& a, cudaStream_t stream) {
    if (pass == Pass::GateUp)
        launch_typed<W, Pass::GateUp>(a, stream);
    else
        launch_typed<W, Pass::Down>(a, stream);
}

template <quant::Format F, Pass P>
void launch_quant_typed(const GroupedArgs& a, cudaStream_t stream) {
    constexpr int64_t cols = P == Pass::GateUp ? kBN / 2 : kBN;
    const dim3 grid(static_cast<unsigned>(a.tiles), static_cast<unsigned>((a.N + cols - 1) / cols));
    launch_kernel<grouped_mma_quant_kernel<F, P>>(grid, kThreads, 0, stream, a);
    PAGODA_CUDA_CHECK_LAUNCH();
}

template <quant::Format F>
void launch_quant_pass(Pass pass, const GroupedArgs& a, cudaStream_t stream) {
    PAGODA_KERNEL_REQUIRE(moe::quant_mma_fits(a, pass), "moe: quantized experts on the mma passes need quant_mma_fits");
    if (pass == Pass::GateUp)
        launch_quant_typed<F, Pass::GateUp>(a, stream);
    else
        launch_quant_typed<F, Pass::Down>(a, stream);
}

}  // namespace

namespace moe {
void launch_grouped_mma(Pass pass, const GroupedArgs& a, ElemType w_type, cudaStream_t stream) {
    PAGODA_KERNEL_REQUIRE(a.routing.tile_rows == kMmaRows, "moe: the mma passes need tiles of kMmaRows rows");
    if (a.N == 0 || a.tiles == 0) return;
    if (a.int4 || a.fp8) {
        PAGODA_KERNEL_REQUIRE(w_type == ElemType::BF16, "moe: quantized experts run in bf16");
        if (a.int4)
            launch_quant_pass<quant::Format::Int4>(pass, a, stream);
        else
            launch_quant_pass<quant::Format::Fp8>(pass, a, stream);
    } else if (w_type == ElemType::BF16) {
        launch_pass<__nv_bfloat16>(pass, a, stream);
    } else {
        launch_pass<__half>(pass, a, stream);
    }
}
}  // namespace moe

}  // namespace pagoda::kernels::cuda
