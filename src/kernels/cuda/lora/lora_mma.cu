// The LoRA shrink and expand on tensor cores (mma.sync m16n8k16, bf16 in, f32 sums): LoraArgs::tensor_cores. The
// kernels of lora.cu do every multiply-add on CUDA cores, a warp reduction per (row, token): on an H100 (session 24)
// a 2,048-token step added 156-226 µs to a Qwen3-8B projection (~30 M warp instructions) and a 64-token one 24-33 µs.
// Here a tile of 16 tokens is one mma operand: x and u are rounded to bf16 (as vLLM's LoRA kernels take them; the
// CPU keeps f32, the op harness holds both to the bf16 tolerance), the sums stay f32.
//
// Shrink: block (tile, part, row group of 16 · splits): u^T[16 rows of A, 16 tokens] over the split's 512 inputs, its
// 8 warps taking 64 inputs each (two chunks of 32), the warps' sums added in warp order through shared memory. A
// thread of a row group (g = lane / 4, t = lane % 4) loads 8 consecutive inputs of rows g and g + 8 of A and of
// tokens g and g + 8 of x per chunk; mma's inputs k of a 16-input step are a fixed permutation of them (logical k 2t,
// 2t + 1, 2t + 8, 2t + 9 = inputs 8t .. 8t + 3 of the chunk's first step, 8t + 4 .. 8t + 7 of its second), the same
// for A and x, so the product is the sum over the chunk's 32 inputs.
// Expand: block (tile, 256 output features, part): y[16 tokens, 64 features a warp] += u[16 tokens, rank] · Bᵀ, one
// mma per 8 features and 16 ranks; logical rank 2t, 2t + 1, 2t + 8, 2t + 9 = ranks 4t .. 4t + 3 of the step's 16.
// A token's result depends on nothing else of its step (each output of an mma is its own sum, and the splits are
// summed in order), so the step's other tokens and its size change none of its bits.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm/mma_tile.cuh"
#include "kernels/cuda/lora/lora.h"
#include "kernels/cuda/lora/lora_internal.cuh"

