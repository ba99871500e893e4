// Paged causal attention over several sequences (prefill chunks with a cached prefix, and decodes, mixed).
// A block owns one sequence, one KV head and a tile of up to 64 query rows = (query token, query head of the GQA
// group), so each K/V tile read from the paged cache serves the whole group. Scores and the online softmax are fp32
// (flash-attention style, K/V tiles of 32 keys staged in shared memory). When the batch has too few tiles to fill
// the GPU (decode), the KV range is split over blocks and a second kernel combines the partial results
// (flash-decoding). This CUDA-core kernel is the fallback: with BF16 caches (what the engine uses on a GPU),
// launch_paged_attention sends sequences with one query token to the tensor-core decode_attention.cu and longer ones
// to the tensor-core prefill_attention.cu (F8E4M3 caches likewise; here they serve head dims 16/32 and large groups).
#include <algorithm>
#include <cfloat>

#include "kernels/cuda/attention/attention_internal.cuh"
#include "kernels/cuda/device_caps.h"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kRows = 64;  // query rows per block
constexpr int kKeys = 32;  // keys per K/V tile
constexpr int kPs = kKeys + 1;

int tokens_per_tile(int group) {
    return std::max(1, kRows / group);
}

template <int D>
constexpr size_t smem_floats() {
    return size_t(kRows) * (D + 1) + size_t(kKeys) * (D + 1) + size_t(kKeys) * D + size_t(kRows) * kPs + 3 * kRows;
}

template <int D, typename C>
__global__ void __launch_bounds__(kThreads) paged_attention_kernel(PagedAttentionArgs a, SeqFilter filter) {
    PAGODA_KERNEL_PROLOGUE();
    extern __shared__ float smem[];
    constexpr int QS = D + 1;                     // padded: the 4 rows a warp reads at once fall in different banks
    constexpr int DC = D / 8;                     // output dims per thread
    constexpr int kPerVec = 16 / int(sizeof(C));  // cache elements per 16-byte load (D is a multiple)
    constexpr int kVecsPerKey = D / kPerVec;
    constexpr int kVecs = kKeys * kVecsPerKey;
    constexpr int kVecsPerThread = (kVecs + kThreads - 1) / kThreads;
    float* q_s = smem;
    float* k_s = q_s + kRows * QS;
    float* v_s = k_s + kKeys * QS;
    float* p_s = v_s + kKeys * D;
    float* m_s = p_s + kRows * kPs;
    float* l_s = m_s + kRows;
    float* alpha_s = l_s + kRows;

    const int tid = threadIdx.x;
    const int G = a.H_q / a.H_kv;
    const int qt = max(1, kRows / G);
    const int rows = qt * G;
    const int s = blockIdx.y;
    const int kvh = blockIdx.z % a.H_kv, split = blockIdx.z / a.H_kv;
    const float k_scale = head_scale(a.k_scale, a.k_head_scale, kvh);  // 1 but for e4m3 caches
    const float v_scale = head_scale(a.v_scale, a.v_head_scale, kvh);
    const int q_begin = a.query_start_loc[s];
    const int qlen = a.query_start_loc[s + 1] - q_begin;
    const int tile_q0 = blockIdx.x * qt;
    if (tile_q0 >= qlen || !serves(filter, qlen)) return;
    const int ctx = a.seq_lens[s] - qlen;
    const int tile_tokens = min(qt, qlen - tile_q0);
    const int kv_end = ctx + tile_q0 + tile_tokens;  // keys visible to the tile's last token
    int chunk = (kv_end + a.num_splits - 1) / a.num_splits;
    chunk = (chunk + kKeys - 1) / kKeys * kKeys;
    const int kv_lo = split * chunk;
    const int kv_hi = min(kv_end, kv_lo + chunk);

#pragma unroll 8
    for (int i = tid; i < kRows * D; i += kThreads) {
        const int r = i / D, d = i % D, qi = r / G, g = r % G;
        float v = 0.0f;
        if (r < rows && qi < tile_tokens) {
            const int64_t t = q_begin + tile_q0 + qi;
            v = a.q.data[t * a.q.stride_t + int64_t(kvh * G + g) * a.q.stride_h + d] * a.scale;
        }
        q_s[r * QS + d] = v;
    }
    if (tid < kRows) m_s[tid] = -INFINITY, l_s[tid] = 0.0f;

    const int rg = tid / 8, cg = tid % 8;  // rows rg*4 .. rg*4+3; keys and dims cg + 8*j
    int limit[4];                          // keys visible to each of my rows (0: inactive row)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int r = rg * 4 + i, qi = r / G;
        limit[i] = (r < rows && qi < tile_tokens) ? ctx + tile_q0 + qi + 1 : 0;
    }
    float acc[4][DC];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int c = 0; c < DC; ++c)
            acc[i][c] = 0.0f;

    const C* kc = static_cast<const C*>(a.key_cache);
    const C* vc = static_cast<const C*>(a.value_cache);
    const int32_t* table = a.block_tables + int64_t(s) * a.max_blocks_per_seq;
    for (int kv0 = kv_lo; kv0 < kv_hi; kv0 += kKeys) {
        __syncthreads();  // the previous tile is consumed (and q_s/m_s are written before the first)
        // 16-byte loads, all issued before any is used (a load-then-store loop would wait out one memory latency
        // per element). Zeros past the end: 0 · garbage would be NaN.
        uint4 k_raw[kVecsPerThread], v_raw[kVecsPerThread];
#pragma unroll
        for (int u = 0; u < kVecsPerThread; ++u) {
            const int v = tid + u * kThreads, j = v / kVecsPerKey, key = kv0 + j;
            k_raw[u] = v_raw[u] = make_uint4(0, 0, 0, 0);
            if (v < kVecs && key < kv_hi) {
                const int64_t slot = int64_t(table[key / a.block_size]) * a.block_size + key % a.block_size;
                const int64_t off = (slot * a.H_kv + kvh) * D + (v % kVecsPerKey) * kPerVec;
                k_raw[u] = *reinterpret_cast<const uint4*>(kc + off);
                v_raw[u] = *reinterpret_cast<const uint4*>(vc + off);
            }
        }
#pragma unroll
        for (int u = 0; u < kVecsPerThread; ++u) {
            const int v = tid + u * kThreads, j = v / kVecsPerKey, d0 = (v % kVecsPerKey) * kPerVec;
            if (v >= kVecs) continue;
            const C* kp = reinterpret_cast<const C*>(&k_raw[u]);
            const C* vp = reinterpret_cast<const C*>(&v_raw[u]);
#pragma unroll
            for (int e = 0; e < kPerVec; ++e) {
                k_s[j * QS + d0 + e] = to_f32(kp[e]) * k_scale;
                v_s[j * D + d0 + e] = to_f32(vp[e]) * v_scale;
            }
        }
        __syncthreads();

        float sc[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j)
                sc[i][j] = 0.0f;
#pragma unroll 8
        for (int d = 0; d < D; ++d) {
            float qv[4], kv[4];
#pragma unroll
            for (int i = 0; i < 4; ++i)
                qv[i] = q_s[(rg * 4 + i) * QS + d];
#pragma unroll
            for (int j = 0; j < 4; ++j)
                kv[j] = k_s[(cg + 8 * j) * QS + d];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    sc[i][j] += qv[i] * kv[j];
        }
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int key = kv0 + cg + 8 * j;
                p_s[(rg * 4 + i) * kPs + cg + 8 * j] = (key < kv_hi && key < limit[i]) ? sc[i][j] : -INFINITY;
            }
        __syncthreads();

        {  // online softmax: two threads per row, 16 keys each
            const int r = tid >> 1, half = tid & 1;
            float* p = p_s + r * kPs + half * (kKeys / 2);
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < kKeys / 2; ++j)
                mx = fmaxf(mx, p[j]);
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            const float m_old = m_s[r];
            const float m_new = fmaxf(m_old, mx);
            float sum = 0.0f;
