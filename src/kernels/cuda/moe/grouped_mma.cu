// The grouped passes for many rows per expert (prefill): a block takes one tile (up to 64 rows of one expert) and
// 128 weight rows, stages 64x32 and 128x32 slices of both through shared memory with cp.async (two stages: the next
// slice loads while this one is multiplied) and multiplies them with mma.sync m16n8k16 (bf16 or f16 in, fp32
// accumulate). 8 warps as 2 x 4, each 32 rows x 32 weight rows.
//
// GateUp fuses silu(gate)·up into the epilogue: each warp's 32 weight rows are 16 gate rows and the 16 up rows of the
// same intermediate columns, so one thread holds both accumulators of an output. Rows of the tile past the expert's
// last row, weight rows past N and dot positions past K are zero-filled in shared memory and never stored.
#include "kernels/cuda/gemm/mma_tile.cuh"
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
    // The weight row behind shared B row nb; null past N. GateUp: in each 32 rows, 16 gate rows then the 16 up rows
    // of the same intermediate columns.
    __device__ const W* b_row(int nb) const {
        if constexpr (P == Pass::GateUp) {
            const int q = nb & 31;
            const int64_t i = c0 + 16 * (nb >> 5) + (q & 15);
            if (i >= a.N) return nullptr;
            return w_expert + (q < 16 ? i : a.N + i) * a.w.row_stride;
        } else {
            const int64_t n = c0 + nb;
            return n < a.N ? w_expert + n * a.w.row_stride : nullptr;
        }
    }
};

template <typename W, Pass P, bool VEC>
__global__ void __launch_bounds__(kThreads) grouped_mma_kernel(GroupedArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    __shared__ __align__(16) W As[kStages][kBM][kLd];
    __shared__ __align__(16) W Bs[kStages][kBN][kLd];
    moe::Tile tile;
    if (!moe::find_tile(a.routing, static_cast<int32_t>(blockIdx.x), tile)) return;  // the whole block
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp & 1, wn = warp >> 1, g = lane >> 2, t4 = lane & 3;  // the warp's tile (mma_tile.cuh)
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

    // Accumulator acc[mt][nt][2*half + c] is tile row wm*32 + mt*16 + g + 8*half, shared B row wn*32 + nt*8 + 2*t4 + c.
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int m = wm * 32 + mt * 16 + g + 8 * half;
            if (m >= tile.rows) continue;
            const int32_t row = tile.row0 + m;
            if constexpr (P == Pass::GateUp) {
                W* h = static_cast<W*>(a.h) + int64_t(row) * a.N;
#pragma unroll
                for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                    for (int c = 0; c < 2; ++c) {
                        const int64_t i = src.c0 + 16 * wn + nt * 8 + 2 * t4 + c;
                        const float gate = acc[mt][nt][2 * half + c], up = acc[mt][nt + 2][2 * half + c];
                        if (i < a.N) h[i] = from_f32<W>(silu(gate) * up);
                    }
            } else {
                float* y = a.y + int64_t(a.routing.sorted_pairs[row]) * a.N;
#pragma unroll
                for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                    for (int c = 0; c < 2; ++c) {
                        const int64_t n = src.c0 + wn * 32 + nt * 8 + 2 * t4 + c;
                        if (n < a.N) y[n] = acc[mt][nt][2 * half + c];
                    }
            }
        }
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

}  // namespace

namespace moe {
void launch_grouped_mma(Pass pass, const GroupedArgs& a, ElemType w_type, cudaStream_t stream) {
    PAGODA_KERNEL_REQUIRE(a.routing.tile_rows == kMmaRows, "moe: the mma passes need tiles of kMmaRows rows");
    if (a.N == 0 || a.tiles == 0) return;
    if (w_type == ElemType::BF16)
        launch_pass<__nv_bfloat16>(pass, a, stream);
    else
        launch_pass<__half>(pass, a, stream);
}
}  // namespace moe

}  // namespace pagoda::kernels::cuda
