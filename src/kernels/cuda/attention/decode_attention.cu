// Paged attention for sequences with one query token (decode), BF16 or F8E4M3 caches, on tensor cores. A block owns
// one sequence, one KV head and one KV split. The G query heads of the group are the rows of one m16 tile (rows past G
// are zero), so each K/V byte read from the cache serves the whole group, and the scores and the weighted sum are
// mma.sync m16n8k16 (bf16 in, fp32 accumulate) as in the prefill kernel: Q rounded to bf16 once with the softmax
// scale and log2 e folded in, an online softmax in base 2, P rounded to bf16.
//
// The kernel is memory-bound by design: the block streams its keys in tiles through shared memory with cp.async,
// several tiles in flight, every 16-byte chunk of a K/V row copied by one thread (rows are read whole, in full
// sectors); the mma fragments come out of shared memory with ldmatrix. Each warp scores its own 16 keys of a tile
// and keeps its own softmax state; the warps' states are merged at the end. With several splits the partial results
// go to the general kernel's workspace (maxima in natural-log units) and its combine kernel finishes them; or, when
// every sequence decodes and the splits fit one thread block cluster (sm_90), the splits of a (sequence, KV head) are
// one cluster that combines them through each other's shared memory, as the combine kernel would, to the bit (ncu,
// each alone with cold caches, Qwen3-30B-A3B's heads at batch 1 and 512 tokens on an H100: 13.0 µs and 7.3 for the
// combine kernel before, 16.5 in clusters). An e4m3
// cache's raw rows go through a ring of S stages by cp.async as a bf16 cache's do, and each tile is widened into one
// bf16 tile at its turn (StagedE4m3Copy, PAGODA_FP8_DECODE=widened); by default (head dims 128 and 256) the mma loop
// reads the raw rows itself and multiplies in f16 (E4m3Direct: Q, P and the e4m3 values as f16, dims in e4m3_tile.h's
// orders); with =registers its tiles are loaded into registers and turned into bf16 in shared memory (KvTileCopy),
// the way the prefill kernel reads them. The rest is the same (fp8_read).
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

#include <cooperative_groups.h>

#include "kernels/cuda/attention/attention_internal.cuh"
#include "kernels/cuda/attention/e4m3_tile.h"
#include "kernels/cuda/device_caps.h"
#include "kernels/cuda/gemm/mma_tile.cuh"

namespace pagoda::kernels::cuda {

constexpr int kMaxGroup = 16;  // query heads per KV head: the rows of one mma tile

// How a kernel of an e4m3 cache reads its tiles. kCopied: as a bf16 cache's (KvTileCopy: bf16 tiles by cp.async; e4m3
// rows loaded into registers and widened into bf16 tiles). kWidened: the raw e4m3 rows through a ring of S stages
// by cp.async, each tile widened into one bf16 tile at its turn (StagedE4m3Copy). kDirect: the raw rows through the
// ring, read by the mma loop itself, each byte pair turned into an f16x2 fragment register (E4m3Direct): no bf16
// tile, no second barrier a tile, f16 products (exact for e4m3's values; Q and P rounded to f16, not bf16). The
// default where it applies (fp8_read).
enum class Fp8Read { kCopied, kWidened, kDirect };

// W warps per block, each scoring 16 keys of every tile (tiles of 16 W keys); S tiles in the cp.async pipeline.
// Shared memory per block is S stages of K and V tiles, which bounds the blocks per SM: (4, 2) holds one tile in
// flight per block and 3 blocks per SM at D = 128, (4, 3) two tiles and 2 blocks. PAGODA_DECODE_ATTENTION=WxS picks
// one of the instantiated shapes (a tuning knob for pagoda_op_bench). The default, 4x2, was the fastest on an
// H200 (Qwen3-8B heads, 256 sequences of 1,536 tokens: 3.45 TB/s; 4x3 the same, 2x4 3.10, 8x2 2.47; 16 sequences of
// 4,096: 3.16 TB/s against 2.47, 2.90 and 2.17).
// The staged reads (e4m3 caches): the S stages hold raw e4m3 rows (D bytes, 16 values a 16-byte chunk, e4m3_tile.h's
// layout); kWidened adds the one bf16 tile the mma loop reads, ahead of the stages.
template <int D, int W, int S, Fp8Read kRead = Fp8Read::kCopied>
struct DecodeShape {
    static constexpr bool kStaged = kRead != Fp8Read::kCopied;
    static constexpr int kThreads = 32 * W;
    static constexpr int kTileKeys = 16 * W;
    static constexpr int LD = D + 8;  // shared row stride in bf16: 16 bytes of padding keep ldmatrix conflict-free
    static constexpr int kChunkValues = kStaged ? 16 : 8;    // values a 16-byte chunk of a cache row holds
    static constexpr int kChunks = D / kChunkValues;         // 16-byte chunks per row
    static constexpr int kRowsPerPass = kThreads / kChunks;  // rows the block copies at once
    static constexpr int kPasses = kTileKeys / kRowsPerPass;
    static constexpr size_t kTileBytes = size_t(2) * kTileKeys * LD * sizeof(__nv_bfloat16);  // a K and a V tile
    static constexpr size_t kRawStageBytes = size_t(2) * kTileKeys * D;                       // their e4m3 rows
    static constexpr size_t kRawOffset = kRead == Fp8Read::kWidened ? kTileBytes : 0;         // where the stages start
    static constexpr size_t kPipelineBytes = kStaged ? kRawOffset + S * kRawStageBytes : S * kTileBytes;
    static constexpr size_t kMergeBytes = size_t(W) * kMaxGroup * (D + 2) * sizeof(float);
    static constexpr size_t kSmemBytes = kPipelineBytes > kMergeBytes ? kPipelineBytes : kMergeBytes;
    static constexpr bool kFits = kSmemBytes <= 227 * 1024;
};

namespace {

// A tile's e4m3 K/V rows copied raw into a stage of the ring by cp.async (rows of D bytes, chunks placed as
// e4m3_tile.h says; this thread's 16-byte chunk `ch` of rows r0 + kRowsPerPass · p, zeros for a key past the end),
// and on the widened path, at its turn, widened into the bf16 tile (rows of LD values; exact: every e4m3 value is a
// bf16 value). KvTileCopy's register path keeps one tile in flight per block, half the bytes a bf16 cache's pipeline
// keeps in flight, so it read an e4m3 cache at about the keys per second of a bf16 one (session 36: fp8 offline
// steps 40.7 ms against bf16's 31.4 for 1.5x the tokens); the ring keeps S - 1 tiles in flight.
template <int D, int LD, int kPasses, int kRowsPerPass>
struct StagedE4m3Copy {
    int r0, ch;

