// Shared by the attention .cu files: the fp8 KV cache's quantiser (rope_kv.cu writes, the kernels read), the
// decode-only kernel (decode_attention.cu) that launch_paged_attention (attention.cu) picks for batches of one query
// token per sequence, and the tensor-core pieces of the decode and prefill kernels.
#pragma once

#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/attention/kv_rows.h"
#include "kernels/cuda/common.cuh"

namespace pagoda::kernels::cuda {

// --- fp8 (e4m3) KV caches ---------------------------------------------------------------------------------------
// f32 -> e4m3 as the CPU's f32_to_f8e4m3 (tensor/dtype.h) rounds: to nearest even, saturating at ±448, NaN stays
// NaN. The one quantiser of the fp8 KV cache's writes.
__device__ __forceinline__ __nv_fp8_storage_t quantize_e4m3(float x) {
    return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}

// A value as a KV cache of type C stores it: converted, or for e4m3 quantised with the layer's 1 / scale.
template <typename C>
__device__ __forceinline__ C to_cache(float v, float /*inv_scale*/) {
    return from_f32<C>(v);
}
template <>
__device__ __forceinline__ __nv_fp8_e4m3 to_cache<__nv_fp8_e4m3>(float v, float inv_scale) {
    __nv_fp8_e4m3 q;
    q.__x = quantize_e4m3(v * inv_scale);
    return q;
}
// KV head h's scales where a checkpoint gives one per head (KvScales::k_heads; null: the layer's alone), computed
// as the CPU backend computes them so that both store the same bytes.
__device__ __forceinline__ float head_inv_scale(float inv_scale, const float* heads, int64_t h) {
    return heads ? inv_scale / heads[h] : inv_scale;
}
__device__ __forceinline__ float head_scale(float scale, const float* heads, int64_t h) {
    return heads ? scale * heads[h] : scale;
}
__device__ __forceinline__ float to_f32(__nv_fp8_e4m3 v) {
    return static_cast<float>(v);
}

// Which sequences a kernel launch serves: the batch is split by query length when both kinds are present.
enum class SeqFilter : int { All, SingleToken, MultiToken, None };
__device__ __forceinline__ bool serves(SeqFilter f, int qlen) {
    return f == SeqFilter::All || (f == SeqFilter::SingleToken) == (qlen == 1);
}

// True when the decode kernel applies (BF16 or F8E4M3 caches, D 64/128/256, G <= 16).
bool decode_attention_applies(const PagedAttentionArgs& a);
// Grid (H_kv * num_splits, num_seqs); same workspace layout as the general kernel.
// True when it also combined the splits (in thread block clusters): then no combine kernel may follow.
bool launch_decode_attention(const PagedAttentionArgs& a, SeqFilter filter, cudaStream_t stream);
// The most splits a decoding step's attention combines in a thread block cluster: 16 (a non-portable cluster size
// Hopper allows); 8 (the portable size) with PAGODA_DECODE_ATTENTION_CLUSTER=8; 0 with =0 (the combine kernel, for
// measuring). A step where every sequence decodes and the longest context is at most
// decode_attention_cluster_cap_context() (4,096 tokens; any with =16) also plans at most 16 splits
// (plan_paged_attention_splits), so that batch 1 takes a cluster instead of up to 64 splits and the combine kernel.
// Measured on an H100 (session 31, batch-1 decode, each setting twice in one call, tok/s, capped to 16 against 8):
// Qwen3-30B-A3B (16 layers) 628.5/630.1 against 623.2/621.2 at 1,024 tokens, 590.4/590.4 against 565.6/565.5 at
// 4,096, but 489.2/485.4 against 501.4/502.8 at 16,384 (16 splits of 1,024 keys leave most SMs idle); Qwen3-8B
// 152.5/153.0 against 151.8/152.0, 146.7/146.7 against 143.3/143.0, 129.1/128.6 against 131.6/131.5.
// Where the GPU cannot place 16 blocks in one cluster (cudaOccupancyMaxPotentialClusterSize: at head_dim 256 a block
// takes an SM's shared memory), the step takes the combine kernel instead.
int decode_attention_cluster_limit();
int decode_attention_cluster_cap_context();

// --- Tensor-core pieces of the decode and prefill kernels ------------------------------------------------------------
// D (fp32, m16 x n8) += A (bf16, m16 x k16, row-major fragments) · B (bf16, k16 x n8, column-major fragments).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Two values as one bf16x2 register (lo in the low half).
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
}
__device__ __forceinline__ uint32_t pack(__nv_bfloat16 lo, __nv_bfloat16 hi) {
    const __nv_bfloat162 v = __halves2bfloat162(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
}
__device__ __forceinline__ uint32_t word(const __nv_bfloat16* p) {
    return *reinterpret_cast<const uint32_t*>(p);
}

// One online-softmax step for the two rows (g and g + 8) a lane holds of a warp's m16 x 8N score tile, scores in base
// 2 with masked entries at -inf. The rows' maxima are shared by the lane's quad; sc becomes exp2(sc - max) (a row that
// has seen no key yet keeps base 0, so no -inf - -inf appears); l takes this thread's share of the rows' sums. Returns
// the factors by which what was accumulated before must be rescaled (exactly 1 where a row's max did not change).
template <int N>
__device__ __forceinline__ float2 online_softmax(float (&sc)[N][4], float& m_a, float& m_b, float& l_a, float& l_b) {
    float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
    for (int n = 0; n < N; ++n) {
        mx_a = fmaxf(mx_a, fmaxf(sc[n][0], sc[n][1]));
        mx_b = fmaxf(mx_b, fmaxf(sc[n][2], sc[n][3]));
    }
    mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 1));
    mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 2));
    mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 1));
    mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 2));
    const float new_a = fmaxf(m_a, mx_a), new_b = fmaxf(m_b, mx_b);
    const float base_a = new_a == -INFINITY ? 0.0f : new_a, base_b = new_b == -INFINITY ? 0.0f : new_b;
    const float2 alpha = make_float2(exp2f(m_a - base_a), exp2f(m_b - base_b));
    m_a = new_a, m_b = new_b;
    float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
    for (int n = 0; n < N; ++n) {
        sc[n][0] = exp2f(sc[n][0] - base_a), sc[n][1] = exp2f(sc[n][1] - base_a);
        sc[n][2] = exp2f(sc[n][2] - base_b), sc[n][3] = exp2f(sc[n][3] - base_b);
        sum_a += sc[n][0] + sc[n][1];
        sum_b += sc[n][2] + sc[n][3];
    }
    l_a = l_a * alpha.x + sum_a;
    l_b = l_b * alpha.y + sum_b;
    return alpha;
}

