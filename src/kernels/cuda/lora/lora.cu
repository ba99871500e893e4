// The LoRA shrink and expand kernels (lora.h): bf16 adapter matrices, F32 activations and sums. A block works on one
// tile (up to 16 tokens of one adapter slot), so each adapter's matrices are read once a tile rather than once a token,
// and only up to the adapter's rank on the part (the blocks of a part it leaves alone return at once).
//
// Both are built for latency, not arithmetic: a decode step runs them for every projection on a few kilobytes of
// adapter, and an H100 (session 23, ncu over the op bench) took 12 µs for a one-token shrink and 33 µs for an
// eight-token one whose blocks were ~90% stalled on loads issued one round trip after another (one bf16 of A a lane,
// x staged in a loop, the tile, the slot's rank and the token order each waited for before the next load). Now:
// - the shrink's block takes one split of K (kLoraSplitK = 512 inputs) and 16 rows of A: each lane loads its runs of 4
//   inputs of its two rows at once (8-byte loads), after asking L2 for them before pdl_wait (the slots are copied in
//   before the step and written by no kernel); the tile's x is staged with every load in flight, then read as float4;
// - the expand's block takes 256 output features (two a thread), loads B's rows, the token order and y while the
//   splits' sums of u come in, up to kUSumLoads loads a thread in flight.
// Every token's sums are taken in the same order in every instance (kTokens = 1, 2, 4, 8, 16: LoraArgs::tile_tokens)
// and in every step (fmaf chains over k, then over the splits, then over r), so neither the instance nor the step's
// other tokens change a bit of a token's delta.
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/lora/lora.h"
#include "kernels/cuda/lora/lora_internal.cuh"

namespace pagoda::kernels::cuda {

namespace {

using lora::slot_rank;
using lora::tile_slot;

constexpr int kShrinkWarps = 8;
constexpr int kShrinkThreads = kShrinkWarps * 32;
constexpr int kShrinkRowsPerWarp = 2;
constexpr int kShrinkRows = kShrinkWarps * kShrinkRowsPerWarp;  // A's rows a block takes
// A lane's inputs come in runs of 4 (a float4 of staged x, 4 bf16 of a row of A): lane l's run i of a split covers
// inputs (32 i + l) · 4 .. + 3, so a warp's loads of a row are 256 contiguous bytes.
constexpr int kRun = 4;
constexpr int kRunsPerLane = static_cast<int>(kLoraSplitK) / (32 * kRun);
static_assert(kRunsPerLane * 32 * kRun == kLoraSplitK, "a split is whole runs of every lane");
static_assert(kLoraSplitK % kShrinkThreads == 0 && kLoraTileTokens * kLoraSplitK * sizeof(float) <= 32 * 1024,
              "a split's staging is whole rounds of the block, and a tile's x for it fits 32 KB");
constexpr int kExpandThreads = 128;
constexpr int kExpandRowsPerThread = 2;
constexpr int kExpandRows = kExpandThreads * kExpandRowsPerThread;  // output features a block takes

// The shrink block's split of K and its first row of A (blockIdx.z = row group · splits + split).
struct ShrinkBlock {
    int64_t k_begin, k_end, r0, split;
    __device__ explicit ShrinkBlock(const LoraArgs& a) {
        const int64_t splits = lora_splits(a.K);
        split = blockIdx.z % splits;
        r0 = static_cast<int64_t>(blockIdx.z / splits) * kShrinkRows;
        k_begin = split * kLoraSplitK;
        k_end = min(a.K, k_begin + kLoraSplitK);
    }
    // Row q of the warp's two: rows past the adapter's rank but within the table's lie in the slot (their sums are
    // dropped), so the loads need not wait for the rank.
    __device__ const __nv_bfloat16* row(const LoraArgs& a, const std::byte* slot, const LoraPartArgs& p, int warp,
                                        int q) const {
        const int64_t r = min(r0 + warp * kShrinkRowsPerWarp + q, a.rank - 1);
        return reinterpret_cast<const __nv_bfloat16*>(slot + p.a_offset) + r * a.K;
    }
};

// Asks L2 for the warp's rows of A in the block's split (one request per 128-byte line), before pdl_wait: the step's
// tiles and the adapter slots are copied in before the step, and no kernel writes them.
__device__ __forceinline__ void prefetch_a_rows(const LoraArgs& a, int warp, int lane) {
    const LoraTileDesc tile = a.tiles[blockIdx.x];
    if (tile.count <= 0 || (lane & 15) != 0) return;
    const ShrinkBlock b(a);
    const std::byte* slot = tile_slot(a, tile);
#pragma unroll
    for (int q = 0; q < kShrinkRowsPerWarp; ++q) {
        const __nv_bfloat16* row = b.row(a, slot, a.parts[blockIdx.y], warp, q);
#pragma unroll
        for (int i = 0; i < kRunsPerLane; ++i) {
            const int64_t k = b.k_begin + (32 * i + lane) * kRun;
            if (k < b.k_end) asm volatile("prefetch.global.L2 [%0];" ::"l"(row + k));
        }
    }
}

// Four bf16 of a row of A from k (zeros past k_end). `aligned`: every run starts 8-byte aligned and lies wholly
// inside or outside the split (K a multiple of 4: the matrices start at 256-byte boundaries).
__device__ __forceinline__ uint2 load_run(const __nv_bfloat16* row, int64_t k, int64_t k_end, bool aligned) {
    if (aligned) return k < k_end ? __ldg(reinterpret_cast<const uint2*>(row + k)) : make_uint2(0, 0);
    uint32_t w[kRun / 2];
    lora::bf16_words(row, k, k_end, w);
    return make_uint2(w[0], w[1]);
}

__device__ __forceinline__ float4 bf16x4_to_float4(uint2 v) {
    const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v.x));
    const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v.y));
    return make_float4(lo.x, lo.y, hi.x, hi.y);
}