    __device__ __forceinline__ int at(int p) const { return e4m3_chunk_offset(r0 + p * kRowsPerPass, ch, D); }
    __device__ __forceinline__ void issue(const void* key_cache, const void* value_cache, const int64_t (&off)[kPasses],
                                          uint8_t* k_raw, uint8_t* v_raw) const {
#pragma unroll
        for (int p = 0; p < kPasses; ++p) {
            const bool valid = off[p] >= 0;
            const int64_t o = valid ? off[p] : 0;
            cp_async16(k_raw + at(p), static_cast<const uint8_t*>(key_cache) + o, valid);
            cp_async16(v_raw + at(p), static_cast<const uint8_t*>(value_cache) + o, valid);
        }
    }
    __device__ __forceinline__ void widen(const uint8_t* k_raw, const uint8_t* v_raw, __nv_bfloat16* k_dst,
                                          __nv_bfloat16* v_dst) const {
#pragma unroll
        for (int p = 0; p < kPasses; ++p) {
            const int row = r0 + p * kRowsPerPass;
            const uint4 k = *reinterpret_cast<const uint4*>(k_raw + at(p));
            const uint4 v = *reinterpret_cast<const uint4*>(v_raw + at(p));
            store_e4m3_as_bf16(k_dst + row * LD + ch * 16, make_uint2(k.x, k.y));
            store_e4m3_as_bf16(k_dst + row * LD + ch * 16 + 8, make_uint2(k.z, k.w));
            store_e4m3_as_bf16(v_dst + row * LD + ch * 16, make_uint2(v.x, v.y));
            store_e4m3_as_bf16(v_dst + row * LD + ch * 16 + 8, make_uint2(v.z, v.w));
        }
    }
};

// Two e4m3 values (the low 16 bits of `pair`, the first in the low byte) as one f16x2 register: exact, one
// instruction on sm_89 and newer (cvt.rn.f16x2.e4m3x2), a few integer ones before.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t pair) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair & 0xffffu), __NV_E4M3);
    return uint32_t(h.x) | uint32_t(h.y) << 16;
}
__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
}