namespace pagoda::kernels::cuda {

namespace {

using lora::slot_rank;
using lora::tile_slot;

constexpr int kTokens = kLoraTileTokens;  // an mma's 16 rows (expand) or two of its 8-column tiles (shrink)
static_assert(kTokens == 16, "a tile is one 16-token mma operand");
constexpr int kShrinkWarps = 8;
constexpr int kShrinkThreads = kShrinkWarps * 32;
constexpr int kRows = 16;  // rows of A a shrink block takes: one mma's 16
constexpr int kChunk = 32;
constexpr int kChunksPerWarp = static_cast<int>(kLoraSplitK) / (kShrinkWarps * kChunk);
static_assert(kChunksPerWarp * kShrinkWarps * kChunk == kLoraSplitK, "a split is whole chunks of every warp");
constexpr int kExpandWarps = 4;
constexpr int kExpandThreads = kExpandWarps * 32;
constexpr int kWarpFeatures = 64;                              // 8 mma column tiles a warp
constexpr int kExpandFeatures = kExpandWarps * kWarpFeatures;  // a block's

__device__ __forceinline__ uint32_t bf16x2(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (lo) in the low half: mma's element of lower k
    return *reinterpret_cast<const uint32_t*>(&v);
}

// Eight consecutive values from k of a row (zeros from `end` on): bf16 as four bf16x2 words, or f32 rounded to them.
// `whole`: the eight start 16-byte aligned and lie wholly before `end` or wholly past it.
__device__ __forceinline__ uint4 load8(const __nv_bfloat16* row, int64_t k, int64_t end, bool whole) {
    if (whole) return k < end ? __ldg(reinterpret_cast<const uint4*>(row + k)) : make_uint4(0, 0, 0, 0);
    uint32_t w[4];
    lora::bf16_words(row, k, end, w);
    return make_uint4(w[0], w[1], w[2], w[3]);
}
__device__ __forceinline__ uint4 load8(const float* row, int64_t k, int64_t end, bool whole) {
    float v[8];
    if (whole) {
        const float4 a = k < end ? *reinterpret_cast<const float4*>(row + k) : make_float4(0, 0, 0, 0);
        const float4 b = k < end ? *reinterpret_cast<const float4*>(row + k + 4) : make_float4(0, 0, 0, 0);
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else {
#pragma unroll
        for (int e = 0; e < 8; ++e)
            v[e] = k + e < end ? row[k + e] : 0.0f;
    }
    return make_uint4(bf16x2(v[0], v[1]), bf16x2(v[2], v[3]), bf16x2(v[4], v[5]), bf16x2(v[6], v[7]));
}

// Calls f(nt, h, e) for each of a thread's accumulators over kTiles 8-column tiles: acc[nt][2h + e] is mma row g + 8h,
// column nt · 8 + 2t + e.
template <int kTiles, class F>
__device__ __forceinline__ void for_each_acc(F&& f) {
#pragma unroll
    for (int nt = 0; nt < kTiles; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 2; ++e)
                f(nt, h, e);
}

__global__ void __launch_bounds__(kShrinkThreads) lora_shrink_mma_kernel(LoraArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    __shared__ float partial[kShrinkWarps][kRows][kTokens];  // each warp's sums over its inputs
    const LoraTileDesc tile = a.tiles[blockIdx.x];
    if (tile.count <= 0) return;  // padding: the same for the whole block
    const LoraPartArgs p = a.parts[blockIdx.y];
    const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
    const int g = lane >> 2, t = lane & 3;
    const int64_t splits = lora_splits(a.K), split = blockIdx.z % splits;
    const int64_t r0 = static_cast<int64_t>(blockIdx.z / splits) * kRows;
    const int64_t k_begin = split * kLoraSplitK, k_end = min(a.K, k_begin + kLoraSplitK);
    const std::byte* slot = tile_slot(a, tile);
    // Rows past the adapter's rank but within the table's lie in the slot: loaded before the rank is known, their
    // sums dropped (and each output of an mma is its own sum, so they reach no other row).
    const auto* A = reinterpret_cast<const __nv_bfloat16*>(slot + p.a_offset);
    const __nv_bfloat16* a_row[2] = {A + min(r0 + g, a.rank - 1) * a.K, A + min(r0 + g + 8, a.rank - 1) * a.K};
    const float* x_row[2];
#pragma unroll
    for (int h = 0; h < 2; ++h)
        x_row[h] =
            g + 8 * h < tile.count ? a.x + static_cast<int64_t>(a.order[tile.begin + g + 8 * h]) * a.x_stride : nullptr;
    const bool whole = a.K % 8 == 0 && a.x_stride % 4 == 0 && reinterpret_cast<uintptr_t>(a.x) % 16 == 0;
    uint4 af[kChunksPerWarp][2], xf[kChunksPerWarp][2];  // [chunk][row g / g + 8], [chunk][token g / g + 8]
#pragma unroll
    for (int c = 0; c < kChunksPerWarp; ++c) {
        const int64_t k = k_begin + (warp * kChunksPerWarp + c) * kChunk + 8 * t;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            af[c][h] = load8(a_row[h], k, k_end, whole);
            xf[c][h] = x_row[h] != nullptr ? load8(x_row[h], k, k_end, whole) : make_uint4(0, 0, 0, 0);
        }
    }
    const int64_t rank = slot_rank(a, slot, p);
    if (r0 >= rank) return;  // rows past the adapter's rank on this part (all of them where it has none)
    float acc[2][4] = {};    // [column tile: tokens 0-7, 8-15][mma's c0..c3]
#pragma unroll
    for (int c = 0; c < kChunksPerWarp; ++c) {
#pragma unroll
        for (int step = 0; step < 2; ++step) {
            // step 0: inputs 8t .. 8t + 3 of the chunk (words x, y), step 1: 8t + 4 .. 8t + 7 (words z, w).
            const uint32_t a0 = step == 0 ? af[c][0].x : af[c][0].z, a2 = step == 0 ? af[c][0].y : af[c][0].w;
            const uint32_t a1 = step == 0 ? af[c][1].x : af[c][1].z, a3 = step == 0 ? af[c][1].y : af[c][1].w;
            const uint32_t fa[4] = {a0, a1, a2, a3};
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                const uint32_t fb[2] = {step == 0 ? xf[c][nt].x : xf[c][nt].z, step == 0 ? xf[c][nt].y : xf[c][nt].w};
                mma::mma_16816<__nv_bfloat16>(acc[nt], fa, fb);
            }
        }
    }
    // Row g + 8h of the group, token nt · 8 + 2t + e.
    for_each_acc<2>([&](int nt, int h, int e) { partial[warp][g + 8 * h][nt * 8 + 2 * t + e] = acc[nt][2 * h + e]; });
    __syncthreads();
    const int r = static_cast<int>(threadIdx.x) / kTokens, j = static_cast<int>(threadIdx.x) % kTokens;
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kShrinkWarps; ++w)  // in warp order: a fixed order of the split's inputs
        sum += partial[w][r][j];
    const int64_t u_stride = a.num_parts * a.rank;
    if (r0 + r < rank && j < tile.count)
        a.u[(split * a.u_rows + tile.begin + j) * u_stride + static_cast<int64_t>(blockIdx.y) * a.rank + r0 + r] = sum;
}

