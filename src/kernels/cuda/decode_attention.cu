// Paged attention for decode-only batches (one query token per sequence), where the general kernel
// (attention.cu) would fill only G of its 64 tile rows. A block owns one sequence, one KV head and one KV split;
// each of its 4 warps walks 32 keys at a time: a lane scores one key against the G query heads of the group
// (q in shared memory, read as broadcasts), the warp does the online softmax of the 32 scores, then every lane
// accumulates its D/32 output dims over the 32 keys (V rows read whole by the warp). The warps' states are merged
// at the end; with several splits the partial results go to the same workspace as the general kernel's, and its
// combine kernel finishes them. Memory-bound by design: every K/V byte is read once per step.
#include "kernels/cuda/attention_internal.cuh"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

// N consecutive cache elements as floats, with the widest loads their size allows (16, 8 or 4 bytes at a time).
template <int N, typename C>
__device__ __forceinline__ void load_n(const C* p, float* out) {
    constexpr int kBytes = N * int(sizeof(C));
    if constexpr (kBytes % 16 == 0) {
        constexpr int kPer = 16 / int(sizeof(C));
#pragma unroll
        for (int i = 0; i < N; i += kPer) {
            const uint4 raw = *reinterpret_cast<const uint4*>(p + i);
            const C* e = reinterpret_cast<const C*>(&raw);
#pragma unroll
            for (int j = 0; j < kPer; ++j)
                out[i + j] = to_f32(e[j]);
        }
    } else if constexpr (kBytes == 8) {
        const uint2 raw = *reinterpret_cast<const uint2*>(p);
        const C* e = reinterpret_cast<const C*>(&raw);
#pragma unroll
        for (int j = 0; j < N; ++j)
            out[j] = to_f32(e[j]);
    } else {
#pragma unroll
        for (int j = 0; j < N; ++j)
            out[j] = to_f32(p[j]);
    }
}

// D: head dim (32..256, a multiple of 32); GM: the largest group size this instance handles (G <= GM).
template <int D, int GM, typename C>
__global__ void __launch_bounds__(kThreads) decode_attention_kernel(PagedAttentionArgs a, SeqFilter filter) {
    constexpr int DL = D / 32;  // output dims per lane: lane * DL .. lane * DL + DL - 1
    extern __shared__ float smem[];
    const int G = a.H_q / a.H_kv;
    float* q_s = smem;                     // [G][D], pre-scaled
    float* part = q_s + GM * D;            // [kWarps][GM][D] partial outputs
    float* stat = part + kWarps * GM * D;  // [kWarps][GM][2]: max, sum

    const int s = blockIdx.y;
    const int kvh = blockIdx.z % a.H_kv, split = blockIdx.z / a.H_kv;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t t = a.query_start_loc[s];
    if (!serves(filter, a.query_start_loc[s + 1] - int(t))) return;
    const int seq_len = a.seq_lens[s];
    int chunk = (seq_len + a.num_splits - 1) / a.num_splits;
    chunk = (chunk + 31) / 32 * 32;
    const int kv_lo = split * chunk;
    const int kv_hi = min(seq_len, kv_lo + chunk);

    for (int i = threadIdx.x; i < G * D; i += kThreads) {
        const int g = i / D, d = i % D;
        q_s[i] = a.q.data[t * a.q.stride_t + int64_t(kvh * G + g) * a.q.stride_h + d] * a.scale;
    }
    __syncthreads();

    float m[GM], l[GM], acc[GM][DL];
#pragma unroll
    for (int g = 0; g < GM; ++g) {
        m[g] = -INFINITY, l[g] = 0.0f;
#pragma unroll
        for (int c = 0; c < DL; ++c)
            acc[g][c] = 0.0f;
    }
    const C* kc = static_cast<const C*>(a.key_cache);
    const C* vc = static_cast<const C*>(a.value_cache);
    const int32_t* table = a.block_tables + int64_t(s) * a.max_blocks_per_seq;
    auto row_of = [&](int key) {
        const int64_t slot = int64_t(table[key / a.block_size]) * a.block_size + key % a.block_size;
        return (slot * a.H_kv + kvh) * D;
    };

    for (int base = kv_lo + warp * 32; base < kv_hi; base += kWarps * 32) {
        const int key = base + lane;
        const bool valid = key < kv_hi;
        float sc[GM];
#pragma unroll
        for (int g = 0; g < GM; ++g)
            sc[g] = 0.0f;
        if (valid) {
            const C* kp = kc + row_of(key);
#pragma unroll
            for (int d0 = 0; d0 < D; d0 += 8) {
                float k8[8];
                load_n<8>(kp + d0, k8);
#pragma unroll
                for (int g = 0; g < GM; ++g) {
                    if (g >= G) break;
#pragma unroll
                    for (int e = 0; e < 8; ++e)
                        sc[g] += q_s[g * D + d0 + e] * k8[e];
                }
            }
        }
        float p[GM];
#pragma unroll
        for (int g = 0; g < GM; ++g) {
            if (g >= G) break;
            const float mx = warp_max(valid ? sc[g] : -INFINITY);
            const float m_new = fmaxf(m[g], mx);  // finite: key base is always valid
            p[g] = valid ? __expf(sc[g] - m_new) : 0.0f;
            const float alpha = m[g] == -INFINITY ? 0.0f : __expf(m[g] - m_new);
            l[g] = l[g] * alpha + warp_sum(p[g]);
            m[g] = m_new;
#pragma unroll
            for (int c = 0; c < DL; ++c)
                acc[g][c] *= alpha;
        }
        // Unrolled so that several V rows are in flight at once: one at a time, the loop waits out a memory
        // latency per key.
        const int n = min(32, kv_hi - base);
#pragma unroll 8
        for (int j = 0; j < n; ++j) {
            float v[DL];
            load_n<DL>(vc + row_of(base + j) + lane * DL, v);
#pragma unroll
            for (int g = 0; g < GM; ++g) {
                if (g >= G) break;
                const float pj = __shfl_sync(0xffffffffu, p[g], j);
#pragma unroll
                for (int c = 0; c < DL; ++c)
                    acc[g][c] += pj * v[c];
            }
        }
    }

    // Merge the warps: each publishes its state, then thread i of the block finishes output element i of each head.
#pragma unroll
    for (int g = 0; g < GM; ++g) {
        if (g >= G) break;
#pragma unroll
        for (int c = 0; c < DL; ++c)
            part[(warp * GM + g) * D + lane * DL + c] = acc[g][c];
        if (lane == 0) stat[(warp * GM + g) * 2] = m[g], stat[(warp * GM + g) * 2 + 1] = l[g];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < G * D; i += kThreads) {
        const int g = i / D, d = i % D;
        float M = -INFINITY;
        for (int w = 0; w < kWarps; ++w)
            M = fmaxf(M, stat[(w * GM + g) * 2]);
        float L = 0.0f, O = 0.0f;
        for (int w = 0; w < kWarps; ++w) {
            const float mw = stat[(w * GM + g) * 2];
            if (mw == -INFINITY) continue;
            const float f = __expf(mw - M);
            L += stat[(w * GM + g) * 2 + 1] * f;
            O += part[(w * GM + g) * D + d] * f;
        }
        const int h = kvh * G + g;
        if (a.num_splits == 1) {
            a.out.data[t * a.out.stride_t + int64_t(h) * a.out.stride_h + d] = O / L;
        } else {
            const int64_t row = (int64_t(split) * a.T + t) * a.H_q + h;
            a.workspace[row * D + d] = O;
            if (d == 0) {
                const int64_t stats = int64_t(a.num_splits) * a.T * a.H_q * D;
                a.workspace[stats + row] = M;
                a.workspace[stats + int64_t(a.num_splits) * a.T * a.H_q + row] = L;
            }
        }
    }
}