// The direct path's products (Fp8Read::kDirect): a warp's scores and its P·V straight from the raw e4m3 rows of its
// 16 keys in a stage (rows row0 .. row0 + 15 of k_raw / v_raw), in e4m3_tile.h's dim orders, on f16 tensor cores.
// Lane (g, c). A tile costs a lane D / 32 16-byte loads and D / 4 conversions for K, D / 8 4-byte loads, D / 8 byte
// permutes and D / 4 conversions for V, where the widened path stores and reloads the whole tile as bf16 behind a
// second barrier.
template <int D>
struct E4m3Direct {
    static_assert(D == 128 || D == 256, "the dim orders take whole 64-dim groups of four chunks");
    // sc[n] += Q · K, keys row0 + 8 n + g: k-step 4 q + i is word i of the lane's load q.
    __device__ __forceinline__ static void scores(float (&sc)[2][4], const uint32_t (&qa)[D / 16][4],
                                                  const uint8_t* k_raw, int row0, int g, int c) {
#pragma unroll
        for (int n = 0; n < 2; ++n) {
#pragma unroll
            for (int q = 0; q < D / 64; ++q) {
                const uint4 w = *reinterpret_cast<const uint4*>(k_raw + e4m3_k_load(row0 + 8 * n + g, q, c, D));
                const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const uint32_t b[2] = {e4m3x2_to_f16x2(words[i]), e4m3x2_to_f16x2(words[i] >> 16)};
                    mma::mma_16816<__half>(sc[n], qa[4 * q + i], b);
                }
            }
        }
    }
    // o[i] += P · V: P's k index is the keys row0 + 2c, + 1 (B's first register) and + 8, + 9 (its second); lane g
    // reads dims 32 j + 4 g .. +3 of those four rows, byte b of each the column g of n-tile 4 j + b.
    __device__ __forceinline__ static void weighted_sum(float (&o)[D / 8][4], const uint32_t (&pa)[4],
                                                        const uint8_t* v_raw, int row0, int g, int c) {
        const int r = row0 + 2 * c;
#pragma unroll
        for (int j = 0; j < D / 32; ++j) {
            const uint32_t w0 = mma::lds32(v_raw + e4m3_v_load(r, j, g, D));
            const uint32_t w1 = mma::lds32(v_raw + e4m3_v_load(r + 1, j, g, D));
            const uint32_t w8 = mma::lds32(v_raw + e4m3_v_load(r + 8, j, g, D));
            const uint32_t w9 = mma::lds32(v_raw + e4m3_v_load(r + 9, j, g, D));
            // Byte b of two rows side by side (the first row's in the low byte): bytes 0, 1 of each in lo, 2, 3 in hi.
            const uint32_t lo = __byte_perm(w0, w1, 0x5140), hi = __byte_perm(w0, w1, 0x7362);
            const uint32_t lo8 = __byte_perm(w8, w9, 0x5140), hi8 = __byte_perm(w8, w9, 0x7362);
            const uint32_t pairs[4] = {lo, lo >> 16, hi, hi >> 16}, pairs8[4] = {lo8, lo8 >> 16, hi8, hi8 >> 16};
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                const uint32_t frag[2] = {e4m3x2_to_f16x2(pairs[b]), e4m3x2_to_f16x2(pairs8[b])};
                mma::mma_16816<__half>(o[4 * j + b], pa, frag);
            }
        }
    }
};

// The keys [lo, hi) of a sequence of seq_len keys that split `split` owns: whole tiles of kTileKeys.
template <int kTileKeys>
__device__ __forceinline__ int2 split_keys(const PagedAttentionArgs& a, int seq_len, int split) {
    int chunk = (seq_len + a.num_splits - 1) / a.num_splits;
    chunk = (chunk + kTileKeys - 1) / kTileKeys * kTileKeys;
    const int lo = split * chunk;
    return make_int2(lo, min(seq_len, lo + chunk));
}

// The most splits combined in a cluster: the portable cluster size, or 16 (non-portable, Hopper allows it), and the
// longest context for which a decoding step plans at most 16 splits (decode_attention_cluster_limit).
constexpr int kMaxClusterSplits = 8, kMaxNonPortableSplits = 16, kClusterCapContext = 4096;

// The cluster's blocks are the splits of one (sequence, KV head), each holding its partial output part[r][d] (times
// the value scale) and stat[r] = (maximum in natural-log units, sum) in shared memory. Block q of the cluster finishes
// outputs q·kThreads + tid, + cluster size·kThreads, ... with the combine kernel's expressions in its order
// (attention.cu), so the result is the same to the bit. Every thread of every block reaches both cluster barriers
// (the second keeps this block's shared memory alive until the others have read it). kCap: the most splits taken.
template <int D, int kThreads, int kCap>
__device__ __forceinline__ void combine_in_cluster(const PagedAttentionArgs& a, const float* part,
                                                   const float (*stat)[2], int64_t t, int kvh, int G) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    namespace cg = cooperative_groups;
    const cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    const int splits = a.num_splits, q = static_cast<int>(cluster.block_rank());
    const float* parts[kCap];
    const float* stats[kCap];
#pragma unroll
    for (int s = 0; s < kCap; ++s) {
        parts[s] = s < splits ? cluster.map_shared_rank(part, s) : nullptr;
        stats[s] = s < splits ? cluster.map_shared_rank(&stat[0][0], s) : nullptr;
    }
    for (int i = q * kThreads + int(threadIdx.x); i < G * D; i += splits * kThreads) {
        const int r = i / D, d = i % D;
        float m[kCap], o_s[kCap];
#pragma unroll
        for (int s = 0; s < kCap; ++s)
            if (s < splits) m[s] = stats[s][r * 2], o_s[s] = parts[s][r * D + d];
        float M = -INFINITY;
#pragma unroll
        for (int s = 0; s < kCap; ++s)
            if (s < splits) M = fmaxf(M, m[s]);
        float L = 0.0f, o = 0.0f;
#pragma unroll
        for (int s = 0; s < kCap; ++s)
            if (s < splits && m[s] != -INFINITY) L += stats[s][r * 2 + 1] * __expf(m[s] - M);
        const float inv = 1.0f / L;
#pragma unroll
        for (int s = 0; s < kCap; ++s)
            if (s < splits && m[s] != -INFINITY) o += o_s[s] * __expf(m[s] - M);
        const int h = kvh * G + r;
        a.out.data[t * a.out.stride_t + int64_t(h) * a.out.stride_h + d] = o * inv;
    }
    cluster.sync();
#else
    __trap();  // launched with clusters only where the kernel's binary is sm_90 or newer (launch_decode_attention)
#endif
}

