// The weight-only tensor-core GEMM (wo_mma.h). A block computes a 64-token x 128-weight-row tile of one K range with
// the MoE grouped passes' tile (gemm/mma_tile.cuh: 8 warps as 2 x 4, mma.sync m16n8k16 bf16, two shared stages):
// x comes in with cp.async; each thread fetches 16 weights of one row (16 bytes of fp8 or int8, 8 of int4) into
// registers one slice ahead, and after the slice in shared memory has been multiplied writes them there dequantised
// to bf16, so the global loads of slice k+1 fly during the mma work of slice k. Partial sums of a K range go to a
// workspace, and a second kernel adds the ranges in order.
#include <algorithm>

#include "kernels/cuda/gemm/mma_tile.cuh"
#include "kernels/cuda/gemm/quant_slice.cuh"
#include "kernels/cuda/gemm/wo_mma.h"

namespace pagoda::kernels::cuda {

namespace {

using mma::kBK, mma::kBM, mma::kBN, mma::kLd, mma::kThreads;
constexpr int kStages = 2;
constexpr int kPerThread = quant::kChunk;  // weights of one row a thread dequantises per slice
static_assert(kBN * kBK == kThreads * kPerThread, "one 16-weight chunk of B a thread");
static_assert(kBM * kBK / 8 == kThreads, "one 16-byte chunk of A a thread");

using quant::Format;

// The weight's rows as quant_slice.cuh reads them: row n's first byte, and where its scales are.
struct Rows {
    const uint8_t* data;
    int64_t row_bytes;
    quant::RowQuant q;
};
Rows rows_of(const WoMmaArgs& a) {
    if (a.w != nullptr) return {static_cast<const uint8_t*>(a.w), a.w_stride, {a.scales}};
    const Int4Weight& w = a.int_w;
    return {static_cast<const uint8_t*>(w.data),
            w.row_bytes,
            {WeightScales{w.scales, 1, w.group_size, a.K / w.group_size}, w.zeros, w.round_to}};
}

template <Format F>
__global__ void __launch_bounds__(kThreads) wo_mma_kernel(WoMmaArgs a, Rows w) {
    PAGODA_KERNEL_PROLOGUE();
    __shared__ __align__(16) __nv_bfloat16 As[kStages][kBM][kLd];
    __shared__ __align__(16) __nv_bfloat16 Bs[kStages][kBN][kLd];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp & 1, wn = warp >> 1, g = lane >> 2, t4 = lane & 3;  // the warp's tile (mma_tile.cuh)
    const int64_t n0 = int64_t(blockIdx.x) * kBN, m0 = int64_t(blockIdx.y) * kBM;
    // This block's K range: whole slices, the last range shorter.
    const int64_t slices = a.K / kBK, per_split = (slices + a.splits - 1) / a.splits;
    const int64_t first = int64_t(blockIdx.z) * per_split, last = min(slices, first + per_split);

    // A: 16 bytes (8 values) of x row a_r at a_c; B: 16 weights of weight row b_r at b_c.
    const int a_r = tid >> 2, a_c = (tid & 3) * 8;
    const int b_r = tid >> 1, b_c = (tid & 1) * kPerThread;
    const bool a_ok = m0 + a_r < a.T;
    const auto* x_row = static_cast<const __nv_bfloat16*>(a.x) + (a_ok ? (m0 + a_r) * a.ldx : 0);
    const int64_t b_n = n0 + b_r;
    const bool b_ok = b_n < a.N;
    const uint8_t* b_row = w.data + (b_ok ? b_n : 0) * w.row_bytes;
    auto load_a = [&](int stage, int64_t slice) {
        mma::cp_async16(&As[stage][a_r][a_c], x_row + slice * kBK + a_c, a_ok);
    };
    auto fetch_b = [&](int64_t slice) {
        return b_ok ? quant::fetch<F>(b_row, b_n, slice * kBK + b_c, w.q) : quant::Chunk{};
    };
    auto store_b = [&](int stage, const quant::Chunk& c) {
        quant::store<F>(c, b_ok, w.q.round_to, &Bs[stage][b_r][b_c]);
    };

    float acc[2][4][4] = {};
    if (first < last) {
        load_a(0, first);
        mma::cp_async_commit();
        store_b(0, fetch_b(first));
        for (int64_t s = first; s < last; ++s) {
            const int stage = static_cast<int>((s - first) & 1);
            const bool more = s + 1 < last;
            quant::Chunk next{};
            if (more) {  // stage ^ 1 was last read before the previous slice's closing barrier
                load_a(stage ^ 1, s + 1);
                next = fetch_b(s + 1);
            }
            mma::cp_async_commit();
            mma::cp_async_wait<1>();  // this stage's x is in (the next stage's may still fly)
            __syncthreads();          // and every thread's weights of it
            mma::warp_tile_mma<__nv_bfloat16>(As[stage], Bs[stage], wm, wn, lane, acc);
            if (more) store_b(stage ^ 1, next);
            __syncthreads();
        }
    }

    // acc[mt][nt][2·half + c]: token m0 + wm·32 + mt·16 + g + 8·half, weight row n0 + wn·32 + nt·8 + 2·t4 + c.
    const bool partial = a.splits > 1;
    float* out = partial ? a.workspace + int64_t(blockIdx.z) * a.T * a.N : a.y;
    const int64_t ld = partial ? a.N : a.ldy;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int64_t t = m0 + wm * 32 + mt * 16 + g + 8 * half;
            if (t >= a.T) continue;
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const int64_t n = n0 + wn * 32 + nt * 8 + 2 * t4 + c;
                    if (n < a.N) out[t * ld + n] = acc[mt][nt][2 * half + c];
                }
        }
}