#pragma unroll
            for (int j = 0; j < kKeys / 2; ++j) {
                const float e = m_new == -INFINITY ? 0.0f : __expf(p[j] - m_new);
                p[j] = e;
                sum += e;
            }
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            const float alpha = m_old == -INFINITY ? 0.0f : __expf(m_old - m_new);
            // Both lanes of the row read m_s[r] above; only __syncwarp (not the shuffle) orders those reads before
            // lane 0's write in the memory model (compute-sanitizer racecheck flagged it).
            __syncwarp();
            if (half == 0) {
                m_s[r] = m_new;
                l_s[r] = l_s[r] * alpha + sum;
                alpha_s[r] = alpha;
            }
        }
        __syncthreads();

#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float al = alpha_s[rg * 4 + i];
#pragma unroll
            for (int c = 0; c < DC; ++c)
                acc[i][c] *= al;
        }
#pragma unroll 4
        for (int j = 0; j < kKeys; ++j) {
            float p[4];
#pragma unroll
            for (int i = 0; i < 4; ++i)
                p[i] = p_s[(rg * 4 + i) * kPs + j];
#pragma unroll
            for (int c = 0; c < DC; ++c) {
                const float v = v_s[j * D + cg + 8 * c];
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    acc[i][c] += p[i] * v;
            }
        }
    }
    __syncthreads();