// The kernel's work after its programmatic-launch prologue; or with `early`, its own prologue: the block's sequence
// bounds, block table entries and the first tile's keys older than this step (all written by no kernel of the step,
// or by kernels at least two launches back: common.cuh) are loaded before the wait, and only what the kernel before
// it wrote (the queries, the new keys' rows) after it.
template <int D, int W, int S, bool kFp8, Fp8Read kRead = Fp8Read::kCopied>
__device__ __forceinline__ void decode_attention(const PagedAttentionArgs& a, SeqFilter filter, bool in_cluster,
                                                 bool early) {
    using Sh = DecodeShape<D, W, S, kRead>;
    constexpr bool kStaged = Sh::kStaged, kDirect = kRead == Fp8Read::kDirect;
    static_assert(kFp8 || !kStaged, "only e4m3 caches are staged");
    constexpr int LD = Sh::LD, kTileKeys = Sh::kTileKeys, kThreads = Sh::kThreads;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    // [S][K rows | V rows][LD]; kWidened: [K rows | V rows][LD] (the tile the loop reads), then the raw ring
    // [S][K rows | V rows][D bytes]; kDirect: the raw ring alone.
    auto* kv_s = reinterpret_cast<__nv_bfloat16*>(smem_raw);
    uint8_t* raw = smem_raw + Sh::kRawOffset;

    // The KV heads of a sequence are neighbouring blocks: they read the same cache rows (a token's heads lie side by
    // side) at about the same time, which keeps DRAM pages open. In clusters a head's splits are neighbours instead.
    const int s = blockIdx.y;
    const int kvh = in_cluster ? blockIdx.x / a.num_splits : blockIdx.x % a.H_kv;
    const int split = in_cluster ? blockIdx.x % a.num_splits : blockIdx.x / a.H_kv;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
    const int64_t t = a.query_start_loc[s];
    const int qlen = a.query_start_loc[s + 1] - int(t);
    const bool served = serves(filter, qlen);  // a cluster's blocks share s: all return
    if (!early && !served) return;
    const int G = a.H_q / a.H_kv;
    const int seq_len = a.seq_lens[s];
    const int fresh = early ? seq_len - qlen : 0;  // keys from here on were stored by this step's prologue kernel
    const int2 keys = split_keys<kTileKeys>(a, seq_len, split);
    const int kv_lo = keys.x, kv_hi = keys.y;
    const int num_tiles = kv_hi > kv_lo ? (kv_hi - kv_lo + kTileKeys - 1) / kTileKeys : 0;

    const int32_t* table = a.block_tables + int64_t(s) * a.max_blocks_per_seq;
    const int bs = a.block_size;
    const bool bs_pow2 = (bs & (bs - 1)) == 0;  // the usual 16: shifts instead of divisions
    const int bs_shift = __ffs(bs) - 1;
    // Thread tid copies chunk tid % kChunks of rows tid / kChunks + kRowsPerPass * p. The rows' cache offsets of a
    // tile are looked up one tile ahead of its copies (table reads are loads too; this way they arrive during a
    // tile's compute instead of stalling the copies).
    const int ch = tid % Sh::kChunks, r0 = tid / Sh::kChunks;
    auto offsets = [&](int tile, int64_t(&off)[Sh::kPasses]) {
#pragma unroll
        for (int p = 0; p < Sh::kPasses; ++p) {
            const int key = kv_lo + tile * kTileKeys + r0 + p * Sh::kRowsPerPass;
            off[p] = -1;
            if (tile < num_tiles && key < kv_hi) {
                const int blk = bs_pow2 ? key >> bs_shift : key / bs;
                const int in_blk = key - blk * bs;
                off[p] = ((int64_t(table[blk]) * bs + in_blk) * a.H_kv + kvh) * D + ch * Sh::kChunkValues;
            }
        }
    };
    KvTileCopy<kFp8, Sh::kPasses, LD, Sh::kRowsPerPass> copier{r0, ch};
    const StagedE4m3Copy<D, LD, Sh::kPasses, Sh::kRowsPerPass> stager{r0, ch};
    auto k_stage = [&](int stage) { return kv_s + size_t(stage) * 2 * kTileKeys * LD; };   // its V rows follow
    auto raw_stage = [&](int stage) { return raw + size_t(stage) * Sh::kRawStageBytes; };  // its V rows follow
    auto copy_tile = [&](int stage, const int64_t(&off)[Sh::kPasses]) {
        if constexpr (kStaged)
            stager.issue(a.key_cache, a.value_cache, off, raw_stage(stage), raw_stage(stage) + kTileKeys * D);
        else
            copier.issue(a.key_cache, a.value_cache, off, k_stage(stage), k_stage(stage) + kTileKeys * LD);
    };
    auto land_tile = [&](int stage) {
        if constexpr (!kStaged) copier.land(k_stage(stage), k_stage(stage) + kTileKeys * LD);
    };
    int64_t next_off[Sh::kPasses];  // of tile S - 1, then of each tile the loop copies next
    // With `early`, tile 0's rows of keys older than `fresh` (and its zero rows past the end) before the wait.
    const auto older = [&](int p) {
        const int key = kv_lo + r0 + p * Sh::kRowsPerPass;
        return key < fresh || key >= kv_hi;
    };
    if (!kStaged && early) {  // (the early instances are of bf16 caches)
        offsets(0, next_off);
        if (served && num_tiles > 0)
            copier.issue(a.key_cache, a.value_cache, next_off, k_stage(0), k_stage(0) + kTileKeys * LD, older);
        PAGODA_KERNEL_PROLOGUE();
        if (!served) return;
    }
#pragma unroll
    for (int st = 0; st < S - 1; ++st) {
        if (!early || st > 0) offsets(st, next_off);
        if (st < num_tiles) {
            if (!kStaged && early && st == 0)
                copier.issue(a.key_cache, a.value_cache, next_off, k_stage(0), k_stage(0) + kTileKeys * LD,
                             [&](int p) { return !older(p); });
            else
                copy_tile(st, next_off);
            land_tile(st);
        }
        cp_async_commit();
    }
    offsets(S - 1, next_off);

    // Q as mma A fragments: rows g and g + 8 (query heads of the group; zero past G), dims kd + 2c (+1, +8, +9).
    // K's scale is folded into Q, except on the direct path: Q in f16 (at most 65,504) times a large K scale could
    // overflow, so there it scales the fp32 scores instead.
    const float k_scale = head_scale(a.k_scale, a.k_head_scale, kvh);
    const float q_scale = a.scale * 1.4426950408889634f * (kDirect ? 1.0f : k_scale);
    const float* q_row = a.q.data + t * a.q.stride_t + int64_t(kvh * G) * a.q.stride_h;
    auto q_at = [&](int r, int d) { return r < G ? q_row[int64_t(r) * a.q.stride_h + d] * q_scale : 0.0f; };
    // The direct path: f16, its k-steps' dims in e4m3_tile.h's order (e4m3_k_dim: elements 0-3 are dims 2c, 2c + 1,
    // 2c + 8, 2c + 9 of the step in the natural order).
    uint32_t qa[D / 16][4];
#pragma unroll
    for (int kd = 0; kd < D; kd += 16) {
        int d[4] = {kd + 2 * c, kd + 2 * c + 1, kd + 2 * c + 8, kd + 2 * c + 9};
        if constexpr (kDirect)
            for (int b = 0; b < 4; ++b)
                d[b] = e4m3_k_dim(kd / 16, c, b);
        const auto two = [](float lo, float hi) { return kDirect ? pack_f16(lo, hi) : pack(lo, hi); };
        qa[kd / 16][0] = two(q_at(g, d[0]), q_at(g, d[1]));
        qa[kd / 16][1] = two(q_at(g + 8, d[0]), q_at(g + 8, d[1]));
        qa[kd / 16][2] = two(q_at(g, d[2]), q_at(g, d[3]));
        qa[kd / 16][3] = two(q_at(g + 8, d[2]), q_at(g + 8, d[3]));
    }

    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; ++i)
        o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;  // rows g and g + 8, base 2
    // ldmatrix addressing: lane l gives row l % 8 of matrix l / 8. For K, matrix m is keys 8 (m / 2) .. +7 by dims
    // 8 (m % 2) .. +7 of a k-step (the B fragments of both 8-key n-tiles); for V (transposed), keys 8 (m % 2) .. +7
    // by dims 8 (m / 2) .. +7 of two 8-dim n-tiles.
    const int lr = lane & 7, lm = lane >> 3;
    const int k_off = ((lm >> 1) * 8 + lr) * LD + (lm & 1) * 8;
    const int v_off = ((lm & 1) * 8 + lr) * LD + (lm >> 1) * 8;

    for (int tile = 0; tile < num_tiles; ++tile) {
        cp_async_wait<S - 2>();  // this thread's copies of `tile` have landed
        __syncthreads();         // everyone's have, and everyone is done with the stage about to be refilled
        const bool copying = tile + S - 1 < num_tiles;
        if (copying) copy_tile((tile + S - 1) % S, next_off);
        cp_async_commit();
        offsets(tile + S, next_off);
        if constexpr (kRead == Fp8Read::kWidened) {  // the tile's raw rows (every thread's: the barrier above) widened
            stager.widen(raw_stage(tile % S), raw_stage(tile % S) + kTileKeys * D, kv_s, kv_s + kTileKeys * LD);
            __syncthreads();
        }

        const int key0 = kv_lo + tile * kTileKeys + warp * 16;  // this warp's 16 keys
        if (key0 >= kv_hi) {
            if (copying) land_tile((tile + S - 1) % S);
            continue;
        }
        const __nv_bfloat16* k_s = kv_s + size_t(kStaged ? 0 : tile % S) * 2 * kTileKeys * LD + warp * 16 * LD;
        const __nv_bfloat16* v_s = k_s + kTileKeys * LD;
        const uint8_t* k_raw = raw_stage(tile % S);  // the direct path's tile (the others read k_s and v_s)
        const uint8_t* v_raw = k_raw + kTileKeys * D;

        float sc[2][4] = {};
        if constexpr (kDirect) {
            E4m3Direct<D>::scores(sc, qa, k_raw, warp * 16, g, c);
#pragma unroll
            for (int n = 0; n < 2; ++n)
                for (int e = 0; e < 4; ++e)
                    sc[n][e] *= k_scale;
        } else {
#pragma unroll
            for (int kd = 0; kd < D; kd += 16) {
                uint32_t kb[4];
                ldmatrix_x4(kb, k_s + k_off + kd);
                const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
                mma_bf16(sc[0], qa[kd / 16], b0);
                mma_bf16(sc[1], qa[kd / 16], b1);
            }
        }
        // Keys past the end of the split; then the online softmax.
#pragma unroll
        for (int n = 0; n < 2; ++n) {
            const int key = key0 + n * 8 + 2 * c;
            if (key >= kv_hi) sc[n][0] = sc[n][2] = -INFINITY;
            if (key + 1 >= kv_hi) sc[n][1] = sc[n][3] = -INFINITY;
        }
        const float2 alpha = online_softmax(sc, m_a, m_b, l_a, l_b);
        const float alpha_a = alpha.x, alpha_b = alpha.y;
        // Once the maxima settle (most tiles), alpha is exactly 1 and the output needs no rescaling.
        if (!__all_sync(0xffffffffu, alpha_a == 1.0f && alpha_b == 1.0f)) {
#pragma unroll
            for (int i = 0; i < D / 8; ++i) {
                o[i][0] *= alpha_a, o[i][1] *= alpha_a;
                o[i][2] *= alpha_b, o[i][3] *= alpha_b;
            }
        }
        // P (the scores' accumulator layout is the A fragment of the 16 keys) times V.
        if constexpr (kDirect) {
            const uint32_t pa[4] = {pack_f16(sc[0][0], sc[0][1]), pack_f16(sc[0][2], sc[0][3]),
                                    pack_f16(sc[1][0], sc[1][1]), pack_f16(sc[1][2], sc[1][3])};
            E4m3Direct<D>::weighted_sum(o, pa, v_raw, warp * 16, g, c);
        } else {
            const uint32_t pa[4] = {pack(sc[0][0], sc[0][1]), pack(sc[0][2], sc[0][3]), pack(sc[1][0], sc[1][1]),
                                    pack(sc[1][2], sc[1][3])};
#pragma unroll
            for (int i = 0; i < D / 8; i += 2) {
                uint32_t vb[4];
                ldmatrix_x4_trans(vb, v_s + v_off + i * 8);
                const uint32_t b0[2] = {vb[0], vb[1]}, b1[2] = {vb[2], vb[3]};
                mma_bf16(o[i], pa, b0);
                mma_bf16(o[i + 1], pa, b1);
            }
        }
        if (copying) land_tile((tile + S - 1) % S);
    }
    cp_async_wait<0>();
    __syncthreads();  // the pipeline's shared memory becomes the merge area

    l_a += __shfl_xor_sync(0xffffffffu, l_a, 1);
    l_a += __shfl_xor_sync(0xffffffffu, l_a, 2);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, 1);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, 2);
    auto* part = reinterpret_cast<float*>(smem_raw);  // [W][16][D]
    float* stat = part + size_t(W) * kMaxGroup * D;   // [W][16][2]: max (base 2), sum
    float* my = part + size_t(warp) * kMaxGroup * D;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {  // o[i][e], o[i][2 + e]: column 2c + e of n-tile i (the direct path's order)
        const int d0 = kDirect ? e4m3_v_dim(i, 2 * c) : i * 8 + 2 * c;
        const int d1 = kDirect ? e4m3_v_dim(i, 2 * c + 1) : d0 + 1;
        my[g * D + d0] = o[i][0], my[g * D + d1] = o[i][1];
        my[(g + 8) * D + d0] = o[i][2], my[(g + 8) * D + d1] = o[i][3];
    }
    if (c == 0) {
        float* st = stat + (warp * kMaxGroup) * 2;
        st[g * 2] = m_a, st[g * 2 + 1] = l_a;
        st[(g + 8) * 2] = m_b, st[(g + 8) * 2 + 1] = l_b;
    }
    __syncthreads();

    __shared__ float split_stat[kMaxGroup][2];  // in a cluster: this split's maxima (natural log) and sums
    for (int i = tid; i < G * D; i += kThreads) {
        const int r = i / D, d = i % D;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < W; ++w)
            M = fmaxf(M, stat[(w * kMaxGroup + r) * 2]);
        float L = 0.0f, O = 0.0f;
