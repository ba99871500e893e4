// Tensor-core paged attention for sequences with several query tokens (prefill chunks, with or without a cached
// prefix), FlashAttention-2 style: a block owns 64 query tokens of one query head; each of its 4 warps owns 16 of
// them and keeps their output in registers. Per tile of 64 keys (gathered from the paged cache into shared memory):
// S = Q·Kᵀ with mma.sync m16n8k16 (bf16 in, fp32 accumulate), the causal mask, an online softmax in base 2, then
// O += P·V with P rounded to bf16, reusing S's accumulator layout as the A operand. Q is rounded to bf16 once (with
// the softmax scale and log2 e folded in). Rows of shared memory are padded by 16 bytes so the fragment loads of a
// warp fall in distinct banks.
#include "kernels/cuda/attention_internal.cuh"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kBlockQ = 64;
constexpr int kBlockK = 64;

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

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

template <int D>
constexpr size_t smem_bytes() {
    return size_t(kBlockQ + 2 * kBlockK) * (D + 8) * sizeof(__nv_bfloat16);
}

template <int D>
__global__ void __launch_bounds__(kThreads) prefill_attention_kernel(PagedAttentionArgs a, SeqFilter filter) {
    constexpr int LD = D + 8;  // row stride in bf16 elements
    extern __shared__ __align__(16) unsigned char smem_raw[];
    auto* q_s = reinterpret_cast<__nv_bfloat16*>(smem_raw);
    __nv_bfloat16* k_s = q_s + kBlockQ * LD;
    __nv_bfloat16* v_s = k_s + kBlockK * LD;

    const int s = blockIdx.y, h = blockIdx.z;
    const int q_begin = a.query_start_loc[s];
    const int qlen = a.query_start_loc[s + 1] - q_begin;
    const int q0 = blockIdx.x * kBlockQ;
    if (!serves(filter, qlen) || q0 >= qlen) return;
    const int seq_len = a.seq_lens[s];
    const int ctx = seq_len - qlen;
    const int kvh = h / (a.H_q / a.H_kv);
    const int rows = min(kBlockQ, qlen - q0);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;

    const float q_scale = a.scale * 1.4426950408889634f;  // softmax in base 2
    for (int i = tid; i < kBlockQ * D; i += kThreads) {
        const int r = i / D, d = i % D;
        float v = 0.0f;
        if (r < rows) v = a.q.data[int64_t(q_begin + q0 + r) * a.q.stride_t + int64_t(h) * a.q.stride_h + d] * q_scale;
        q_s[r * LD + d] = __float2bfloat16_rn(v);
    }

    // This thread's two rows (of its warp's 16) and the keys each may see.
    const int r_a = warp * 16 + g, r_b = r_a + 8;
    const int lim_a = ctx + q0 + r_a + 1, lim_b = ctx + q0 + r_b + 1;
    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; ++i)
        o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;

    const auto* kc = static_cast<const __nv_bfloat16*>(a.key_cache);
    const auto* vc = static_cast<const __nv_bfloat16*>(a.value_cache);
    const int32_t* table = a.block_tables + int64_t(s) * a.max_blocks_per_seq;
    const int kv_end = ctx + q0 + rows;  // keys the block's last row sees
    for (int k0 = 0; k0 < kv_end; k0 += kBlockK) {
        __syncthreads();                // the previous tile is consumed (and q_s is written before the first)
        constexpr int kChunks = D / 8;  // 16-byte pieces per row
        for (int i = tid; i < kBlockK * kChunks; i += kThreads) {
            const int j = i / kChunks, ch = i % kChunks, key = k0 + j;
            uint4 kr = make_uint4(0, 0, 0, 0), vr = kr;  // zeros past the end: 0 · garbage could be NaN
            if (key < kv_end) {
                const int64_t slot = int64_t(table[key / a.block_size]) * a.block_size + key % a.block_size;
                const int64_t off = (slot * a.H_kv + kvh) * D + ch * 8;
                kr = *reinterpret_cast<const uint4*>(kc + off);
                vr = *reinterpret_cast<const uint4*>(vc + off);
            }
            *reinterpret_cast<uint4*>(k_s + j * LD + ch * 8) = kr;
            *reinterpret_cast<uint4*>(v_s + j * LD + ch * 8) = vr;
        }
        __syncthreads();
        if (k0 >= ctx + q0 + warp * 16 + 16) continue;  // the whole tile is in this warp's future

        float sc[kBlockK / 8][4];
#pragma unroll
        for (int n = 0; n < kBlockK / 8; ++n)
            sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
        for (int kd = 0; kd < D; kd += 16) {
            const uint32_t qa[4] = {word(q_s + r_a * LD + kd + 2 * c), word(q_s + r_b * LD + kd + 2 * c),
                                    word(q_s + r_a * LD + kd + 2 * c + 8), word(q_s + r_b * LD + kd + 2 * c + 8)};
#pragma unroll
            for (int n = 0; n < kBlockK / 8; ++n) {
                const __nv_bfloat16* kr = k_s + (n * 8 + g) * LD + kd + 2 * c;
                const uint32_t kb[2] = {word(kr), word(kr + 8)};
                mma_bf16(sc[n], qa, kb);
            }
        }

        // Causal mask and the online softmax; a row's four threads (one quad) share its max and rescale.
        float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
        for (int n = 0; n < kBlockK / 8; ++n) {
            const int key = k0 + n * 8 + 2 * c;
            if (key >= lim_a) sc[n][0] = -INFINITY;
            if (key + 1 >= lim_a) sc[n][1] = -INFINITY;
            if (key >= lim_b) sc[n][2] = -INFINITY;
            if (key + 1 >= lim_b) sc[n][3] = -INFINITY;
            mx_a = fmaxf(mx_a, fmaxf(sc[n][0], sc[n][1]));
            mx_b = fmaxf(mx_b, fmaxf(sc[n][2], sc[n][3]));
        }
        mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 1));
        mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 2));
        mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 1));
        mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 2));
        const float new_a = fmaxf(m_a, mx_a), new_b = fmaxf(m_b, mx_b);
        // A row with no visible key yet (only padding rows) keeps base 0 so that no -inf - -inf appears.
        const float base_a = new_a == -INFINITY ? 0.0f : new_a, base_b = new_b == -INFINITY ? 0.0f : new_b;
        const float alpha_a = exp2f(m_a - base_a), alpha_b = exp2f(m_b - base_b);
        m_a = new_a, m_b = new_b;
        float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
        for (int n = 0; n < kBlockK / 8; ++n) {
            sc[n][0] = exp2f(sc[n][0] - base_a), sc[n][1] = exp2f(sc[n][1] - base_a);
            sc[n][2] = exp2f(sc[n][2] - base_b), sc[n][3] = exp2f(sc[n][3] - base_b);
            sum_a += sc[n][0] + sc[n][1];
            sum_b += sc[n][2] + sc[n][3];
        }
        l_a = l_a * alpha_a + sum_a;  // this thread's share of the row sum; the quad adds them up at the end
        l_b = l_b * alpha_b + sum_b;
