// Tensor-core paged attention for sequences with several query tokens (prefill chunks, with or without a cached
// prefix), FlashAttention-2 style: a block owns query tokens of one query head, 16 a warp (8 warps: 128 tokens, or 4
// where those do not fit: launch_d), the tiles with the most keys first; each warp keeps its 16 tokens' Q fragments and
// output in registers. K/V tiles of 64 keys (32 at head_dim 256 on GPUs with less than 165 KB of shared memory a block)
// are gathered from the paged cache into shared memory with cp.async, the next tile loading while the current one is
// computed. Per tile: S = Q·Kᵀ with mma.sync m16n8k16 (bf16 in, fp32 accumulate; fragments via ldmatrix), the causal
// mask, an online softmax in base 2, then O += P·V with P rounded to bf16, reusing S's accumulator layout as the A
// operand. Q is rounded to bf16 once (with the softmax scale and log2 e folded in). Rows of shared memory are padded by
// 16 bytes so the fragment loads of a warp fall in distinct banks. An e4m3 cache's tiles are loaded into registers and
// turned into bf16 in shared memory (KvTileCopy); K's scale is folded into Q and V's into the output. On Hopper a
// BF16 cache takes the wgmma form instead (prefill_attention_wgmma.cu: 1.9x this kernel's speed at 2,048 tokens on an
// H100, session 41); this one serves every other GPU, the e4m3 cache and PAGODA_PREFILL_ATTENTION=mma.
#include "kernels/cuda/attention/attention_internal.cuh"
#include "kernels/cuda/device_caps.h"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kStages = 2;  // K/V tiles in shared memory: one computed while the next one loads

// kBlockK keys a tile: 64, or 32 where 64 would not fit the device's shared memory (head_dim 256 needs 165 KB with
// 64-key tiles and 4 warps, more than an A100's 163 KB or an sm_86 / sm_89 part's 99 KB; 32-key tiles take 99 KB).
template <int D, int kBlockK, int kWarps>
constexpr size_t smem_bytes() {
    return size_t(16 * kWarps + kStages * 2 * kBlockK) * (D + 8) * sizeof(__nv_bfloat16);
}

