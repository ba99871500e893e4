// Ops: the operations a model forward pass is written against, implemented for the CPU (cpu_ops.cpp) and CUDA
// (cuda_ops.cpp). Conventions (every op):
// - Activations are F32 on both backends. Linear weights carry their format (linear_weight.h: BF16, F16 or F32 run
//   today); other weights (norms, conv kernels) are BF16, F16 or F32 tensors. Accumulation is always fp32.
// - "[T, N]" tensors are rank 2 with a contiguous last dimension and any row stride, so a column slice of a fused
//   projection output is passed as a view, without a copy. "[T, H, D]" tensors are rank 3, last dimension contiguous,
//   any stride for T and H (e.g. the query half of Qwen3-Next's per-head interleaved q/gate output).
// - Outputs are written, not accumulated, unless the op says otherwise. Shapes are CHECKed (programmer errors).
// - Per-sequence metadata (positions, block tables, slot mapping, state slots) comes from the ForwardBatch.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "runtime/cache_pools.h"
#include "runtime/forward_batch.h"
#include "runtime/linear_weight.h"
#include "runtime/rope_table.h"
#include "tensor/tensor.h"

namespace pagoda {

// A recorded forward pass (Ops::end_capture); what it holds is the backend's business.
class StepGraph {
  public:
    virtual ~StepGraph() = default;
};

enum class NormKind : uint8_t {
    Plain,        // y = x̂ · w            (Qwen2.5, Qwen3, Qwen3-MoE, and linear_attn.norm)
    ZeroCentred,  // y = x̂ · (1 + w)      (Qwen3-Next / Qwen3.5 norms, incl. q_norm/k_norm)
};

// Routed experts of one MoE layer as two stacked weights, as Qwen3.5-MoE checkpoints store them: expert e's gate
// projection is rows [0, I) of gate_up[e], its up projection rows [I, 2I); a grouped GEMM takes each in one call.
// With expert parallelism a rank's stacks hold experts [first_expert, first_expert + E) of the model's num_experts;
// routed slots naming other experts are another rank's and contribute nothing here.
struct MoeExpertWeights {
    const LinearWeight& gate_up;  // [E, 2I, H]
    const LinearWeight& down;     // [E, H, I]
    int64_t first_expert = 0;
    int64_t num_experts = 0;  // the model's experts, ids in [0, num_experts); 0: E (every expert is here)
};

enum class DeltaRuleMode : uint8_t {
    Auto,       // chunked for sequences with more than one new token, recurrent for decode
    Recurrent,  // token by token (reference)
    Chunked,    // chunk size 64 for every sequence
};

class Ops {
  public:
    virtual ~Ops() = default;

    // Bracket one forward step (Model::forward calls them). A device backend uploads the batch's host arrays
    // (ids, positions, block tables, slot mapping, ...) here in one copy, and ops given spans of this batch use
    // the uploaded copies; spans from elsewhere are uploaded by the op itself. The CPU backend does nothing.
    virtual void begin_step(const ForwardBatch& batch) {}
    virtual void end_step() {}

    // Whether this backend runs the op named `op` (a member's name: "moe_experts"); calling one it does not run stops
    // the process with "not on <backend> yet". The op harness (tests/unit/ops) asks, and skips what is missing.
    virtual bool supports(std::string_view op) const { return true; }

    // out[t, :] = table[ids[t], :]. table [V, H] (any float dtype), out [T, H].
    virtual void embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) = 0;