#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int r = rg * 4 + i, qi = r / G, g = r % G;
        if (r >= rows || qi >= tile_tokens) continue;
        const int64_t t = q_begin + tile_q0 + qi;
        const int h = kvh * G + g;
        if (a.num_splits == 1) {
            const float inv = 1.0f / l_s[r];
            float* o = a.out.data + t * a.out.stride_t + int64_t(h) * a.out.stride_h;
#pragma unroll
            for (int c = 0; c < DC; ++c)
                o[cg + 8 * c] = acc[i][c] * inv;
        } else {
            // Workspace: partial outputs [splits, T, H_q, D], then maxima and sums [splits, T, H_q] each.
            const int64_t row = (int64_t(split) * a.T + t) * a.H_q + h;
            float* o = a.workspace + row * D;
#pragma unroll
            for (int c = 0; c < DC; ++c)
                o[cg + 8 * c] = acc[i][c];
            if (cg == 0) {
                const int64_t stats = int64_t(a.num_splits) * a.T * a.H_q * D;
                a.workspace[stats + row] = m_s[r];
                a.workspace[stats + int64_t(a.num_splits) * a.T * a.H_q + row] = l_s[r];
            }
        }
    }
}

// One block per (token, query head): out = Σ_s acc_s · e^(m_s - M) / Σ_s l_s · e^(m_s - M). The splits' maxima and
// sums are read once, all at once, into shared memory (at batch 1 this kernel's time is its chain of memory round
// trips), and each output's partial results are loaded eight splits at a time. Its speed was not measured (session 30).
constexpr int kMaxSplits = 64;  // plan_paged_attention_splits' clamp
__global__ void combine_splits_kernel(PagedAttentionArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    __shared__ float m_s[kMaxSplits], l_s[kMaxSplits];
    const int64_t th = blockIdx.x;  // t * H_q + h
    const int64_t t = th / a.H_q, h = th % a.H_q;
    const int64_t per_split = a.T * a.H_q;
    const float* m = a.workspace + int64_t(a.num_splits) * per_split * a.D;
    const float* l = m + int64_t(a.num_splits) * per_split;
    for (int s = threadIdx.x; s < a.num_splits; s += blockDim.x) {
        m_s[s] = m[s * per_split + th];
        l_s[s] = l[s * per_split + th];
    }
    __syncthreads();
    float M = -INFINITY;
    for (int s = 0; s < a.num_splits; ++s)
        M = fmaxf(M, m_s[s]);
    float L = 0.0f;
    for (int s = 0; s < a.num_splits; ++s)
        if (m_s[s] != -INFINITY) L += l_s[s] * __expf(m_s[s] - M);
    const float inv = 1.0f / L;
    for (int d = threadIdx.x; d < a.D; d += blockDim.x) {
        float o = 0.0f;
#pragma unroll 8
        for (int s = 0; s < a.num_splits; ++s) {
            const float part = a.workspace[(s * per_split + th) * a.D + d];
            if (m_s[s] != -INFINITY) o += part * __expf(m_s[s] - M);
        }
        a.out.data[t * a.out.stride_t + h * a.out.stride_h + d] = o * inv;
    }
}

template <int D, typename C>
void launch_typed(const PagedAttentionArgs& a, dim3 grid, SeqFilter filter, cudaStream_t stream) {
    constexpr size_t bytes = smem_floats<D>() * sizeof(float);
    // 137 KB at head_dim 256: more than sm_86 / sm_89 parts allow. The bf16 cache takes the tensor-core kernels,
    // which fit every GPU; this one serves fp16/fp32 caches and query groups over 16.
    PAGODA_KERNEL_REQUIRE(bytes <= size_t(max_block_smem()),
                          "paged_attention: this head_dim's fp16/fp32-cache kernel needs more shared memory than the "
                          "GPU allows a block; use a bf16 KV cache");
    allow_dynamic_smem<paged_attention_kernel<D, C>>(int(bytes));
    launch_kernel<paged_attention_kernel<D, C>>(grid, kThreads, bytes, stream, a, filter);
}

template <int D>
void launch_dim(const PagedAttentionArgs& a, dim3 grid, SeqFilter filter, cudaStream_t stream) {
    switch (a.cache_type) {
        case ElemType::BF16:
            launch_typed<D, __nv_bfloat16>(a, grid, filter, stream);
            break;
        case ElemType::F16:
            launch_typed<D, __half>(a, grid, filter, stream);
            break;
        case ElemType::F8E4M3:
            launch_typed<D, __nv_fp8_e4m3>(a, grid, filter, stream);
            break;
        default:
            launch_typed<D, float>(a, grid, filter, stream);
            break;
    }
}

void launch_general(const PagedAttentionArgs& a, dim3 grid, SeqFilter filter, cudaStream_t stream) {
    switch (a.D) {
        case 16:
            launch_dim<16>(a, grid, filter, stream);
            break;
        case 32:
            launch_dim<32>(a, grid, filter, stream);
            break;
        case 64:
            launch_dim<64>(a, grid, filter, stream);
            break;
        case 128:
            launch_dim<128>(a, grid, filter, stream);
            break;
        default:
            launch_dim<256>(a, grid, filter, stream);
            break;
    }
}

}  // namespace

