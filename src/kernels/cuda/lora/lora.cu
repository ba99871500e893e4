// The LoRA shrink and expand kernels (lora.h): bf16 adapter matrices, F32 activations and sums. A block works on one
// tile (up to 16 tokens of one adapter slot), so
// each adapter's matrices are read once a tile rather than once a token, and only up to the adapter's rank on the
// part (the blocks of a part it leaves alone return at once): the shrink splits K into ranges of kLoraSplitK, one a
// block, stages the tile's inputs in shared memory a chunk at a time and gives each warp two of A's rows; the expand
// sums the ranges' u in shared memory and gives each thread one output feature (one row of B). Plain rather than
// tuned: on an H100 (session 23) a decode step of 64 streams over 8 adapters spent 39 µs a projection in them, 27% of
// the step, when the shrink staged its inputs in a loop over a runtime bound; it now issues a chunk's staging loads at
// once (these kernels passed the LoRA op tests on that H100; what it changes in time is not measured: the A/B meant to
// say ran the change's kernel library for both binaries).
// Both are instantiated for tiles of at most 1, 2, 4, 8 and 16 tokens (LoraArgs::tile_tokens: a step of T tokens
// has no tile of more than T): a decode step of a few sequences then stages, multiplies and keeps in registers only
// the tokens a tile can hold instead of 16 (with one token, a 16th of the work), and takes its split of K in one
// chunk. Every token's sums are taken in the same order in every instance (a lane adds its k in increasing order,
// chunk after chunk), so the instance does not change a bit of the result.
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/lora/lora.h"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kShrinkWarps = 8;
constexpr int kShrinkRowsPerWarp = 2;
constexpr int kShrinkRows = kShrinkWarps * kShrinkRowsPerWarp;  // A's rows a block takes
constexpr int kExpandThreads = 128;
// Inputs staged in shared memory per pass: up to 32 KB of tokens x inputs, one whole split for tiles of up to 8
// tokens, two halves for 16.
template <int kTokens>
constexpr int kShrinkChunk = kTokens <= 8 ? static_cast<int>(kLoraSplitK) : 8192 / kTokens;
// Staged values a thread loads per chunk: all of them issued before the first is used.
template <int kTokens>
constexpr int kStagePerThread = kTokens* kShrinkChunk<kTokens> / (kShrinkWarps * 32);
template <int kTokens>
constexpr bool kChunkFits =
    kShrinkChunk<kTokens> % (kShrinkWarps * 32) == 0 &&
    kLoraSplitK % kShrinkChunk<kTokens> == 0 && kTokens* kShrinkChunk<kTokens> * sizeof(float) <= 32 * 1024;
static_assert(kChunkFits<1> && kChunkFits<2> && kChunkFits<4> && kChunkFits<8> && kChunkFits<16>,
              "a split of K is whole chunks, a chunk's row is whole blocks of threads, and it fits 32 KB");

// The rank of the slot's adapter on part p, from the slot's header; never above the room its matrices have (the
// table writes no more, and a header that said more must not send the kernels past A, B or the shared tile).
__device__ __forceinline__ int64_t slot_rank(const LoraArgs& a, const std::byte* slot, const LoraPartArgs& p) {
    return min(static_cast<int64_t>(*reinterpret_cast<const int32_t*>(slot + p.rank_offset)), a.rank);
}

template <int kTokens>
__global__ void __launch_bounds__(kShrinkWarps * 32, 2) lora_shrink_kernel(LoraArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    constexpr int kChunk = kShrinkChunk<kTokens>;
    __shared__ float xs[kTokens][kChunk];
    const LoraTileDesc tile = a.tiles[blockIdx.x];
    if (tile.count <= 0) return;  // padding: the same for the whole block
    const LoraPartArgs p = a.parts[blockIdx.y];
    const std::byte* slot = a.slots + static_cast<int64_t>(tile.slot) * a.slot_stride;
    const int64_t rank = slot_rank(a, slot, p);
    const int64_t splits = lora_splits(a.K);
    const int64_t split = blockIdx.z % splits, r0 = static_cast<int64_t>(blockIdx.z / splits) * kShrinkRows;
    if (r0 >= rank) return;  // rows past the adapter's rank on this part (all of them where it has none)
    const int64_t k_begin = split * kLoraSplitK, k_end = min(a.K, k_begin + kLoraSplitK);
    const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
    const auto* A = reinterpret_cast<const __nv_bfloat16*>(slot + p.a_offset);
    const __nv_bfloat16* row[kShrinkRowsPerWarp];
    bool live[kShrinkRowsPerWarp];
#pragma unroll
    for (int q = 0; q < kShrinkRowsPerWarp; ++q) {
        const int64_t r = r0 + warp * kShrinkRowsPerWarp + q;
        live[q] = r < rank;
        row[q] = A + (live[q] ? r : 0) * a.K;
    }
    // The tile's token rows of x, found once: the staging loads below then need nothing loaded before them.
    const float* x_row[kTokens];
#pragma unroll
    for (int j = 0; j < kTokens; ++j)
        x_row[j] = j < tile.count ? a.x + static_cast<int64_t>(a.order[tile.begin + j]) * a.x_stride : nullptr;
    float acc[kShrinkRowsPerWarp][kTokens] = {};
    for (int64_t k0 = k_begin; k0 < k_end; k0 += kChunk) {
        __syncthreads();  // every warp is done with the previous chunk
        // Step i: token i / kSteps, inputs (i % kSteps) · blockDim + thread. A fixed count a thread, unrolled, so all
        // its loads are in flight at once (a loop over a runtime bound issued them one round trip after another:
        // ~16 serial L2 round trips a chunk, most of a decode step's LoRA time).
        constexpr int kSteps = kChunk / (kShrinkWarps * 32);  // steps a token row takes
        float staged[kStagePerThread<kTokens>];
#pragma unroll
        for (int i = 0; i < kStagePerThread<kTokens>; ++i) {
            const int j = i / kSteps, k = (i % kSteps) * kShrinkWarps * 32 + static_cast<int>(threadIdx.x);
            staged[i] = x_row[j] != nullptr && k0 + k < k_end ? x_row[j][k0 + k] : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < kStagePerThread<kTokens>; ++i)
            xs[i / kSteps][(i % kSteps) * kShrinkWarps * 32 + static_cast<int>(threadIdx.x)] = staged[i];
        __syncthreads();
#pragma unroll 8
        for (int c = 0; c < kChunk / 32; ++c) {
            const int64_t k = k0 + c * 32 + lane;
            float w[kShrinkRowsPerWarp];
#pragma unroll
            for (int q = 0; q < kShrinkRowsPerWarp; ++q)
                w[q] = live[q] && k < k_end ? __bfloat162float(row[q][k]) : 0.0f;
#pragma unroll
            for (int j = 0; j < kTokens; ++j) {
                const float xv = xs[j][c * 32 + lane];
#pragma unroll
                for (int q = 0; q < kShrinkRowsPerWarp; ++q)
                    acc[q][j] += xv * w[q];
            }
        }
    }
    const int64_t u_stride = a.num_parts * a.rank;
    float* u = a.u + split * a.u_rows * u_stride;
#pragma unroll
    for (int q = 0; q < kShrinkRowsPerWarp; ++q) {
        const int64_t r = r0 + warp * kShrinkRowsPerWarp + q;
#pragma unroll
        for (int j = 0; j < kTokens; ++j) {
            const float v = warp_sum(acc[q][j]);
            if (lane == 0 && live[q] && j < tile.count)
                u[(tile.begin + j) * u_stride + static_cast<int64_t>(blockIdx.y) * a.rank + r] = v;
        }
    }
}

