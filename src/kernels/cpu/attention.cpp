// Paged KV write and paged causal attention (GQA) over several sequences of one batch; caches of F32 or of e4m3 with a
// per-tensor scale (--kv-cache-dtype fp8: quantised here when written, dequantised when read).
#include <algorithm>
#include <cmath>

#include "common/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/internal.h"

namespace pagoda::kernels::cpu {

namespace {
// One row of D values into the cache: copied, or quantised (x · inv_scale, then e4m3 by the one CPU rounding).
void store_row(const float* x, void* cache, int64_t at, int64_t D, bool fp8, float inv_scale) {
    if (fp8) {
        uint8_t* dst = static_cast<uint8_t*>(cache) + at;
        for (int64_t d = 0; d < D; ++d)
            dst[d] = f32_to_f8e4m3(x[d] * inv_scale);
    } else {
        std::copy(x, x + D, static_cast<float*>(cache) + at);
    }
}

// KV head h's scales where a checkpoint gives one per head (the CUDA kernels compute them alike, so both store the
// same bytes).
float head_inv_scale(float inv_scale, const float* heads, int64_t h) {
    return heads ? inv_scale / heads[h] : inv_scale;
}
float head_scale(float scale, const float* heads, int64_t h) {
    return heads ? scale * heads[h] : scale;
}

// One cached row as F32: in place for an F32 cache, else dequantised into buf.
PAGODA_INLINE const float* load_row(const void* cache, int64_t at, int64_t D, bool fp8, float scale, float* buf) {
    if (!fp8) return static_cast<const float*>(cache) + at;
    const float* lut = e4m3_table().data();
    const uint8_t* src = static_cast<const uint8_t*>(cache) + at;
    for (int64_t d = 0; d < D; ++d)
        buf[d] = lut[src[d]] * scale;
    return buf;
}
}  // namespace

void launch_paged_kv_write(const PagedKvWriteArgs& a) {
    const int64_t row = a.H_kv * a.D;
#pragma omp parallel for schedule(static) if (a.T * row > kParallelMinWork)
    for (int64_t t = 0; t < a.T; ++t) {
        const int64_t slot = a.slot_mapping[t];
        if (slot < 0) continue;
        PAGODA_CHECK_MSG(slot < a.num_slots, "write_kv: slot beyond the cache");
        for (int64_t h = 0; h < a.H_kv; ++h) {
            store_row(a.k + t * a.k_stride_t + h * a.k_stride_h, a.key_cache, slot * row + h * a.D, a.D, a.fp8,
                      head_inv_scale(a.k_inv_scale, a.k_head_scales, h));
            store_row(a.v + t * a.v_stride_t + h * a.v_stride_h, a.value_cache, slot * row + h * a.D, a.D, a.fp8,
                      head_inv_scale(a.v_inv_scale, a.v_head_scales, h));
        }
    }
}

KvAmax paged_kv_amax(const PagedKvWriteArgs& a) {
    KvAmax m;
    for (int64_t t = 0; t < a.T; ++t) {
        if (a.slot_mapping[t] < 0) continue;
        for (int64_t h = 0; h < a.H_kv; ++h) {
            const float* k = a.k + t * a.k_stride_t + h * a.k_stride_h;
            const float* v = a.v + t * a.v_stride_t + h * a.v_stride_h;
            for (int64_t d = 0; d < a.D; ++d) {
                m.k = std::max(m.k, std::fabs(k[d]));
                m.v = std::max(m.v, std::fabs(v[d]));
            }
        }
    }
    return m;
}

namespace {
struct AttnItem {
    const PagedAttentionArgs* a;
    int64_t item, group;
};

// One (token, kv head): the K/V rows are read once for all query heads of the group.
PAGODA_INLINE void attention_item(const AttnItem& it) {
    const PagedAttentionArgs& a = *it.a;
    const int64_t item = it.item, group = it.group;
    const int64_t row = a.H_kv * a.D;
    const int64_t t = item / a.H_kv, kvh = item % a.H_kv;
    const int32_t s = static_cast<int32_t>(
        std::upper_bound(a.query_start_loc, a.query_start_loc + a.num_seqs + 1, static_cast<int32_t>(t)) -
        a.query_start_loc - 1);
    const int64_t qlen = a.query_start_loc[s + 1] - a.query_start_loc[s];
    const int64_t ctx = a.seq_lens[s] - qlen;
    const int64_t L = ctx + (t - a.query_start_loc[s]) + 1;  // keys visible to this token (causal)
    const int32_t* table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks_per_seq;
    PAGODA_CHECK_MSG((L + a.block_size - 1) / a.block_size <= a.max_blocks_per_seq, "attention: block table short");

    float* scores = scratch(1, static_cast<size_t>(group * L));
    float* acc = scratch(2, static_cast<size_t>(group * a.D));
    float* row_buf = scratch(3, static_cast<size_t>(a.D));  // a dequantised fp8 row
    const float k_scale = head_scale(a.k_scale, a.k_head_scales, kvh);
    const float v_scale = head_scale(a.v_scale, a.v_head_scales, kvh);
    const float* qs[64];
    PAGODA_CHECK(group <= 64);
    for (int64_t g = 0; g < group; ++g)
        qs[g] = a.q.data + t * a.q.stride_t + (kvh * group + g) * a.q.stride_h;

    for (int64_t j = 0; j < L; ++j) {
        const int64_t block = table[j / a.block_size];
        PAGODA_CHECK(block >= 0 && block < a.num_blocks);
        const float* k = load_row(a.key_cache, (block * a.block_size + j % a.block_size) * row + kvh * a.D, a.D, a.fp8,
                                  k_scale, row_buf);
        for (int64_t g = 0; g < group; ++g) {
            scores[g * L + j] = dot_f32(qs[g], k, a.D) * a.scale;
        }
    }
    for (int64_t g = 0; g < group; ++g) {
        float* sc = scores + g * L;
        float mx = sc[0];
        for (int64_t j = 1; j < L; ++j)
            mx = std::max(mx, sc[j]);
        float sum = 0.0f;
        for (int64_t j = 0; j < L; ++j) {
            sc[j] = std::exp(sc[j] - mx);
            sum += sc[j];
        }
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < L; ++j)
            sc[j] *= inv;
    }
    std::fill(acc, acc + group * a.D, 0.0f);
    for (int64_t j = 0; j < L; ++j) {
        const int64_t block = table[j / a.block_size];
        const float* v = load_row(a.value_cache, (block * a.block_size + j % a.block_size) * row + kvh * a.D, a.D,
                                  a.fp8, v_scale, row_buf);
        for (int64_t g = 0; g < group; ++g) {
            const float p = scores[g * L + j];
            float* o = acc + g * a.D;
            for (int64_t d = 0; d < a.D; ++d)
                o[d] += p * v[d];
        }
    }
    for (int64_t g = 0; g < group; ++g) {
        float* out = a.out.data + t * a.out.stride_t + (kvh * group + g) * a.out.stride_h;
        for (int64_t d = 0; d < a.D; ++d)
            out[d] = acc[g * a.D + d];
    }
}

PAGODA_ISA_VARIANTS(attention_item_isa, const AttnItem&, attention_item(r))
}  // namespace

void launch_paged_attention(const PagedAttentionArgs& a) {
    PAGODA_CHECK(a.H_kv > 0 && a.H_q % a.H_kv == 0 && a.H_q / a.H_kv <= 64);
    const int64_t group = a.H_q / a.H_kv;
    const int64_t T = a.query_start_loc[a.num_seqs];
    int64_t work = 0;  // ~ multiply-adds: every new token reads its whole context for every query head
    for (int32_t s = 0; s < a.num_seqs; ++s)
        work += static_cast<int64_t>(a.query_start_loc[s + 1] - a.query_start_loc[s]) * a.seq_lens[s];
    work *= 2 * a.H_q * a.D;
#pragma omp parallel for schedule(dynamic, 1) if (work > kParallelMinWork)
    for (int64_t item = 0; item < T * a.H_kv; ++item)
        attention_item_isa({&a, item, group});
}

}  // namespace pagoda::kernels::cpu