__global__ void __launch_bounds__(kExpandThreads) lora_expand_mma_kernel(LoraArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    extern __shared__ float us[];  // [kTokens, R]: the tile's u for this part, the splits summed
    const LoraTileDesc tile = a.tiles[blockIdx.x];
    const LoraPartArgs p = a.parts[blockIdx.z];
    const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kExpandFeatures;
    if (tile.count <= 0 || n0 >= p.rows) return;  // the same for the whole block
    const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
    const int g = lane >> 2, t = lane & 3;
    const std::byte* slot = tile_slot(a, tile);
    const int64_t R = a.rank, rank = slot_rank(a, slot, p);
    const auto* B = reinterpret_cast<const __nv_bfloat16*>(slot + p.b_offset);
    // y of tokens g and g + 8 at the thread's features (feature n0 + 64 warp + 8 nt + 2t + e), loaded while the
    // splits' sums of u come in.
    int64_t y_at[2];
#pragma unroll
    for (int h = 0; h < 2; ++h)
        y_at[h] = g + 8 * h < tile.count
                      ? static_cast<int64_t>(a.order[tile.begin + g + 8 * h]) * a.y_stride + p.row_offset
                      : -1;
    const int64_t n_warp = n0 + warp * kWarpFeatures;
    float yv[8][4];  // [column tile][mma's c0..c3]: token g + 8h, feature n_warp + 8 nt + 2t + e
    for_each_acc<8>([&](int nt, int h, int e) {
        const int64_t n = n_warp + nt * 8 + 2 * t + e;
        yv[nt][2 * h + e] = y_at[h] >= 0 && n < p.rows ? a.y[y_at[h] + n] : 0.0f;
    });
    lora::sum_splits<kTokens, kExpandThreads>(a, tile, us);
    __syncthreads();
    if (rank <= 0) return;  // the slot's adapter leaves this part alone (after the barrier: every thread reached it)
    float acc[8][4] = {};
    const bool whole = R % 4 == 0;  // B's rows 8-byte aligned (each matrix starts at a 256-byte boundary)
    for (int64_t s0 = 0; s0 < rank; s0 += 16) {
        // Ranks s0 + 4t .. + 3 (past the adapter's rank: zeros, whatever u or B hold there).
        const int64_t rk = s0 + 4 * t;
        float u4[2][4];
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                u4[h][e] = rk + e < rank ? us[(g + 8 * h) * R + rk + e] : 0.0f;
        const uint32_t fa[4] = {bf16x2(u4[0][0], u4[0][1]), bf16x2(u4[1][0], u4[1][1]), bf16x2(u4[0][2], u4[0][3]),
                                bf16x2(u4[1][2], u4[1][3])};
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
            const int64_t n = n_warp + nt * 8 + g;  // B's row: this thread's column of the mma
            uint32_t fb[2] = {0, 0};
            if (n < p.rows) {
                const __nv_bfloat16* b = B + n * R;
                if (whole && rk + 4 <= rank) {
                    const uint2 v = __ldg(reinterpret_cast<const uint2*>(b + rk));
                    fb[0] = v.x, fb[1] = v.y;
                } else {
                    lora::bf16_words(b, rk, rank, fb);
                }
            }
            mma::mma_16816<__nv_bfloat16>(acc[nt], fa, fb);
        }
    }
    for_each_acc<8>([&](int nt, int h, int e) {  // token g + 8h, feature n_warp + 8 nt + 2t + e
        const int64_t n = n_warp + nt * 8 + 2 * t + e;
        if (y_at[h] >= 0 && n < p.rows) a.y[y_at[h] + n] = yv[nt][2 * h + e] + acc[nt][2 * h + e];
    });
}

// The 16-byte loads of A's rows and the 8-byte ones of B's need the slots' matrices 16-byte aligned (the table puts
// each at a 256-byte boundary of a 256-byte aligned slot).
void require_aligned_slots(const LoraArgs& a) {
    bool ok = aligned(a.slots, 16) && a.slot_stride % 16 == 0;
    for (int p = 0; p < a.num_parts; ++p)
        ok = ok && a.parts[p].a_offset % 16 == 0 && a.parts[p].b_offset % 16 == 0;
    PAGODA_KERNEL_REQUIRE(ok, "LoRA tensor-core kernels: adapter slots' matrices must be 16-byte aligned");
}

}  // namespace

void launch_lora_shrink_mma(const LoraArgs& a, cudaStream_t stream) {
    require_aligned_slots(a);
    const int64_t groups = (a.rank + kRows - 1) / kRows;
    PAGODA_KERNEL_REQUIRE(groups * lora_splits(a.K) <= 65535, "LoRA shrink grid too large");
    const dim3 grid(static_cast<unsigned>(a.num_tiles), static_cast<unsigned>(a.num_parts),
                    static_cast<unsigned>(groups * lora_splits(a.K)));
    launch_kernel<lora_shrink_mma_kernel>(grid, kShrinkThreads, 0, stream, a);
}

void launch_lora_expand_mma(const LoraArgs& a, cudaStream_t stream) {
    require_aligned_slots(a);
    const int64_t col_blocks = (a.max_rows + kExpandFeatures - 1) / kExpandFeatures;
    PAGODA_KERNEL_REQUIRE(col_blocks <= 65535 && kTokens * a.rank * sizeof(float) <= 48 * 1024,
                          "LoRA expand grid or rank too large");
    const dim3 grid(static_cast<unsigned>(a.num_tiles), static_cast<unsigned>(col_blocks),
                    static_cast<unsigned>(a.num_parts));
    launch_kernel<lora_expand_mma_kernel>(grid, kExpandThreads, static_cast<size_t>(kTokens * a.rank) * sizeof(float),
                                          stream, a);
}

}  // namespace pagoda::kernels::cuda