template <int kTokens>
__global__ void __launch_bounds__(kExpandThreads) lora_expand_kernel(LoraArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    extern __shared__ float us[];  // [kTokens, rank]: the tile's u for this part
    const LoraTileDesc tile = a.tiles[blockIdx.x];
    const LoraPartArgs p = a.parts[blockIdx.z];
    const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kExpandThreads;
    if (tile.count <= 0 || n0 >= p.rows) return;  // the same for the whole block
    const std::byte* slot = a.slots + static_cast<int64_t>(tile.slot) * a.slot_stride;
    const int64_t rank = slot_rank(a, slot, p);
    if (rank <= 0) return;  // the slot's adapter leaves this part alone
    const int64_t R = a.rank, u_stride = a.num_parts * R, splits = lora_splits(a.K);
    for (int64_t e = threadIdx.x; e < kTokens * rank; e += blockDim.x) {
        const int64_t j = e / rank, r = e % rank;
        float sum = 0.0f;
        if (j < tile.count) {
            const float* u = a.u + (tile.begin + j) * u_stride + static_cast<int64_t>(blockIdx.z) * R + r;
#pragma unroll 4
            for (int64_t q = 0; q < splits; ++q)  // the K ranges' sums, always in this order
                sum += u[q * a.u_rows * u_stride];
        }
        us[j * R + r] = sum;
    }
    __syncthreads();
    const int64_t n = n0 + threadIdx.x;
    if (n >= p.rows) return;
    const auto* b = reinterpret_cast<const __nv_bfloat16*>(slot + p.b_offset) + n * R;
    float acc[kTokens] = {};
    int64_t r = 0;
    if ((R & 3) == 0) {  // B's rows are 8-byte aligned (the layout aligns each matrix to 256 bytes)
        for (; r + 4 <= rank; r += 4) {
            const uint2 raw = *reinterpret_cast<const uint2*>(b + r);
            const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
            const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
#pragma unroll
            for (int j = 0; j < kTokens; ++j) {
                const float* uj = us + j * R + r;
                acc[j] += uj[0] * lo.x + uj[1] * lo.y + uj[2] * hi.x + uj[3] * hi.y;
            }
        }
    }
    for (; r < rank; ++r) {
        const float w = __bfloat162float(b[r]);
#pragma unroll
        for (int j = 0; j < kTokens; ++j)
            acc[j] += us[j * R + r] * w;
    }
#pragma unroll
    for (int j = 0; j < kTokens; ++j)
        if (j < tile.count)
            a.y[static_cast<int64_t>(a.order[tile.begin + j]) * a.y_stride + p.row_offset + n] += acc[j];
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
    const int64_t groups = (a.rank + kShrinkRows - 1) / kShrinkRows;
    PAGODA_KERNEL_REQUIRE(groups * lora_splits(a.K) <= 65535, "LoRA shrink grid too large");
    const dim3 grid(static_cast<unsigned>(a.num_tiles), static_cast<unsigned>(a.num_parts),
                    static_cast<unsigned>(groups * lora_splits(a.K)));
    for_tile_tokens(a, [&](auto tokens) {
        launch_kernel<lora_shrink_kernel<decltype(tokens)::value>>(grid, kShrinkWarps * 32, 0, stream, a);
    });
}

void launch_lora_expand(const LoraArgs& a, cudaStream_t stream) {
    if (a.num_tiles <= 0 || a.rank <= 0 || a.num_parts <= 0 || a.max_rows <= 0) return;
    PAGODA_KERNEL_REQUIRE(a.num_parts <= kLoraMaxParts, "LoRA: too many parts in one projection");
    const int64_t col_blocks = (a.max_rows + kExpandThreads - 1) / kExpandThreads;
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