// --- Pieces of both prefill kernels (prefill_attention.cu's on mma.sync, prefill_attention_wgmma.cu's on wgmma) ------
// A warp owns 16 query rows; a lane holds rows g and g + 8 of each 8-column block of the scores and of the output
// (mma.sync's m16n8 accumulator layout, which wgmma keeps for each warp of a warpgroup): columns 2c and 2c + 1.

// The grid of a prefill kernel whose blocks take kBlockQ query rows: query heads in x, sequences in y, query tiles in
// z, block z taking tile gridDim.z - 1 - z (and KV blocks whose elements fit an int: kv_rows.h). Blocks start in
// the order of their linear index (x fastest), so the last query tile of every sequence and head (of a causal prompt
// the one with the most keys) starts in the first waves and the shortest tiles fill the last one, as longest-first
// scheduling wants. The grid before (tiles in x, ordered only within a head) started the last heads' longest tiles in
// the last wave; with it ncu on an H100 found the SMs idle for 22% of the wgmma kernel's elapsed cycles (session 42,
// 2,048 tokens, one block an SM). How much of that this order recovers has not been measured yet.
template <int kBlockQ>
dim3 prefill_grid(const PagedAttentionArgs& a) {
    const int tiles = (a.max_query_len + kBlockQ - 1) / kBlockQ;
    PAGODA_KERNEL_REQUIRE(tiles <= 65535 && a.num_seqs <= 65535, "prefill attention: grid too large");
    PAGODA_KERNEL_REQUIRE(int64_t(a.block_size) * a.H_kv * a.D <= 0x7fffffff, "prefill attention: KV blocks too large");
    return dim3(static_cast<unsigned>(a.H_q), static_cast<unsigned>(a.num_seqs), static_cast<unsigned>(tiles));
}