#pragma unroll
        for (int w = 0; w < W; ++w) {
            const float mw = stat[(w * kMaxGroup + r) * 2];
            if (mw == -INFINITY) continue;  // a warp that saw no key (or an empty split: M stays -inf)
            const float f = exp2f(mw - M);
            L += stat[(w * kMaxGroup + r) * 2 + 1] * f;
            O += part[(w * kMaxGroup + r) * D + d] * f;
        }
        const int h = kvh * G + r;
        const float v_scale = head_scale(a.v_scale, a.v_head_scale, kvh);
        if (a.num_splits == 1) {
            a.out.data[t * a.out.stride_t + int64_t(h) * a.out.stride_h + d] = O / L * v_scale;
        } else if (in_cluster) {
            part[r * D + d] = O * v_scale;  // warp 0's partial of (r, d): read above by this thread only
            if (d == 0) split_stat[r][0] = M * 0.6931471805599453f, split_stat[r][1] = L;
        } else {
            const int64_t row = (int64_t(split) * a.T + t) * a.H_q + h;
            a.workspace[row * D + d] = O * v_scale;
            if (d == 0) {
                const int64_t stats = int64_t(a.num_splits) * a.T * a.H_q * D;
                a.workspace[stats + row] = M * 0.6931471805599453f;  // ln 2: the combine kernel works in base e
                a.workspace[stats + int64_t(a.num_splits) * a.T * a.H_q + row] = L;
            }
        }
    }
    if (in_cluster && a.num_splits <= kMaxClusterSplits)
        combine_in_cluster<D, kThreads, kMaxClusterSplits>(a, part, split_stat, t, kvh, G);
    else if (in_cluster)
        combine_in_cluster<D, kThreads, kMaxNonPortableSplits>(a, part, split_stat, t, kvh, G);
}