// y[t, n] = Σ_s workspace[s, t, n], s in order.
__global__ void wo_mma_reduce_kernel(WoMmaArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    const int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x;
    if (i >= a.T * a.N) return;
    float sum = 0.0f;
    for (int s = 0; s < a.splits; ++s)
        sum += a.workspace[s * a.T * a.N + i];
    a.y[(i / a.N) * a.ldy + i % a.N] = sum;
}

template <Format F>
void launch_format(const WoMmaArgs& a, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>((a.N + kBN - 1) / kBN), static_cast<unsigned>((a.T + kBM - 1) / kBM),
                    static_cast<unsigned>(a.splits));
    launch_kernel<wo_mma_kernel<F>>(grid, kThreads, 0, stream, a, rows_of(a));
    PAGODA_CUDA_CHECK_LAUNCH();
    if (a.splits > 1) {
        launch_kernel<wo_mma_reduce_kernel>(grid_for(a.T * a.N, kThreads), kThreads, 0, stream, a);
        PAGODA_CUDA_CHECK_LAUNCH();
    }
}

}  // namespace

bool wo_mma_fits(const WoMmaArgs& a) {
    if (a.K % kBK != 0 || a.ldx % 8 != 0 || !aligned(a.x, 16)) return false;
    if (a.w != nullptr)
        return a.w_stride % 16 == 0 && aligned(a.w, 16) && a.scales.data && a.scales.cols % kPerThread == 0;
    const Int4Weight& w = a.int_w;
    if (w.data == nullptr || w.scales == nullptr || w.group_size % kPerThread != 0 || a.K % w.group_size != 0)
        return false;
    const int row_align = w.bits == 8 ? 16 : 8;  // a thread's 16 weights: 16 bytes at 8 bits, 8 at 4
    return (w.bits == 4 || w.bits == 8) && w.row_bytes % row_align == 0 && aligned(w.data, row_align);
}

int plan_wo_mma_splits(int64_t T, int64_t N, int64_t K, int sm_count) {
    const int64_t tiles = ((N + kBN - 1) / kBN) * ((T + kBM - 1) / kBM);
    const int64_t want = (2 * int64_t(sm_count) + tiles - 1) / tiles;
    // At least four slices a range (the two-stage pipeline needs a few to run), at most 16 ranges.
    const int64_t most = std::max<int64_t>(1, std::min<int64_t>(16, K / (4 * kBK)));
    return static_cast<int>(std::max<int64_t>(1, std::min(want, most)));
}

void launch_wo_mma(const WoMmaArgs& a, cudaStream_t stream) {
    if (a.T == 0 || a.N == 0) return;
    PAGODA_KERNEL_REQUIRE(wo_mma_fits(a) && a.splits >= 1 && (a.splits == 1 || a.workspace),
                          "wo_mma: a weight or input it does not take (wo_mma_fits), or no workspace for its splits");
    if (a.w != nullptr)
        launch_format<Format::Fp8>(a, stream);
    else if (a.int_w.bits == 8)
        launch_format<Format::Int8>(a, stream);
    else
        launch_format<Format::Int4>(a, stream);
}

}  // namespace pagoda::kernels::cuda