// Its grid and blocks: prefill_grid and prefill_block (the query tiles with the most keys first).
template <int D, int kBlockK, bool kFp8, int kWarps>
__global__ void __launch_bounds__(32 * kWarps) prefill_attention_kernel(PagedAttentionArgs a, SeqFilter filter) {
    PAGODA_KERNEL_PROLOGUE();
    constexpr int kThreads = 32 * kWarps, kBlockQ = 16 * kWarps;
    constexpr int LD = D + 8;                         // row stride in bf16 elements
    constexpr int kChunks = D / 8;                    // 16-byte pieces per row
    constexpr int kRowsPerPass = kThreads / kChunks;  // rows the block copies at once
    extern __shared__ __align__(16) unsigned char smem_raw[];
    auto* q_s = reinterpret_cast<__nv_bfloat16*>(smem_raw);
    __nv_bfloat16* kv_s = q_s + kBlockQ * LD;  // [kStages][K rows | V rows][LD]

    int s, h, kvh, q_begin, ctx, q0, rows;
    if (!prefill_block<kBlockQ>(a, filter, s, h, kvh, q_begin, ctx, q0, rows)) return;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;

    const int32_t* table = a.block_tables + int64_t(s) * a.max_blocks_per_seq;
    const int kv_end = ctx + q0 + rows;  // keys the block's last row sees
    const int num_tiles = (kv_end + kBlockK - 1) / kBlockK;
    // Thread tid copies chunk tid % kChunks of rows tid / kChunks + kRowsPerPass * p; zeros past the end.
    constexpr int kPasses = kBlockK / kRowsPerPass;
    static_assert(kPasses * kRowsPerPass == kBlockK, "a tile's rows in whole passes of the block");
    KvTileCopy<kFp8, kPasses, LD, kRowsPerPass> copier{tid / kChunks, tid % kChunks};
    auto k_stage = [&](int stage) { return kv_s + size_t(stage) * 2 * kBlockK * LD; };  // its V rows follow
    auto load_tile = [&](int tile, int stage) {
        int64_t off[kPasses];
        kv_row_offsets<kPasses, kRowsPerPass>(table, a.block_size, a.H_kv * D, kvh * D + copier.ch * 8,
                                              tile * kBlockK + copier.r0, kv_end, off);
        copier.issue(a.key_cache, a.value_cache, off, k_stage(stage), k_stage(stage) + kBlockK * LD);
    };
    auto land_tile = [&](int stage) { copier.land(k_stage(stage), k_stage(stage) + kBlockK * LD); };
#pragma unroll
    for (int st = 0; st < kStages - 1; ++st) {
        if (st < num_tiles) {
            load_tile(st, st);
            land_tile(st);
        }
        cp_async_commit();
    }

    const float q_scale = a.scale * 1.4426950408889634f * head_scale(a.k_scale, a.k_head_scale, kvh);  // base 2
    for (int i = tid; i < kBlockQ * D; i += kThreads) {
        const int r = i / D, d = i % D;
        float v = 0.0f;
        if (r < rows) v = a.q.data[int64_t(q_begin + q0 + r) * a.q.stride_t + int64_t(h) * a.q.stride_h + d] * q_scale;
        q_s[r * LD + d] = __float2bfloat16_rn(v);
    }
    __syncthreads();
    // This warp's 16 query rows as A fragments, once: matrices (rows 0-7 | 8-15) x (dims kd | kd + 8).
    const int lr = lane & 7, lm = lane >> 3;
    uint32_t qa[D / 16][4];
#pragma unroll
    for (int kd = 0; kd < D; kd += 16)
        ldmatrix_x4(qa[kd / 16], q_s + (warp * 16 + (lm & 1) * 8 + lr) * LD + (lm >> 1) * 8 + kd);
    // K: matrices (keys 0-7 | 8-15 of an n-tile pair) x (dims kd | kd + 8); V (transposed): keys (0-7 | 8-15) of a
    // 16-key step x dims (n | n + 8).
    const int k_off = ((lm >> 1) * 8 + lr) * LD + (lm & 1) * 8;
    const int v_off = ((lm & 1) * 8 + lr) * LD + (lm >> 1) * 8;

    // This thread's two rows (of its warp's 16) and the keys each may see.
    const int r_a = warp * 16 + g, r_b = r_a + 8;
    const int lim_a = ctx + q0 + r_a + 1, lim_b = ctx + q0 + r_b + 1;
    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; ++i)
        o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;

    for (int tile = 0; tile < num_tiles; ++tile) {
        cp_async_wait<kStages - 2>();  // this thread's copies of `tile` have landed
        __syncthreads();               // everyone's have, and the stage about to be refilled is consumed
        const bool copying = tile + kStages - 1 < num_tiles;
        const int next_stage = (tile + kStages - 1) % kStages;
        if (copying) load_tile(tile + kStages - 1, next_stage);
        cp_async_commit();
        const int k0 = tile * kBlockK;
        if (k0 >= ctx + q0 + warp * 16 + 16) {  // the whole tile is in this warp's future
            if (copying) land_tile(next_stage);
            continue;
        }
        const __nv_bfloat16* k_s = kv_s + size_t(tile % kStages) * 2 * kBlockK * LD;
        const __nv_bfloat16* v_s = k_s + kBlockK * LD;

        float sc[kBlockK / 8][4];
#pragma unroll
        for (int n = 0; n < kBlockK / 8; ++n)
            sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
        for (int kd = 0; kd < D; kd += 16) {
#pragma unroll
            for (int n = 0; n < kBlockK / 8; n += 2) {
                uint32_t kb[4];
                ldmatrix_x4(kb, k_s + n * 8 * LD + k_off + kd);
                const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
                mma_bf16(sc[n], qa[kd / 16], b0);
                mma_bf16(sc[n + 1], qa[kd / 16], b1);
            }
        }

        // Causal mask, where some key of the tile is past some row of the warp's (its first row sees the fewest; the
        // same for the whole warp): on a long prompt one or two tiles of a warp's, where it cost 64 instructions a
        // thread on every tile (the tile's 128 mma steps a warp are the work). Then the online softmax.
        if (k0 + kBlockK > ctx + q0 + warp * 16 + 1) {
            mask_keys_from(sc, k0, c, lim_a, lim_b);
        }
        rescale_rows(o, online_softmax(sc, m_a, m_b, l_a, l_b));

#pragma unroll
        for (int j = 0; j < kBlockK / 16; ++j) {
            const uint32_t pa[4] = {pack(sc[2 * j][0], sc[2 * j][1]), pack(sc[2 * j][2], sc[2 * j][3]),
                                    pack(sc[2 * j + 1][0], sc[2 * j + 1][1]), pack(sc[2 * j + 1][2], sc[2 * j + 1][3])};
#pragma unroll
            for (int i = 0; i < D / 8; i += 2) {
                uint32_t vb[4];
                ldmatrix_x4_trans(vb, v_s + 16 * j * LD + v_off + i * 8);
                const uint32_t b0[2] = {vb[0], vb[1]}, b1[2] = {vb[2], vb[3]};
                mma_bf16(o[i], pa, b0);
                mma_bf16(o[i + 1], pa, b1);
            }
        }
        if (copying) land_tile(next_stage);
    }
    cp_async_wait<0>();

    store_prefill_rows<D>(a, o, l_a, l_b, kvh, q_begin + q0, h, r_a, r_b, rows, c);
}

