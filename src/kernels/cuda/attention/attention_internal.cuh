// Shared by the paged-attention .cu files: the decode-only kernel (decode_attention.cu) that launch_paged_attention
// (attention.cu) picks for batches of one query token per sequence.
#pragma once

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/attention/attention.h"

namespace pagoda::kernels::cuda {

// Which sequences a kernel launch serves: the batch is split by query length when both kinds are present.
enum class SeqFilter : int { All, SingleToken, MultiToken, None };
__device__ __forceinline__ bool serves(SeqFilter f, int qlen) {
    return f == SeqFilter::All || (f == SeqFilter::SingleToken) == (qlen == 1);
}

// True when the decode kernel applies (BF16 caches, D 64/128/256, G <= 16).
bool decode_attention_applies(const PagedAttentionArgs& a);
// Grid (H_kv * num_splits, num_seqs); same workspace layout as the general kernel.
void launch_decode_attention(const PagedAttentionArgs& a, SeqFilter filter, cudaStream_t stream);

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

// True when the tensor-core prefill kernel applies (BF16 caches, D 64/128/256); it needs num_splits == 1.
bool prefill_attention_applies(const PagedAttentionArgs& a);
void launch_prefill_attention(const PagedAttentionArgs& a, SeqFilter filter, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