template <int D, int GM, typename C>
void launch_typed(const PagedAttentionArgs& a, dim3 grid, SeqFilter filter, cudaStream_t stream) {
    constexpr size_t bytes = (size_t(GM) * D * (1 + kWarps) + size_t(kWarps) * GM * 2) * sizeof(float);
    static const bool configured = [] {
        PAGODA_CUDA_CHECK(cudaFuncSetAttribute(decode_attention_kernel<D, GM, C>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
        return true;
    }();
    (void)configured;
    decode_attention_kernel<D, GM, C><<<grid, kThreads, bytes, stream>>>(a, filter);
}

template <int D, int GM>
void launch_gm(const PagedAttentionArgs& a, dim3 grid, SeqFilter filter, cudaStream_t stream) {
    switch (a.cache_type) {
        case ElemType::BF16:
            launch_typed<D, GM, __nv_bfloat16>(a, grid, filter, stream);
            break;
        case ElemType::F16:
            launch_typed<D, GM, __half>(a, grid, filter, stream);
            break;
        default:
            launch_typed<D, GM, float>(a, grid, filter, stream);
            break;
    }
}

template <int D>
void launch_d(const PagedAttentionArgs& a, dim3 grid, SeqFilter filter, cudaStream_t stream) {
    const int G = a.H_q / a.H_kv;
    if (G <= 4)
        launch_gm<D, 4>(a, grid, filter, stream);
    else if (G <= 8)
        launch_gm<D, 8>(a, grid, filter, stream);
    else
        launch_gm<D, 16>(a, grid, filter, stream);
}

}  // namespace

bool decode_attention_applies(const PagedAttentionArgs& a) {
    return (a.D == 64 || a.D == 128 || a.D == 256) && a.H_q / a.H_kv <= 16;
}

void launch_decode_attention(const PagedAttentionArgs& a, SeqFilter filter, cudaStream_t stream) {
    const dim3 grid(1, static_cast<unsigned>(a.num_seqs), static_cast<unsigned>(a.H_kv * a.num_splits));
    switch (a.D) {
        case 64:
            launch_d<64>(a, grid, filter, stream);
            break;
        case 128:
            launch_d<128>(a, grid, filter, stream);
            break;
        default:
            launch_d<256>(a, grid, filter, stream);
            break;
    }
}

}  // namespace pagoda::kernels::cuda