template <int kTokens>
__global__ void __launch_bounds__(kShrinkThreads, 2) lora_shrink_kernel(LoraArgs a) {
    const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
    prefetch_a_rows(a, warp, lane);
    PAGODA_KERNEL_PROLOGUE();
    __shared__ __align__(16) float xs[kTokens][kLoraSplitK];
    const LoraTileDesc tile = a.tiles[blockIdx.x];
    if (tile.count <= 0) return;  // padding: the same for the whole block
    const LoraPartArgs p = a.parts[blockIdx.y];
    const std::byte* slot = tile_slot(a, tile);
    const ShrinkBlock b(a);
    // Issued together: A's runs, the slot's rank and the tile's token rows; x's loads need the rows only.
    const bool aligned = a.K % kRun == 0;
    uint2 w[kShrinkRowsPerWarp][kRunsPerLane];
#pragma unroll
    for (int q = 0; q < kShrinkRowsPerWarp; ++q) {
        const __nv_bfloat16* row = b.row(a, slot, p, warp, q);
#pragma unroll
        for (int i = 0; i < kRunsPerLane; ++i)
            w[q][i] = load_run(row, b.k_begin + (32 * i + lane) * kRun, b.k_end, aligned);
    }
    const float* x_row[kTokens];
#pragma unroll
    for (int j = 0; j < kTokens; ++j)
        x_row[j] = j < tile.count ? a.x + static_cast<int64_t>(a.order[tile.begin + j]) * a.x_stride : nullptr;
    const int64_t rank = slot_rank(a, slot, p);
    if (b.r0 >= rank) return;  // rows past the adapter's rank on this part (all of them where it has none)
    // The tile's x in the split, every load in flight before the first store (step i: token i / kSteps, input
    // (i % kSteps) · kShrinkThreads + thread).
    constexpr int kSteps = static_cast<int>(kLoraSplitK) / kShrinkThreads;
    float staged[kTokens * kSteps];
#pragma unroll
    for (int i = 0; i < kTokens * kSteps; ++i) {
        const int64_t k = b.k_begin + (i % kSteps) * kShrinkThreads + threadIdx.x;
        staged[i] = x_row[i / kSteps] != nullptr && k < b.k_end ? x_row[i / kSteps][k] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kTokens * kSteps; ++i)
        xs[i / kSteps][(i % kSteps) * kShrinkThreads + threadIdx.x] = staged[i];
    __syncthreads();
    float acc[kShrinkRowsPerWarp][kTokens] = {};
#pragma unroll
    for (int i = 0; i < kRunsPerLane; ++i) {
        float4 wf[kShrinkRowsPerWarp];
#pragma unroll
        for (int q = 0; q < kShrinkRowsPerWarp; ++q)
            wf[q] = bf16x4_to_float4(w[q][i]);
#pragma unroll
        for (int j = 0; j < kTokens; ++j) {
            const float4 xv = *reinterpret_cast<const float4*>(&xs[j][(32 * i + lane) * kRun]);
#pragma unroll
            for (int q = 0; q < kShrinkRowsPerWarp; ++q) {
                float s = acc[q][j];
                s = fmaf(xv.x, wf[q].x, s);
                s = fmaf(xv.y, wf[q].y, s);
                s = fmaf(xv.z, wf[q].z, s);
                acc[q][j] = fmaf(xv.w, wf[q].w, s);
            }
        }
    }
    const int64_t u_stride = a.num_parts * a.rank;
    float* u = a.u + b.split * a.u_rows * u_stride;
#pragma unroll
    for (int q = 0; q < kShrinkRowsPerWarp; ++q) {
        const int64_t r = b.r0 + warp * kShrinkRowsPerWarp + q;
#pragma unroll
        for (int j = 0; j < kTokens; ++j) {
            const float v = warp_sum(acc[q][j]);
            if (lane == 0 && r < rank && j < tile.count)
                u[(tile.begin + j) * u_stride + static_cast<int64_t>(blockIdx.y) * a.rank + r] = v;
        }
    }
}