bool paged_attention_supports_head_dim(int D) {
    return D == 16 || D == 32 || D == 64 || D == 128 || D == 256;
}

int plan_paged_attention_splits(const PagedAttentionArgs& a, int sm_count) {
    if (a.max_query_len > 1 && prefill_attention_applies(a)) return 1;  // the tensor-core kernel does not split
    const int qt = tokens_per_tile(a.H_q / a.H_kv);
    const int64_t tiles = (int64_t(a.max_query_len) + qt - 1) / qt;
    const int64_t base = tiles * a.num_seqs * a.H_kv;
    if (base >= sm_count) return 1;
    const int64_t want = (2 * int64_t(sm_count) + base - 1) / base;
    const int64_t by_len = std::max<int64_t>(1, a.max_seq_len / 64);  // at least 64 keys per split
    int64_t cap = kMaxSplits;
    if (decode_attention_cluster_limit() > 8 && a.max_query_len == 1 && decode_attention_applies(a) &&
        a.max_seq_len <= decode_attention_cluster_cap_context())
        cap = decode_attention_cluster_limit();  // every sequence's splits in one cluster (attention_internal.cuh)
    return static_cast<int>(std::clamp<int64_t>(std::min(want, by_len), 1, cap));
}

size_t paged_attention_workspace_floats(int64_t T, int H_q, int D, int num_splits) {
    return num_splits <= 1 ? 0 : size_t(num_splits) * size_t(T) * size_t(H_q) * size_t(D + 2);
}

// Splits > 1 need base = tiles·S·H_kv < sm_count, and give at most ⌈2·sm_count / base⌉ splits. T ≤ S·tiles·qt =
// base·qt / H_kv, so splits·T ≤ (2·sm_count + base)·qt / H_kv < 3·sm_count·qt / H_kv.
size_t paged_attention_workspace_bound_floats(int H_q, int H_kv, int D, int sm_count) {
    const size_t split_rows = 3 * size_t(sm_count) * size_t(tokens_per_tile(H_q / H_kv)) / size_t(H_kv);
    return split_rows * size_t(H_q) * size_t(D + 2);
}

void launch_paged_attention(const PagedAttentionArgs& a, cudaStream_t stream) {
    if (a.T == 0) return;
    PAGODA_KERNEL_REQUIRE(paged_attention_supports_head_dim(a.D), "paged_attention: head_dim not 16/32/64/128/256");
    PAGODA_KERNEL_REQUIRE(a.H_kv > 0 && a.H_q % a.H_kv == 0 && a.H_q / a.H_kv <= kRows,
                          "paged_attention: query heads must be a multiple (at most 64x) of KV heads");
    PAGODA_KERNEL_REQUIRE(
        a.num_splits >= 1 && a.num_splits <= kMaxSplits && (a.num_splits == 1 || a.workspace != nullptr),
        "paged_attention: split-KV needs a workspace (and at most 64 splits)");
    PAGODA_KERNEL_REQUIRE(a.num_seqs <= 65535 && int64_t(a.H_kv) * a.num_splits <= 65535,
                          "paged_attention: too many sequences or heads for one grid");
    const int qt = tokens_per_tile(a.H_q / a.H_kv);
    const dim3 grid(static_cast<unsigned>((a.max_query_len + qt - 1) / qt), static_cast<unsigned>(a.num_seqs),
                    static_cast<unsigned>(a.H_kv * a.num_splits));
    // Sequences with one query token go to the decode kernel, the others to the prefill kernel; what neither covers
    // (head dims 16/32, F16/F32 caches, G > 16, split prefill) to the general one.
    SeqFilter rest = SeqFilter::All;
    bool combined = false;
    if (decode_attention_applies(a) && (a.has_decode_seqs || a.max_query_len == 1)) {
        const bool all = a.max_query_len == 1;
        combined = launch_decode_attention(a, all ? SeqFilter::All : SeqFilter::SingleToken, stream);
        PAGODA_CUDA_CHECK_LAUNCH();
        rest = all ? SeqFilter::None : SeqFilter::MultiToken;
    }
    if (rest != SeqFilter::None) {
        if (prefill_attention_applies(a) && a.num_splits == 1)
            launch_prefill_attention(a, rest, stream);
        else
            launch_general(a, grid, rest, stream);
        PAGODA_CUDA_CHECK_LAUNCH();
    }
    if (a.num_splits > 1 && !combined) {
        launch_kernel<combine_splits_kernel>(static_cast<unsigned>(a.T * a.H_q), std::min(a.D, 256), 0, stream, a);
        PAGODA_CUDA_CHECK_LAUNCH();
    }
}

}  // namespace pagoda::kernels::cuda