template <int D, int kBlockK, bool kFp8, int kWarps>
void launch_tiles(const PagedAttentionArgs& a, SeqFilter filter, cudaStream_t stream) {
    constexpr size_t bytes = smem_bytes<D, kBlockK, kWarps>();
    constexpr int kBlockQ = 16 * kWarps;
    constexpr auto kernel = prefill_attention_kernel<D, kBlockK, kFp8, kWarps>;
    PAGODA_KERNEL_REQUIRE(bytes <= size_t(max_block_smem()), "prefill attention: the tile does not fit this GPU");
    allow_dynamic_smem<kernel>(int(bytes));
    launch_kernel<kernel>(prefill_grid<kBlockQ>(a), 32 * kWarps, bytes, stream, a, filter);
}

// Blocks of 8 warps (128 query tokens) with 64-key tiles where those fit the device: each K/V tile in shared memory
// serves twice the rows of 4 warps' (at head_dim 256 an SM runs 8 warps instead of 4; at 128 registers hold it to one
// block of 8 against two of 4). Else 4 warps with 64-key tiles, or 32-key ones where 64 would not fit (head_dim 256
// below Hopper's 227 KB: 165 KB against an A100's 163 or an sm_86 / sm_89 part's 99). Measured on an H100 (session 36,
// Qwen3-8B shape, pagoda_cuda_bench, two rounds alternated; docs/benchmarks.md): a 2,048-token prefill took 75.1-75.7
// ms with 8 warps and the heaviest tiles first, 75.7-76.1 with 8 warps in grid order, 77.7-78.1 with 4 warps heaviest
// first and 77.2-77.3 with 4 in grid order; 16,384 tokens 923, 937-941, 1,041-1,045 and 1,053-1,057 ms.
template <int D, bool kFp8>
void launch_d(const PagedAttentionArgs& a, SeqFilter filter, cudaStream_t stream) {
    constexpr size_t eight = smem_bytes<D, 64, 8>(), four = smem_bytes<D, 64, 4>();
    if constexpr (eight <= size_t(kLeastBlockSmem)) {  // head_dim 64: on every supported GPU
        launch_tiles<D, 64, kFp8, 8>(a, filter, stream);
    } else if (eight <= size_t(max_block_smem())) {
        launch_tiles<D, 64, kFp8, 8>(a, filter, stream);
    } else if constexpr (four <= size_t(kLeastBlockSmem)) {  // head_dim 128 on a GPU of 99 KB a block
        launch_tiles<D, 64, kFp8, 4>(a, filter, stream);
    } else if (four <= size_t(max_block_smem())) {
        launch_tiles<D, 64, kFp8, 4>(a, filter, stream);
    } else {
        launch_tiles<D, 32, kFp8, 4>(a, filter, stream);
    }
}

template <bool kFp8>
void launch_cache(const PagedAttentionArgs& a, SeqFilter filter, cudaStream_t stream) {
    switch (a.D) {
        case 64:
            launch_d<64, kFp8>(a, filter, stream);
            break;
        case 128:
            launch_d<128, kFp8>(a, filter, stream);
            break;
        default:
            launch_d<256, kFp8>(a, filter, stream);
            break;
    }
}

}  // namespace

bool prefill_attention_applies(const PagedAttentionArgs& a) {
    return (a.cache_type == ElemType::BF16 || a.cache_type == ElemType::F8E4M3) &&
           (a.D == 64 || a.D == 128 || a.D == 256);
}

void launch_prefill_attention(const PagedAttentionArgs& a, SeqFilter filter, cudaStream_t stream) {
    if (prefill_attention_wgmma_applies(a, stream)) return launch_prefill_attention_wgmma(a, filter, stream);
    if (a.cache_type == ElemType::F8E4M3)
        launch_cache<true>(a, filter, stream);
    else
        launch_cache<false>(a, filter, stream);
}

}  // namespace pagoda::kernels::cuda