// B's row for output feature n of the part: its first 16 ranks, loaded as two 16-byte pieces where the room R keeps
// rows 16-byte aligned (the common rank-16 adapter: all of the row), else nothing (read one by one in the sum).
struct BRowHead {
    static constexpr int kRanks = 16;
    uint4 v[2];
    __device__ void load(const __nv_bfloat16* b, bool vec, int64_t rank) {
#pragma unroll
        for (int c = 0; c < 2; ++c)
            v[c] = vec && c * 8 < rank ? __ldg(reinterpret_cast<const uint4*>(b) + c) : make_uint4(0, 0, 0, 0);
    }
};

// Asks L2 for the lines of B's rows this thread's features take, before pdl_wait (as the shrink's).
__device__ __forceinline__ void prefetch_b_rows(const LoraArgs& a) {
    const LoraTileDesc tile = a.tiles[blockIdx.x];
    const LoraPartArgs p = a.parts[blockIdx.z];
    if (tile.count <= 0) return;
#pragma unroll
    for (int m = 0; m < kExpandRowsPerThread; ++m) {
        const int64_t n = static_cast<int64_t>(blockIdx.y) * kExpandRows + m * kExpandThreads + threadIdx.x;
        const auto* b = reinterpret_cast<const __nv_bfloat16*>(tile_slot(a, tile) + p.b_offset) + n * a.rank;
        if (n < p.rows && (n * a.rank * 2) % 128 < a.rank * 2)  // the thread whose row starts a line's first
            asm volatile("prefetch.global.L2 [%0];" ::"l"(b));
    }
}

template <int kTokens>
__global__ void __launch_bounds__(kExpandThreads) lora_expand_kernel(LoraArgs a) {
    prefetch_b_rows(a);
    PAGODA_KERNEL_PROLOGUE();
    extern __shared__ float us[];  // [kTokens, R]: the tile's u for this part, the splits summed
    const LoraTileDesc tile = a.tiles[blockIdx.x];
    const LoraPartArgs p = a.parts[blockIdx.z];
    const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kExpandRows;
    if (tile.count <= 0 || n0 >= p.rows) return;  // the same for the whole block
    const std::byte* slot = tile_slot(a, tile);
    const int64_t R = a.rank;
    // Issued before the sums of u are waited for: the rank, B's rows, the token order and y.
    const int64_t rank = slot_rank(a, slot, p);
    const bool vec = R % 8 == 0;
    const auto* B = reinterpret_cast<const __nv_bfloat16*>(slot + p.b_offset);
    BRowHead head[kExpandRowsPerThread];
    float yv[kExpandRowsPerThread][kTokens];
    int32_t token[kTokens];  // the tile's tokens (rows of x and y), -1 past its count
#pragma unroll
    for (int j = 0; j < kTokens; ++j)
        token[j] = j < tile.count ? a.order[tile.begin + j] : -1;
#pragma unroll
    for (int m = 0; m < kExpandRowsPerThread; ++m) {
        const int64_t n = n0 + m * kExpandThreads + threadIdx.x;
        head[m].load(B + min(n, p.rows - 1) * R, vec, R);
#pragma unroll
        for (int j = 0; j < kTokens; ++j)
            yv[m][j] = token[j] >= 0 && n < p.rows ? a.y[token[j] * a.y_stride + p.row_offset + n] : 0.0f;
    }
    lora::sum_splits<kTokens, kExpandThreads>(a, tile, us);
    __syncthreads();
    if (rank <= 0) return;  // the slot's adapter leaves this part alone (after the barrier: every thread reached it)
#pragma unroll
    for (int m = 0; m < kExpandRowsPerThread; ++m) {
        const int64_t n = n0 + m * kExpandThreads + threadIdx.x;
        if (n >= p.rows) break;
        const __nv_bfloat16* b = B + n * R;
        float acc[kTokens] = {};
        // Eight ranks of B's row from r0 on (bf16 bits), added to every token's sum in rank order.
        const auto add8 = [&](uint4 raw, int64_t r0) {
            const float4 lo = bf16x4_to_float4(make_uint2(raw.x, raw.y));
            const float4 hi = bf16x4_to_float4(make_uint2(raw.z, raw.w));
            const float wv[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                if (r0 + e >= rank) break;  // past the rank B holds nothing of the adapter (NaN in the op tests)
#pragma unroll
                for (int j = 0; j < kTokens; ++j)
                    acc[j] = fmaf(us[(r0 + e) + j * R], wv[e], acc[j]);
            }
        };
        if (vec) {
#pragma unroll
            for (int c = 0; c < 2; ++c)
                if (c * 8 < rank) add8(head[m].v[c], c * 8);
            for (int64_t r0 = BRowHead::kRanks; r0 < rank; r0 += 8)
                add8(__ldg(reinterpret_cast<const uint4*>(b + r0)), r0);
        } else {
            for (int64_t r0 = 0; r0 < rank; r0 += 8) {
                uint32_t w[4];
                lora::bf16_words(b, r0, rank, w);
                add8(make_uint4(w[0], w[1], w[2], w[3]), r0);
            }
        }
#pragma unroll
        for (int j = 0; j < kTokens; ++j)
            if (token[j] >= 0) a.y[token[j] * a.y_stride + p.row_offset + n] = yv[m][j] + acc[j];
    }
}

