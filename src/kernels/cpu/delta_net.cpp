// Gated DeltaNet pieces: causal depthwise conv1d with per-sequence state, the gates, and the gated delta rule in
// its recurrent (decode) and chunked (prefill) forms; both keep an fp32 state [dk, dv] per value head.
#include <algorithm>
#include <cmath>

#include "common/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/internal.h"

namespace pagoda::kernels::cpu {

namespace {
struct SeqSpan {
    int64_t begin, len, slot;
    bool fresh;  // no cached context: start from a zero state
};
PAGODA_INLINE SeqSpan seq_span(const SeqInfo& s, int64_t i, int64_t num_slots) {
    const int64_t b = s.query_start_loc[i], e = s.query_start_loc[i + 1];
    const int64_t slot = s.state_slots[i];
    PAGODA_CHECK_MSG(slot >= 0 && slot < num_slots, "delta net: state slot out of range");
    return {b, e - b, slot, s.seq_lens[i] == e - b};
}
}  // namespace

void launch_causal_conv1d_silu(const CausalConv1dArgs& a) {
    PAGODA_CHECK(a.K >= 2 && a.K <= 8);
    const int64_t H = a.K - 1;  // history length kept in the state
    const int64_t work = static_cast<int64_t>(a.seqs.num_seqs) * a.C;
#pragma omp parallel for schedule(static) if (work * a.K > kParallelMinWork)
    for (int64_t item = 0; item < work; ++item) {
        const int64_t si = item / a.C, c = item % a.C;
        const SeqSpan sp = seq_span(a.seqs, si, a.num_slots);
        float w[8], hist[8];
        for (int64_t i = 0; i < a.K; ++i)
            w[i] = load_as_f32(a.weight, a.weight_dtype, c * a.K + i);
        float* state = a.conv_state + (sp.slot * a.C + c) * H;
        for (int64_t i = 0; i < H; ++i)
            hist[i] = sp.fresh ? 0.0f : state[i];
        for (int64_t t = 0; t < sp.len; ++t) {
            const float xt = a.x[(sp.begin + t) * a.x_stride + c];
            float acc = w[a.K - 1] * xt;
            for (int64_t i = 0; i < H; ++i)
                acc += w[i] * hist[i];
            a.out[(sp.begin + t) * a.out_stride + c] = silu(acc);
            for (int64_t i = 0; i + 1 < H; ++i)
                hist[i] = hist[i + 1];
            hist[H - 1] = xt;
        }
        for (int64_t i = 0; i < H; ++i)
            state[i] = hist[i];
    }
}

void launch_gdn_gating(const GdnGatingArgs& a) {
    for (int64_t t = 0; t < a.T; ++t)
        for (int64_t h = 0; h < a.H; ++h) {
            const float A = std::exp(load_as_f32(a.a_log, a.a_log_dtype, h));
            const float dt = load_as_f32(a.dt_bias, a.dt_bias_dtype, h);
            a.g[t * a.g_stride + h] = -A * softplus(a.a[t * a.a_stride + h] + dt);
            a.beta[t * a.beta_stride + h] = sigmoid(a.b[t * a.b_stride + h]);
        }
}

namespace {

struct HeadIo {
    const DeltaRuleArgs* a;
    int64_t hv, kh;
    PAGODA_INLINE const float* q(int64_t t) const { return a->q.data + t * a->q.stride_t + kh * a->q.stride_h; }
    PAGODA_INLINE const float* k(int64_t t) const { return a->k.data + t * a->k.stride_t + kh * a->k.stride_h; }
    PAGODA_INLINE const float* v(int64_t t) const { return a->v.data + t * a->v.stride_t + hv * a->v.stride_h; }
    PAGODA_INLINE float* o(int64_t t) const { return a->out.data + t * a->out.stride_t + hv * a->out.stride_h; }
    PAGODA_INLINE float g(int64_t t) const { return a->g[t * a->g_stride + hv]; }
    PAGODA_INLINE float beta(int64_t t) const { return a->beta[t * a->beta_stride + hv]; }
};

// Token by token: S = e^g S; S += k ⊗ β(v − Sᵀk); o = Sᵀ q.
PAGODA_INLINE void recurrent(const HeadIo& io, int64_t begin, int64_t len, float* S, float* kv) {
    const int64_t dk = io.a->dk, dv = io.a->dv;
    const float qs = io.a->q_scale;
    for (int64_t t = begin; t < begin + len; ++t) {
        const float* q = io.q(t);
        const float* k = io.k(t);
        const float* v = io.v(t);
        const float decay = std::exp(io.g(t)), beta = io.beta(t);
        std::fill(kv, kv + dv, 0.0f);
        for (int64_t i = 0; i < dk; ++i) {
            float* s = S + i * dv;
            for (int64_t j = 0; j < dv; ++j) {
                s[j] *= decay;
                kv[j] += s[j] * k[i];
            }
        }
        for (int64_t j = 0; j < dv; ++j)
            kv[j] = beta * (v[j] - kv[j]);  // delta
        float* o = io.o(t);
        std::fill(o, o + dv, 0.0f);
        for (int64_t i = 0; i < dk; ++i) {
            float* s = S + i * dv;
            const float ki = k[i], qi = q[i] * qs;
            for (int64_t j = 0; j < dv; ++j) {
                s[j] += ki * kv[j];
                o[j] += s[j] * qi;
            }
        }
    }
}

// C[i][:D] += alpha · Σ_p A(i,p) · B[p][:D] for i < M, p < P, with A(i,p) = A[i*as_i + p*as_p]: the small
// matrix products of the chunked form, register-blocked over 4 rows of C so each B row is loaded once per 4 rows.
template <class V>
PAGODA_INLINE void matmul_acc(int64_t M, int64_t P, int64_t D, const float* A, int64_t as_i, int64_t as_p,
                              const float* B, int64_t ldb, float* C, int64_t ldc, float alpha) {
    constexpr int64_t L = kLanes<V>;
    int64_t d0 = 0;
    for (; d0 + L <= D; d0 += L) {
        int64_t i = 0;
        for (; i + 4 <= M; i += 4) {
            V c0 = loadv<V>(C + i * ldc + d0), c1 = loadv<V>(C + (i + 1) * ldc + d0);
            V c2 = loadv<V>(C + (i + 2) * ldc + d0), c3 = loadv<V>(C + (i + 3) * ldc + d0);
            const float* a = A + i * as_i;
            for (int64_t p = 0; p < P; ++p) {
                const V b = loadv<V>(B + p * ldb + d0);
                c0 += (V{} + alpha * a[p * as_p]) * b;
                c1 += (V{} + alpha * a[as_i + p * as_p]) * b;
                c2 += (V{} + alpha * a[2 * as_i + p * as_p]) * b;
                c3 += (V{} + alpha * a[3 * as_i + p * as_p]) * b;
            }
            storev(C + i * ldc + d0, c0);
            storev(C + (i + 1) * ldc + d0, c1);
            storev(C + (i + 2) * ldc + d0, c2);
            storev(C + (i + 3) * ldc + d0, c3);
        }
        for (; i < M; ++i) {
            V c = loadv<V>(C + i * ldc + d0);
            for (int64_t p = 0; p < P; ++p)
                c += (V{} + alpha * A[i * as_i + p * as_p]) * loadv<V>(B + p * ldb + d0);
            storev(C + i * ldc + d0, c);
        }
    }
    for (int64_t d = d0; d < D; ++d)
        for (int64_t i = 0; i < M; ++i) {
            float c = 0.0f;
            for (int64_t p = 0; p < P; ++p)
                c += A[i * as_i + p * as_p] * B[p * ldb + d];
            C[i * ldc + d] += alpha * c;
        }
}

// Chunks of C rows with G = cumsum(g) inside the chunk and L[i,j] = β_i (k_i·k_j) e^{G_i−G_j} (i > j):
//   U = (I+L)⁻¹ diag(β) V,  W = (I+L)⁻¹ diag(β e^G) K         (forward substitution)
//   V' = U − W S,  O_i = e^{G_i} Sᵀq_i + Σ_{j≤i} (q_i·k_j) e^{G_i−G_j} V'_j,  S ← e^{G_last} S + Σ_j e^{G_last−G_j} k_j
//   ⊗ V'_j
// The state-sized products are small GEMMs (matmul_acc), so S is streamed a few times per chunk, not per token.
template <class V>
PAGODA_INLINE void chunked(const HeadIo& io, int64_t begin, int64_t len, float* S, float* work) {
    const int64_t dk = io.a->dk, dv = io.a->dv, C = io.a->chunk_size;
    const float qs = io.a->q_scale;
    float* G = work;        // [C]
    float* Lm = G + C;      // [C, C]: L during the substitution, then the intra-chunk attention
    float* U = Lm + C * C;  // [C, dv]: U, then V'
    float* W = U + C * dv;  // [C, dk]: W, then the decayed keys for the state update
    float* Q = W + C * dk;  // [C, dk]: scaled q, then e^G-scaled q
    const int64_t ldo = io.a->out.stride_t;
    for (int64_t c0 = 0; c0 < len; c0 += C) {
        const int64_t n = std::min(C, len - c0);
        const int64_t t0 = begin + c0;
        float cum = 0.0f;
        for (int64_t i = 0; i < n; ++i) {
            cum += io.g(t0 + i);
            G[i] = cum;
            const float* q = io.q(t0 + i);
            for (int64_t d = 0; d < dk; ++d)
                Q[i * dk + d] = q[d] * qs;
        }
        for (int64_t i = 0; i < n; ++i) {
            const float* ki = io.k(t0 + i);
            const float bi = io.beta(t0 + i);
            for (int64_t j = 0; j < i; ++j)
                Lm[i * C + j] = bi * dot_f32(ki, io.k(t0 + j), dk) * std::exp(G[i] - G[j]);
            // Forward substitution, row i: U_i = β_i v_i − Σ_{j<i} L_ij U_j; W_i = β_i e^{G_i} k_i − Σ L_ij W_j.
            const float* vi = io.v(t0 + i);
            float* u = U + i * dv;
            float* w = W + i * dk;
            for (int64_t d = 0; d < dv; ++d)
                u[d] = bi * vi[d];
            const float e = bi * std::exp(G[i]);
            for (int64_t d = 0; d < dk; ++d)
                w[d] = e * ki[d];
            for (int64_t j = 0; j < i; ++j) {
                const float l = Lm[i * C + j];
                const float* uj = U + j * dv;
                const float* wj = W + j * dk;
                for (int64_t d = 0; d < dv; ++d)
                    u[d] -= l * uj[d];
                for (int64_t d = 0; d < dk; ++d)
                    w[d] -= l * wj[d];
            }
        }
        // V' = U − W S (in place in U).
        matmul_acc<V>(n, dk, dv, W, dk, 1, S, dv, U, dv, -1.0f);
        // Intra-chunk attention A[i,j] = (q_i·k_j) e^{G_i−G_j} for j <= i, zero above the diagonal.
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j)
                Lm[i * C + j] = j <= i ? dot_f32(Q + i * dk, io.k(t0 + j), dk) * std::exp(G[i] - G[j]) : 0.0f;
        // O = diag(e^G) Q S + A V'.
        for (int64_t i = 0; i < n; ++i) {
            const float eg = std::exp(G[i]);
            for (int64_t d = 0; d < dk; ++d)
                Q[i * dk + d] *= eg;
            std::fill(io.o(t0 + i), io.o(t0 + i) + dv, 0.0f);
        }
        float* O = io.o(t0);
        matmul_acc<V>(n, dk, dv, Q, dk, 1, S, dv, O, ldo, 1.0f);
        matmul_acc<V>(n, n, dv, Lm, C, 1, U, dv, O, ldo, 1.0f);
        // S ← e^{G_last} S + Kdᵀ V' with Kd_j = e^{G_last − G_j} k_j.
        const float glast = G[n - 1];
        for (int64_t j = 0; j < n; ++j) {
            const float* kj = io.k(t0 + j);
            const float f = std::exp(glast - G[j]);
            for (int64_t d = 0; d < dk; ++d)
                W[j * dk + d] = kj[d] * f;
        }
        const float el = std::exp(glast);
        for (int64_t r = 0; r < dk * dv; ++r)
            S[r] *= el;
        matmul_acc<V>(dk, n, dv, W, 1, dk, U, dv, S, dv, 1.0f);
    }
}

}  // namespace