template <int D, int W, int S, bool kFp8, Fp8Read kRead = Fp8Read::kCopied>
__global__ void __launch_bounds__(32 * W)
    decode_attention_kernel(PagedAttentionArgs a, SeqFilter filter, bool in_cluster) {
    PAGODA_KERNEL_PROLOGUE();
    decode_attention<D, W, S, kFp8, kRead>(a, filter, in_cluster, false);
}

// The same with its loads before the wait (a.early_loads: CudaOps' default, off with PAGODA_EARLY_LOADS=0), which
// decode_attention reaches itself. launch_shape takes it for the default shape, 4x2, of bf16 caches.
template <int D, int W, int S, bool kFp8>
__global__ void __launch_bounds__(32 * W)
    early_decode_attention_kernel(PagedAttentionArgs a, SeqFilter filter, bool in_cluster) {
    decode_attention<D, W, S, kFp8>(a, filter, in_cluster, true);
}

// Launches one instance of the kernel in shape Sh; returns whether its splits were combined in clusters.
template <auto kernel, class Sh>
bool launch_instance(const PagedAttentionArgs& a, dim3 grid, SeqFilter filter, bool in_cluster, cudaStream_t stream) {
    allow_dynamic_smem<kernel>(int(Sh::kSmemBytes));
    // Clusters of 9-16 blocks (non-portable): only where the GPU can place one (a block at head_dim 256 takes an
    // SM's shared memory, so 16 need 16 SMs of one GPC); else the combine kernel.
    if (in_cluster && a.num_splits > kMaxClusterSplits)
        in_cluster = a.num_splits <= max_cluster_blocks<kernel>(Sh::kThreads, Sh::kSmemBytes);
    launch_kernel_cluster<kernel>(grid, Sh::kThreads, Sh::kSmemBytes, stream, in_cluster ? a.num_splits : 1, a, filter,
                                  in_cluster);
    return in_cluster;
}