// What block (x, y, z) of prefill_grid works on: sequence s, query head h and its KV head kvh, the sequence's query
// rows from q_begin on after ctx cached keys, and rows [q0, q0 + rows) of them. False where the launch does not serve
// the sequence or the tile starts past its query rows: the block has nothing to do.
template <int kBlockQ>
__device__ __forceinline__ bool prefill_block(const PagedAttentionArgs& a, SeqFilter filter, int& s, int& h, int& kvh,
                                              int& q_begin, int& ctx, int& q0, int& rows) {
    s = blockIdx.y, h = blockIdx.x;
    q_begin = a.query_start_loc[s];
    const int qlen = a.query_start_loc[s + 1] - q_begin;
    q0 = int(gridDim.z - 1 - blockIdx.z) * kBlockQ;
    if (!serves(filter, qlen) || q0 >= qlen) return false;
    ctx = a.seq_lens[s] - qlen;
    kvh = h / (a.H_q / a.H_kv);
    rows = min(kBlockQ, qlen - q0);
    return true;
}

// The scores of keys at or past lim_a (row g) and lim_b (row g + 8) masked, the tile's keys starting at k0.
template <int N>
__device__ __forceinline__ void mask_keys_from(float (&sc)[N][4], int k0, int c, int lim_a, int lim_b) {
#pragma unroll
    for (int n = 0; n < N; ++n) {
        const int key = k0 + n * 8 + 2 * c;
        if (key >= lim_a) sc[n][0] = -INFINITY;
        if (key + 1 >= lim_a) sc[n][1] = -INFINITY;
        if (key >= lim_b) sc[n][2] = -INFINITY;
        if (key + 1 >= lim_b) sc[n][3] = -INFINITY;
    }
}

// The output rows rescaled by online_softmax's factors (x: row g, y: row g + 8).
template <int N>
__device__ __forceinline__ void rescale_rows(float (&o)[N][4], float2 alpha) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
        o[i][0] *= alpha.x, o[i][1] *= alpha.x;
        o[i][2] *= alpha.y, o[i][3] *= alpha.y;
    }
}

// The end of a prefill block: the rows' sums gathered over the lane's quad, then rows r_a and r_b of the block (whose
// first query token is `first`, of head h) stored as o / l times V's scale, where they are the chunk's (< rows).
template <int D>
__device__ __forceinline__ void store_prefill_rows(const PagedAttentionArgs& a, const float (&o)[D / 8][4], float l_a,
                                                   float l_b, int kvh, int first, int h, int r_a, int r_b, int rows,
                                                   int c) {
    l_a += __shfl_xor_sync(0xffffffffu, l_a, 1);
    l_a += __shfl_xor_sync(0xffffffffu, l_a, 2);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, 1);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, 2);
    const float v_scale = head_scale(a.v_scale, a.v_head_scale, kvh);
    const float inv_a = v_scale / l_a, inv_b = v_scale / l_b;
    float* out_a = a.out.data + int64_t(first + r_a) * a.out.stride_t + int64_t(h) * a.out.stride_h;
    float* out_b = a.out.data + int64_t(first + r_b) * a.out.stride_t + int64_t(h) * a.out.stride_h;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
        if (r_a < rows) out_a[i * 8 + 2 * c] = o[i][0] * inv_a, out_a[i * 8 + 2 * c + 1] = o[i][1] * inv_a;
        if (r_b < rows) out_b[i * 8 + 2 * c] = o[i][2] * inv_b, out_b[i * 8 + 2 * c + 1] = o[i][3] * inv_b;
    }
}

// Four 8x8 bf16 matrices from shared memory, one instruction: lane l gives the address of row l % 8 of matrix l / 8
// (16 contiguous bytes); register k of lane (g = l / 4, c = l % 4) receives matrix k's elements (g, 2c) and (g, 2c+1),
// or with the transpose (2c, g) and (2c+1, g): mma fragments without one shared-memory load per element pair.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const __nv_bfloat16* row) {
    const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const __nv_bfloat16* row) {
    const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

// 16 bytes global -> shared without passing through registers; `valid` false fills zeros instead (e.g. a key past
// the end must read as 0, not as whatever the cache holds: 0 · NaN would poison a sum).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// --- fp8 (e4m3) caches in the tensor-core kernels ----------------------------------------------------------------
// A tile's row chunk of 8 values is 8 bytes of an e4m3 cache where it is 16 of a bf16 one. The kernels load such
// chunks into registers when they would issue the cp.async, and write them to shared memory as bf16 (exact: every
// e4m3 value is a bf16 value) once the current tile is computed, so the loads are in flight meanwhile; everything
// after the shared-memory tile is the bf16 path. K's scale is folded into Q and V's into the output.
struct E4m3Chunk {
    uint2 k, v;
};
// Zeros for a key past the end, as cp_async16 fills them.
__device__ __forceinline__ E4m3Chunk load_e4m3_chunk(const void* key_cache, const void* value_cache, int64_t off,
                                                     bool valid) {
    if (!valid) return {make_uint2(0, 0), make_uint2(0, 0)};
    return {*reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(key_cache) + off),
            *reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(value_cache) + off)};
}
__device__ __forceinline__ void store_e4m3_as_bf16(__nv_bfloat16* dst, uint2 raw) {
    uint32_t out[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const uint32_t word = i < 2 ? raw.x : raw.y;
        const auto pair = static_cast<__nv_fp8x2_storage_t>((word >> (16 * (i & 1))) & 0xffffu);
        const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3)));
        out[i] = pack(f.x, f.y);
    }
    *reinterpret_cast<uint4*>(dst) = make_uint4(out[0], out[1], out[2], out[3]);
}