#pragma unroll
        for (int i = 0; i < D / 8; ++i) {
            o[i][0] *= alpha_a, o[i][1] *= alpha_a;
            o[i][2] *= alpha_b, o[i][3] *= alpha_b;
        }

#pragma unroll
        for (int j = 0; j < kBlockK / 16; ++j) {
            const uint32_t pa[4] = {pack(sc[2 * j][0], sc[2 * j][1]), pack(sc[2 * j][2], sc[2 * j][3]),
                                    pack(sc[2 * j + 1][0], sc[2 * j + 1][1]), pack(sc[2 * j + 1][2], sc[2 * j + 1][3])};
            const __nv_bfloat16* v0 = v_s + (16 * j + 2 * c) * LD + g;
#pragma unroll
            for (int i = 0; i < D / 8; ++i) {
                const __nv_bfloat16* v = v0 + i * 8;
                const uint32_t vb[2] = {pack(v[0], v[LD]), pack(v[8 * LD], v[9 * LD])};
                mma_bf16(o[i], pa, vb);
            }
        }
    }

    l_a += __shfl_xor_sync(0xffffffffu, l_a, 1);
    l_a += __shfl_xor_sync(0xffffffffu, l_a, 2);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, 1);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, 2);
    const float inv_a = 1.0f / l_a, inv_b = 1.0f / l_b;
    float* out_a = a.out.data + int64_t(q_begin + q0 + r_a) * a.out.stride_t + int64_t(h) * a.out.stride_h;
    float* out_b = a.out.data + int64_t(q_begin + q0 + r_b) * a.out.stride_t + int64_t(h) * a.out.stride_h;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
        if (r_a < rows) out_a[i * 8 + 2 * c] = o[i][0] * inv_a, out_a[i * 8 + 2 * c + 1] = o[i][1] * inv_a;
        if (r_b < rows) out_b[i * 8 + 2 * c] = o[i][2] * inv_b, out_b[i * 8 + 2 * c + 1] = o[i][3] * inv_b;
    }
}

template <int D>
void launch_d(const PagedAttentionArgs& a, SeqFilter filter, cudaStream_t stream) {
    static const bool configured = [] {
        PAGODA_CUDA_CHECK(cudaFuncSetAttribute(prefill_attention_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               int(smem_bytes<D>())));
        return true;
    }();
    (void)configured;
    const dim3 grid(static_cast<unsigned>((a.max_query_len + kBlockQ - 1) / kBlockQ), static_cast<unsigned>(a.num_seqs),
                    static_cast<unsigned>(a.H_q));
    prefill_attention_kernel<D><<<grid, kThreads, smem_bytes<D>(), stream>>>(a, filter);
}

}  // namespace

bool prefill_attention_applies(const PagedAttentionArgs& a) {
    return a.cache_type == ElemType::BF16 && (a.D == 64 || a.D == 128 || a.D == 256);
}

void launch_prefill_attention(const PagedAttentionArgs& a, SeqFilter filter, cudaStream_t stream) {
    switch (a.D) {
        case 64:
            launch_d<64>(a, filter, stream);
            break;
        case 128:
            launch_d<128>(a, filter, stream);
            break;
        default:
            launch_d<256>(a, filter, stream);
            break;
    }
}

}  // namespace pagoda::kernels::cuda