    // out = RMSNorm(x) per row; x, out [T, H] (may alias); weight [H]. Statistics in fp32.
    virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, NormKind kind, const Tensor& out) = 0;
    // residual += x; out = RMSNorm(residual). The residual add of one sub-layer fused with the next pre-norm.
    virtual void add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& weight, float eps, NormKind kind,
                              const Tensor& out) = 0;
    // y = x · Wᵀ (linear), y *= sigmoid(gate) (sigmoid_mul, gate [T, 1]), then out += y (add): the gated shared
    // expert's down projection added into the mixture's output (Qwen3.5-MoE, Qwen3-Next). A device backend may do it
    // all in the projection's kernel and leave y unwritten (CUDA for one token through a dense weight, unless
    // PAGODA_SHARED_EXPERT_ADD=0); out is the same to the bit.
    virtual void linear_gated_add(const Tensor& x, const LinearWeight& w, const Tensor& y, const Tensor& gate,
                                  const Tensor& out) {
        linear(x, w, y);
        sigmoid_mul(y, gate);
        add(out, y);
    }
    // In place, per head: x [T, H, D], weight [D] (QK-norm).
    virtual void head_rms_norm(const Tensor& x, const Tensor& weight, float eps, NormKind kind) = 0;

    // y = x · Wᵀ (+ w.bias). x [T, K], w.data [N, K], y [T, N]. The weight's format picks the kernel; a format the
    // backend does not run stops the process with the format's name (the loader refuses such checkpoints first).
    virtual void linear(const Tensor& x, const LinearWeight& w, const Tensor& y) = 0;

    // In place NeoX (rotate-half) RoPE on the first rope.rotary_dim() dims of each head of x [T, H, D]; pairs
    // (j, j+rot/2), angle = positions[t] * rope.inv_freq[j] in fp32, cos and sin times rope.attention_factor. Dims
    // >= rotary_dim pass through.
    virtual void rope(const Tensor& x, std::span<const int32_t> positions, const RopeTable& rope) = 0;

    // The attention prologue on q [T, Hq, D] and k [T, Hk, D] in place: per-head RMSNorm with q_norm / k_norm (when
    // q_norm is defined: QK-norm models), then RoPE as rope() does. A device backend runs it as one kernel (four
    // small launches per layer otherwise, a visible share of a decode step); this default calls the four ops.
    virtual void qk_norm_rope(const Tensor& q, const Tensor& k, const Tensor& q_norm, const Tensor& k_norm, float eps,
                              NormKind kind, std::span<const int32_t> positions, const RopeTable& rope_table) {
        if (q_norm.defined()) {
            head_rms_norm(q, q_norm, eps, kind);
            head_rms_norm(k, k_norm, eps, kind);
        }
        rope(q, positions, rope_table);
        rope(k, positions, rope_table);
    }

    // Paged KV. Caches are [num_blocks, block_size, H_kv, D] (see cache_pools.h). k, v [T, H_kv, D] are stored at
    // batch.slot_mapping (negative slots skipped). An fp8 cache stores e4m3(x / scale) with the layer's scales; scales
    // still pending are first set from the amax of the rows stored (KvScales).
    virtual void write_kv(const Tensor& k, const Tensor& v, const ForwardBatch& batch, const KvCacheLayer& cache) = 0;

    // The whole attention prologue: qk_norm_rope on q and k (positions from the batch), then write_kv of the finished
    // k and of v. A device backend runs it as one kernel; this default calls the two ops.
    virtual void qk_norm_rope_write_kv(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                                       const Tensor& k_norm, float eps, NormKind kind, const ForwardBatch& batch,
                                       const RopeTable& rope_table, const KvCacheLayer& cache) {
        qk_norm_rope(q, k, q_norm, k_norm, eps, kind, batch.positions, rope_table);
        write_kv(k, v, batch, cache);
    }
    // Causal attention of the new tokens over each sequence's whole context (cached prefix + new tokens, read from
    // the caches through the block tables, so call write_kv first). q, out [T, H_q, D]; GQA: q head h uses kv head
    // h / (H_q / H_kv). scale is usually 1/sqrt(D). An fp8 cache's rows are read as stored · the layer's scale.
    virtual void paged_attention(const Tensor& q, const KvCacheLayer& cache, const ForwardBatch& batch, float scale,
                                 const Tensor& out) = 0;

    // out = silu(gate) * up; all [T, N] (gate/up usually the halves of one fused output).
    virtual void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;
    // The gated MLP's first half: [g | u] = x · wᵀ (w is gate and up stacked, [2I, K]) into gu [T, 2I], then
    // out [T, I] = silu(g) * u. A device backend may skip gu and compute out directly (CUDA does for one token, so a
    // batch-1 decode step has no silu_mul launch per layer); the result is the same to the bit.
    virtual void linear_silu_mul(const Tensor& x, const LinearWeight& w, const Tensor& gu, const Tensor& out) {
        const int64_t I = out.dim(1);
        linear(x, w, gu);
        silu_mul(gu.narrow(1, 0, I), gu.narrow(1, I, I), out);
    }
    // x *= sigmoid(gate) in place; gate [T, N] like x, or [T, 1] (one gate per row: the shared-expert gate); or x and
    // gate [T, H, D] of one shape (the per-head output gate of gated attention, interleaved with the queries).
    virtual void sigmoid_mul(const Tensor& x, const Tensor& gate) = 0;
    // y += x; [T, N].
    virtual void add(const Tensor& y, const Tensor& x) = 0;
    // dst = src, converting dtype (any float dtypes), same shape, any strides with a contiguous last dim.
    virtual void copy(const Tensor& dst, const Tensor& src) = 0;

    // MoE routing: p = softmax(router_logits [T, E]) in fp32; top-k (ties: lower expert id first);
    // if normalize: weights /= sum of the k. topk_weights [T, k] F32, topk_ids [T, k] I32, in descending order.
    virtual void moe_topk_softmax(const Tensor& router_logits, bool normalize, const Tensor& topk_weights,
                                  const Tensor& topk_ids) = 0;
    // out[t] = Σ_j topk_weights[t,j] · down_e(silu(gate_e x_t) ⊙ up_e x_t), e = topk_ids[t,j]. x, out [T, H].
    virtual void moe_experts(const Tensor& x, const Tensor& topk_weights, const Tensor& topk_ids,
                             const MoeExpertWeights& experts, const Tensor& out) = 0;

    // --- Gated DeltaNet -------------------------------------------------------------------------------------------
    // Causal depthwise conv over time then SiLU: out[t,c] = silu(Σ_i w[c,i] · x[t-K+1+i, c]), with history from
    // conv_state [num_slots, C, K-1] (oldest first) of each sequence's state slot (zero history for a sequence with
    // no cached context); the state is updated to the last K-1 INPUTS. x, out [T, C] (must not alias); weight [C, K]
    // (the checkpoint's [C, 1, K] reshaped).
    virtual void causal_conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& conv_state,
                                    const ForwardBatch& batch, const Tensor& out) = 0;
    // g = -exp(a_log) · softplus(a + dt_bias)  (softplus threshold 20), beta = sigmoid(b).
    // a, b [T, Hv]; a_log, dt_bias [Hv] (any float dtype); g, beta [T, Hv] F32.
    virtual void gdn_gating(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias,
                            const Tensor& g, const Tensor& beta) = 0;
    // In place x /= sqrt(Σ x² + eps) per head; x [T, H, D]. (HF: eps 1e-6.)
    virtual void l2_norm(const Tensor& x, float eps) = 0;
    // The gated delta rule with an fp32 state [num_slots, Hv, dk, dv] per sequence slot (zero initial state for a
    // sequence with no cached context). q, k [T, Hk, dk] (already L2-normalised; q is multiplied by q_scale,
    // usually 1/sqrt(dk)); v [T, Hv, dv]; g, beta [T, Hv]; out [T, Hv, dv]. Key head h serves value heads
    // h*r .. h*r+r-1, r = Hv/Hk (repeat_interleave). Per token: S = e^g S; S += k ⊗ β(v − Sᵀk); o = Sᵀ(q·q_scale).
    virtual void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                  const Tensor& beta, const Tensor& state, const ForwardBatch& batch, float q_scale,
                                  const Tensor& out, DeltaRuleMode mode = DeltaRuleMode::Auto) = 0;
    // A layer's recurrence after the conv, as one call: gdn_gating(a, b, a_log, dt_bias) into g and beta, l2_norm of
    // q and k (eps l2_eps), then gated_delta_rule. A device backend runs it as one kernel (the gates and norms
    // computed as the kernel loads its inputs; g, beta, q and k in memory are then left as they are); this default
    // calls the four ops.
    virtual void gated_delta_net(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b,
                                 const Tensor& a_log, const Tensor& dt_bias, const Tensor& g, const Tensor& beta,
                                 const Tensor& state, const ForwardBatch& batch, float q_scale, float l2_eps,
                                 const Tensor& out) {
        gdn_gating(a, b, a_log, dt_bias, g, beta);
        l2_norm(q, l2_eps);
        l2_norm(k, l2_eps);
        gated_delta_rule(q, k, v, g, beta, state, batch, q_scale, out);
    }
    // out = RMSNorm_plain(x) · w · silu(z), per head; x, z, out [T, H, D] (out may alias x); weight [D].
    virtual void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps,
                                const Tensor& out) = 0;

    // --- Logits ---------------------------------------------------------------------------------------------------
    // out[i, :] = x[rows[i], :]; x [T, N], out [R, N]. (Gather the logits rows, then linear() with lm_head.)
    virtual void gather_rows(const Tensor& x, std::span<const int32_t> rows, const Tensor& out) = 0;
    // out[i] = index of the max of logits[i, :] (first one on ties); logits [R, V].
    virtual void argmax(const Tensor& logits, std::span<int32_t> out) = 0;

    // --- Step graphs (CUDA graphs) --------------------------------------------------------------------------------
    // A backend that supports them records one forward pass and replays it later for new contents of the same batch
    // shape, with one launch instead of hundreds. Between begin_capture and end_capture the ops only record: nothing
    // runs, nothing is timed, and begin_step's upload of the batch arrays is recorded from its staging memory;
    // replay stages the new batch's arrays there and launches the recorded work. A graph points into the ops'
    // scratch memory, so it is valid only while memory_generation() (a count of scratch reallocations) is unchanged;
    // its owner checks that before each replay. Ops that would upload a host array of their own (one that is not
    // the batch's) cannot be recorded: end_capture returns null then.
    virtual bool supports_graphs() const { return false; }
    virtual void begin_capture() {}
    virtual std::unique_ptr<StepGraph> end_capture() { return nullptr; }
    virtual void replay(const StepGraph& graph, const ForwardBatch& batch) {}
    virtual uint64_t memory_generation() const { return 0; }
};

}  // namespace pagoda