// Returns whether the splits were combined in clusters (in_cluster, unless more than 8 splits do not fit one).
template <int D, int W, int S, bool kFp8, Fp8Read kRead = Fp8Read::kCopied>
bool launch_shape(const PagedAttentionArgs& a, dim3 grid, SeqFilter filter, bool in_cluster, cudaStream_t stream) {
    using Sh = DecodeShape<D, W, S, kRead>;
    // The smallest shape, 2x2, takes 67.5 KB at head_dim 256: it fits every supported GPU (99 KB on sm_86 / sm_89).
    constexpr bool kSmallest = W == 2 && S == 2;
    if constexpr (Sh::kStaged) {  // a staged shape, where the GPU holds it (widened at head_dim 256 off Hopper: no)
        if (Sh::kFits && Sh::kSmemBytes <= size_t(max_block_smem()))
            return launch_instance<decode_attention_kernel<D, W, S, true, kRead>, Sh>(a, grid, filter, in_cluster,
                                                                                      stream);
        return launch_shape<D, W, 2, true>(a, grid, filter, in_cluster, stream);
    } else if constexpr (!Sh::kFits) {
        return launch_shape<D, 4, 2, kFp8>(a, grid, filter, in_cluster, stream);  // fits every head dim on Hopper
    } else if (!kSmallest && Sh::kSmemBytes > size_t(max_block_smem())) {
        if constexpr (!kSmallest) return launch_shape<D, 2, 2, kFp8>(a, grid, filter, in_cluster, stream);
        return false;  // not reached: the smallest shape fits every supported GPU
    } else {
        constexpr auto kernel = decode_attention_kernel<D, W, S, kFp8>;
        if constexpr (!kFp8 && W == 4 && S == 2) {
            constexpr auto early = early_decode_attention_kernel<D, W, S, kFp8>;
            if (a.early_loads) return launch_instance<early, Sh>(a, grid, filter, in_cluster, stream);
        }
        return launch_instance<kernel, Sh>(a, grid, filter, in_cluster, stream);
    }
}

// The block shape: PAGODA_DECODE_ATTENTION ("4x2", "4x3", "2x4" or "8x2"), read once; else the default 4x2.
int shape_choice() {
    static const int choice = [] {
        const char* env = std::getenv("PAGODA_DECODE_ATTENTION");
        const std::string v = env ? env : "";
        if (v == "4x3") return 1;
        if (v == "2x4") return 2;
        if (v == "8x2") return 3;
        return 0;  // 4x2
    }();
    return choice;
}