// One tile's K/V rows copied into a stage of shared memory (rows of LD bf16): this thread's 16-byte chunk `ch` of rows
// r0 + kRowsPerPass · p, p < kPasses, from the cache offsets (in elements; negative: a key past the end, zeros) the
// kernel computed. BF16 caches copy with cp.async in `issue`; F8E4M3 ones (kFp8) load into registers in `issue` and
// write to shared memory in `land`, which the kernel calls once the tile in hand is computed.
template <bool kFp8, int kPasses, int LD, int kRowsPerPass>
struct KvTileCopy {
    int r0, ch;
    E4m3Chunk chunk[kFp8 ? kPasses : 1] = {};

    __device__ __forceinline__ int at(int p) const { return (r0 + p * kRowsPerPass) * LD + ch * 8; }
    // pick(p): whether to copy pass p's row now (a kernel that copies a tile's older rows before its
    // programmatic-launch wait and the rows the kernel before it wrote after it); every row once.
    template <class Pick>
    __device__ __forceinline__ void issue(const void* key_cache, const void* value_cache, const int64_t (&off)[kPasses],
                                          __nv_bfloat16* k_dst, __nv_bfloat16* v_dst, Pick&& pick) {
#pragma unroll
        for (int p = 0; p < kPasses; ++p) {
            if (!pick(p)) continue;
            const bool valid = off[p] >= 0;
            const int64_t o = valid ? off[p] : 0;
            if constexpr (kFp8) {
                chunk[p] = load_e4m3_chunk(key_cache, value_cache, o, valid);
            } else {
                cp_async16(k_dst + at(p), static_cast<const __nv_bfloat16*>(key_cache) + o, valid);
                cp_async16(v_dst + at(p), static_cast<const __nv_bfloat16*>(value_cache) + o, valid);
            }
        }
    }
    __device__ __forceinline__ void issue(const void* key_cache, const void* value_cache, const int64_t (&off)[kPasses],
                                          __nv_bfloat16* k_dst, __nv_bfloat16* v_dst) {
        issue(key_cache, value_cache, off, k_dst, v_dst, [](int) { return true; });
    }
    __device__ __forceinline__ void land(__nv_bfloat16* k_dst, __nv_bfloat16* v_dst) {
        if constexpr (kFp8) {
#pragma unroll
            for (int p = 0; p < kPasses; ++p) {
                store_e4m3_as_bf16(k_dst + at(p), chunk[p].k);
                store_e4m3_as_bf16(v_dst + at(p), chunk[p].v);
            }
        }
    }
};

// True when the tensor-core prefill kernel applies (BF16 or F8E4M3 caches, D 64/128/256); it needs num_splits == 1.
// launch_prefill_attention takes the Hopper form (prefill_attention_wgmma.cu) where that one applies.
bool prefill_attention_applies(const PagedAttentionArgs& a);
void launch_prefill_attention(const PagedAttentionArgs& a, SeqFilter filter, cudaStream_t stream);
// The Hopper form: a BF16 cache, D 64/128/256 and the sm_90a code of the kernels loaded on the device (not with
// PAGODA_PREFILL_ATTENTION=mma or PAGODA_CUDA_KERNELS); `stream` is the launch's (no device query while it is
// captured).
bool prefill_attention_wgmma_applies(const PagedAttentionArgs& a, cudaStream_t stream);
void launch_prefill_attention_wgmma(const PagedAttentionArgs& a, SeqFilter filter, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
