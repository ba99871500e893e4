// CUDA launchers for the Gated DeltaNet layers of Qwen3-Next / Qwen3.5 (the linear-attention mixer): causal conv1d
// with a per-slot conv state, the gates, L2 norm, the gated delta rule with an fp32 recurrent state per slot, and the
// gated RMSNorm. Same semantics as the CPU kernels (kernels/cpu/delta_net.cpp, norm.cpp); runtime/ops.h has the
// contracts. Activations are F32 with a contiguous last dimension and any outer strides. The per-sequence metadata
// lives on the DEVICE; the launchers read only host scalars, allocate nothing and never synchronise, so they can be
// recorded in CUDA graphs.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/types.h"

namespace pagoda::kernels::cuda {

// The sequences of a step, all arrays on the device. Sequence s owns token rows [query_start_loc[s],
// query_start_loc[s+1]); seq_lens[s] counts its tokens INCLUDING this step's, so a sequence with seq_lens[s] equal to
// its number of new tokens has no cached context and starts from zero conv and recurrent state; otherwise
// state_slots[s] holds its state after its first seq_lens[s] - query_len tokens. A slot outside [0, num_slots) makes
// the kernels skip the sequence (its outputs are not written; the CPU kernels abort instead).
struct DeltaNetSeqs {
    int32_t num_seqs = 0;                      // host
    const int32_t* query_start_loc = nullptr;  // device, [S+1]
    const int32_t* seq_lens = nullptr;         // device, [S]
    const int32_t* state_slots = nullptr;      // device, [S]
};

// out[t, c] = silu(Σ_i w[c, i] · x[t-K+1+i, c]) over each sequence's tokens, history before the first new token from
// conv_state[slot, c, :] (oldest first; zeros for a sequence without cached context); the state is then set to the
// sequence's last K-1 inputs. x, out [T, C] with row strides, must not alias.
struct CausalConv1dArgs {
    const float* x = nullptr;
    int64_t x_stride = 0;
    float* out = nullptr;
    int64_t out_stride = 0;
    int64_t C = 0;
    int K = 4;                     // 2..8
    const void* weight = nullptr;  // [C, K], contiguous
    ElemType weight_type = ElemType::BF16;
    float* conv_state = nullptr;  // [num_slots, C, K-1], contiguous
    int64_t num_slots = 0;
    DeltaNetSeqs seqs;
    int64_t num_tokens = 0;  // T, host; T == num_seqs picks the decode launch shape (any batch is handled correctly)
};
void launch_causal_conv1d_silu(const CausalConv1dArgs& a, cudaStream_t stream);

// g = -exp(a_log) · softplus(a + dt_bias) (softplus(x) = x above 20), beta = sigmoid(b); a, b, g, beta [T, H].
struct GdnGatingArgs {
    const float* a = nullptr;
    int64_t a_stride = 0;
    const float* b = nullptr;
    int64_t b_stride = 0;
    const void* a_log = nullptr;  // [H]
    ElemType a_log_type = ElemType::F32;
    const void* dt_bias = nullptr;  // [H]
    ElemType dt_bias_type = ElemType::F32;
    float* g = nullptr;
    int64_t g_stride = 0;
    float* beta = nullptr;
    int64_t beta_stride = 0;
    int64_t T = 0, H = 0;
};
void launch_gdn_gating(const GdnGatingArgs& a, cudaStream_t stream);

// In place x /= sqrt(Σ x² + eps) per (t, h) row of D.
struct L2NormArgs {
    Rows x;
    int64_t T = 0, H = 0, D = 0;
    float eps = 1e-6f;
};
void launch_l2_norm(const L2NormArgs& a, cudaStream_t stream);

// The gated delta rule with an fp32 state [num_slots, Hv, dk, dv] per sequence slot. Key head h serves value heads
// h*r .. h*r+r-1 (r = Hv/Hk). Per token: S = e^g S; S += k ⊗ β(v − Sᵀk); o = Sᵀ(q·q_scale). q, k [T, Hk, dk]; v, out
// [T, Hv, dv]; g, beta [T, Hv]. A sequence without cached context starts from a zero state (also when it has no new
// tokens: its state is zeroed, as on the CPU).
//
// Fused variants (the Ops interface keeps the separate ops; a fused caller skips their launches):
// - l2_norm_qk: q and k are L2-normalised (eps l2_eps) as they are loaded, in place of the two l2_norm launches before
//   it (q and k in memory are left as they are);
// - gate_a set: g and beta are computed from the gating inputs exactly as launch_gdn_gating computes them, in place of
//   that launch; the g/beta pointers are then not read.
struct GatedDeltaRuleArgs {
    Rows q, k, v, out;
    const float* g = nullptr;
    int64_t g_stride = 0;
    const float* beta = nullptr;
    int64_t beta_stride = 0;
    int Hk = 0, Hv = 0, dk = 0, dv = 0;  // dk <= kMaxDeltaRuleDk, any dv
    float q_scale = 1.0f;
    float* state = nullptr;  // [num_slots, Hv, dk, dv], contiguous
    int64_t num_slots = 0;
    DeltaNetSeqs seqs;
    int64_t num_tokens = 0;  // T, host: T == num_seqs (one token each) runs the decode kernel
    bool l2_norm_qk = false;
    float l2_eps = 1e-6f;
    const float* gate_a = nullptr;  // [T, Hv]; null: read g and beta
    int64_t gate_a_stride = 0;
    const float* gate_b = nullptr;  // [T, Hv]
    int64_t gate_b_stride = 0;
    const void* a_log = nullptr;  // [Hv]
    ElemType a_log_type = ElemType::F32;
    const void* dt_bias = nullptr;  // [Hv]
    ElemType dt_bias_type = ElemType::F32;
    // Sequences with at least this many new tokens (and a valid slot) run the chunked kernels, the rest the recurrent
    // one; 0: the recurrent kernel runs every sequence. The split is per sequence on the device, so one step launches
    // both launchers with the same args and each skips the other's sequences.
    int chunked_min_tokens = 0;
};
inline constexpr int kMaxDeltaRuleDk = 256;
// The recurrent form, exact to fp32 rounding against either CPU form. Decode-only batches (num_tokens == num_seqs) run
// the decode kernel; any other batch runs the prefill kernel for every sequence it owns (chunked_min_tokens), its
// decode sequences included (a one-token sequence is one short walk there).
void launch_gated_delta_rule(const GatedDeltaRuleArgs& a, cudaStream_t stream);

// The chunked form (delta_rule_chunked.cu): chunks of 64 tokens of one sequence, the intra-chunk products on tensor
// cores (TF32 mma.sync, fp32 accumulation and state), for the sequences with at least a.chunked_min_tokens (>= 1) new
// tokens; the others are left to launch_gated_delta_rule with the same args. Supports dk <= 128 (padded to 32, 64 or
// 128) and any dv; a larger dk must run recurrent (gated_delta_rule_chunked_supported). `workspace` holds
// gated_delta_rule_chunked_workspace_bytes(a.num_tokens, ...) bytes, 256-byte aligned: per token and value head
// W [dk], U [dv], the intra-chunk attention row [64] and 4 row factors, written by one kernel and read by the next in
// the same stream (so a step's workspace grows with its tokens: 84 MB at 2,048 tokens of Qwen3.5-9B's 32 heads).
// Two launches, no allocation, no synchronisation.
inline bool gated_delta_rule_chunked_supported(int dk, int dv) {
    return dk >= 1 && dk <= 128 && dv >= 1;
}
size_t gated_delta_rule_chunked_workspace_bytes(int64_t num_tokens, int Hv, int dk, int dv);
void launch_gated_delta_rule_chunked(const GatedDeltaRuleArgs& a, void* workspace, cudaStream_t stream);

// out = RMSNorm_plain(x) · w · silu(z) per (t, h) row of D; out may alias x.
struct GatedRmsNormArgs {
    Rows x, z, out;
    int64_t T = 0, H = 0, D = 0;
    const void* weight = nullptr;  // [D]
    ElemType weight_type = ElemType::F32;
    float eps = 1e-6f;
    // When set (out's heads contiguous): out rounded to bf16 as launch_convert_rows rounds it, also written here
    // packed [T, H · D], so the output projection's GEMM finds its input converted without another pass.
    void* out_bf16 = nullptr;
};
void launch_gated_rms_norm(const GatedRmsNormArgs& a, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