// e4m3 caches: PAGODA_FP8_DECODE, read once. Unset or "direct": the mma loop reads the ring's raw rows (E4m3Direct;
// head dims 128 and 256, the widened path at 64): 128 takes four stages in 64 KB (3 blocks an SM on Hopper), 256 three
// in 96 KB (2). "widened": the raw rows staged through four stages (three tiles in flight, 2 blocks an SM of 98.8 KB
// at D = 128) and widened into a bf16 tile. "registers": the register path (KvTileCopy). On an H100 (session 44,
// pagoda_op_bench, Qwen3-8B heads, µs widened / direct): 256 sequences of 1,536 keys 434.9 / 319.3 (1,871 / 2,549
// GB/s; bf16's cache 537.8 at 3,011), 16 of 4,096 keys 106.8 / 91.4; offline 512 x (1,000 / 1,000) with the fp8
// cache 6,862 / 7,912 output tok/s. (Session 38: the register path 474 and 116 µs where the widened took 434 and 106.)
Fp8Read fp8_read() {
    static const Fp8Read read = [] {
        const char* env = std::getenv("PAGODA_FP8_DECODE");
        const std::string v = env ? env : "";
        return v == "widened" ? Fp8Read::kWidened : v == "registers" ? Fp8Read::kCopied : Fp8Read::kDirect;
    }();
    return read;
}

template <int D, bool kFp8>
bool launch_d(const PagedAttentionArgs& a, dim3 grid, SeqFilter filter, bool in_cluster, cudaStream_t stream) {
    if constexpr (kFp8) {  // the tuning knob's shapes are instantiated for bf16 caches only
        const Fp8Read read = fp8_read();
        constexpr int kDirectStages = D == 128 ? 4 : 3;
        if constexpr (D != 64) {
            if (read == Fp8Read::kDirect)
                return launch_shape<D, 4, kDirectStages, true, Fp8Read::kDirect>(a, grid, filter, in_cluster, stream);
        }
        if (read == Fp8Read::kCopied) return launch_shape<D, 4, 2, true>(a, grid, filter, in_cluster, stream);
        return launch_shape<D, 4, 4, true, Fp8Read::kWidened>(a, grid, filter, in_cluster, stream);
    }
    switch (shape_choice()) {
        case 1:
            return launch_shape<D, 4, 3, false>(a, grid, filter, in_cluster, stream);
        case 2:
            return launch_shape<D, 2, 4, false>(a, grid, filter, in_cluster, stream);
        case 3:
            return launch_shape<D, 8, 2, false>(a, grid, filter, in_cluster, stream);
        default:
            return launch_shape<D, 4, 2, false>(a, grid, filter, in_cluster, stream);
    }
}

template <bool kFp8>
bool launch_cache(const PagedAttentionArgs& a, dim3 grid, SeqFilter filter, bool in_cluster, cudaStream_t stream) {
    switch (a.D) {
        case 64:
            return launch_d<64, kFp8>(a, grid, filter, in_cluster, stream);
        case 128:
            return launch_d<128, kFp8>(a, grid, filter, in_cluster, stream);
        default:
            return launch_d<256, kFp8>(a, grid, filter, in_cluster, stream);
    }
}

}  // namespace

bool decode_attention_applies(const PagedAttentionArgs& a) {
    return (a.cache_type == ElemType::BF16 || a.cache_type == ElemType::F8E4M3) &&
           (a.D == 64 || a.D == 128 || a.D == 256) && a.H_q / a.H_kv <= kMaxGroup;
}

int decode_attention_cluster_limit() {
    static const int limit = [] {
        const char* env = std::getenv("PAGODA_DECODE_ATTENTION_CLUSTER");
        if (env != nullptr && std::strcmp(env, "0") == 0) return 0;
        if (env != nullptr && std::strcmp(env, "8") == 0) return kMaxClusterSplits;
        return kMaxNonPortableSplits;
    }();
    return limit;
}

int decode_attention_cluster_cap_context() {
    static const int most = [] {
        const char* env = std::getenv("PAGODA_DECODE_ATTENTION_CLUSTER");
        return env != nullptr && std::strcmp(env, "16") == 0 ? INT_MAX : kClusterCapContext;
    }();
    return most;
}

bool launch_decode_attention(const PagedAttentionArgs& a, SeqFilter filter, cudaStream_t stream) {
    // The splits combine in clusters when every sequence decodes (nothing else needs the combine kernel) and they fit
    // one (decode_attention_cluster_limit). Every instance of the kernel is compiled for the same architecture, so one
    // of them answers whether clusters may be launched.
    const bool in_cluster = filter == SeqFilter::All && a.num_splits > 1 &&
                            a.num_splits <= decode_attention_cluster_limit() &&
                            cluster_launch_allowed<decode_attention_kernel<128, 4, 2, false>>();
    const dim3 grid(static_cast<unsigned>(a.H_kv * a.num_splits), static_cast<unsigned>(a.num_seqs));
    if (a.cache_type == ElemType::F8E4M3) return launch_cache<true>(a, grid, filter, in_cluster, stream);
    return launch_cache<false>(a, grid, filter, in_cluster, stream);
}

}  // namespace pagoda::kernels::cuda