// Calls launch(std::integral_constant<int, n>) with the instance n for tiles of up to a.tile_tokens tokens (1-16:
// n = 1, 2, 4, 8 or 16, the least that holds them).
template <class Launch>
void for_tile_tokens(const LoraArgs& a, Launch&& launch) {
    PAGODA_KERNEL_REQUIRE(a.tile_tokens >= 1 && a.tile_tokens <= kLoraTileTokens,
                          "LoRA: tile_tokens must be 1 to kLoraTileTokens");
    if (a.tile_tokens <= 1) return launch(std::integral_constant<int, 1>{});
    if (a.tile_tokens <= 2) return launch(std::integral_constant<int, 2>{});
    if (a.tile_tokens <= 4) return launch(std::integral_constant<int, 4>{});
    if (a.tile_tokens <= 8) return launch(std::integral_constant<int, 8>{});
    launch(std::integral_constant<int, 16>{});
}

}  // namespace

void launch_lora_shrink(const LoraArgs& a, cudaStream_t stream) {
    if (a.num_tiles <= 0 || a.rank <= 0 || a.num_parts <= 0) return;
    PAGODA_KERNEL_REQUIRE(a.num_parts <= kLoraMaxParts, "LoRA: too many parts in one projection");
    PAGODA_KERNEL_REQUIRE(a.u_rows >= 0 && a.K > 0, "LoRA shrink: no inputs or no rows of u");
    if (a.tensor_cores) return launch_lora_shrink_mma(a, stream);
    const int64_t groups = (a.rank + kShrinkRows - 1) / kShrinkRows;
    PAGODA_KERNEL_REQUIRE(groups * lora_splits(a.K) <= 65535, "LoRA shrink grid too large");
    const dim3 grid(static_cast<unsigned>(a.num_tiles), static_cast<unsigned>(a.num_parts),
                    static_cast<unsigned>(groups * lora_splits(a.K)));
    for_tile_tokens(a, [&](auto tokens) {
        launch_kernel<lora_shrink_kernel<decltype(tokens)::value>>(grid, kShrinkThreads, 0, stream, a);
    });
}

void launch_lora_expand(const LoraArgs& a, cudaStream_t stream) {
    if (a.num_tiles <= 0 || a.rank <= 0 || a.num_parts <= 0 || a.max_rows <= 0) return;
    PAGODA_KERNEL_REQUIRE(a.num_parts <= kLoraMaxParts, "LoRA: too many parts in one projection");
    if (a.tensor_cores) return launch_lora_expand_mma(a, stream);
    const int64_t col_blocks = (a.max_rows + kExpandRows - 1) / kExpandRows;
    PAGODA_KERNEL_REQUIRE(col_blocks <= 65535 && kLoraTileTokens * a.rank * sizeof(float) <= 48 * 1024,
                          "LoRA expand grid or rank too large");
    const dim3 grid(static_cast<unsigned>(a.num_tiles), static_cast<unsigned>(col_blocks),
                    static_cast<unsigned>(a.num_parts));
    for_tile_tokens(a, [&](auto tokens) {
        constexpr int n = decltype(tokens)::value;
        const size_t smem = static_cast<size_t>(n * a.rank) * sizeof(float);
        launch_kernel<lora_expand_kernel<n>>(grid, kExpandThreads, smem, stream, a);
    });
}

}  // namespace pagoda::kernels::cuda