namespace {
struct DeltaItem {
    const DeltaRuleArgs* a;
    int64_t item;
};

// One (sequence, value head).
template <class V>
PAGODA_INLINE void delta_item(const DeltaItem& it) {
    const DeltaRuleArgs& a = *it.a;
    const int64_t si = it.item / a.Hv, hv = it.item % a.Hv;
    const SeqSpan sp = seq_span(a.seqs, si, a.num_slots);
    float* S = a.state + (sp.slot * a.Hv + hv) * a.dk * a.dv;
    if (sp.fresh) std::fill(S, S + a.dk * a.dv, 0.0f);
    if (sp.len == 0) return;
    const HeadIo io{&a, hv, hv / (a.Hv / a.Hk)};
    const bool use_chunked = a.mode == 2 || (a.mode == 0 && sp.len > 1);
    if (use_chunked) {
        const int64_t C = a.chunk_size;
        float* work = scratch(1, static_cast<size_t>(C + C * C + C * (a.dv + 2 * a.dk)));
        chunked<V>(io, sp.begin, sp.len, S, work);
    } else {
        recurrent(io, sp.begin, sp.len, S, scratch(1, static_cast<size_t>(a.dv)));
    }
}

PAGODA_ISA_VARIANTS(delta_item_isa, const DeltaItem&, delta_item<Vec>(r))
}  // namespace

void launch_gated_delta_rule(const DeltaRuleArgs& a) {
    PAGODA_CHECK(a.Hk > 0 && a.Hv % a.Hk == 0 && a.chunk_size > 0);
    const int64_t items = static_cast<int64_t>(a.seqs.num_seqs) * a.Hv;
    const int64_t work = static_cast<int64_t>(a.seqs.query_start_loc[a.seqs.num_seqs]) * a.Hv * a.dk * a.dv * 4;
#pragma omp parallel for schedule(dynamic, 1) if (work > kParallelMinWork)
    for (int64_t item = 0; item < items; ++item)
        delta_item_isa({&a, item});
}

}  // namespace pagoda::kernels::cpu
