// CudaOps' Gated DeltaNet ops (the linear-attention layers of Qwen3-Next / Qwen3.5): the contract checks shared with
// the CPU (ops_checks.h), the batch's sequence arrays resolved to their device copies, and the kernels/cuda/delta_net
// launchers. A state slot outside the pool makes the kernels skip that sequence: a recorded decode step pads its
// batch with such sequences (decode_graphs.cpp).
#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "runtime/cuda/cuda_ops.h"

namespace pagoda {

kcu::DeltaNetSeqs CudaOps::delta_net_seqs(const ForwardBatch& batch) {
    const void* d[3] = {};
    resolve({{batch.query_start_loc.data(), batch.query_start_loc.size_bytes()},
             {batch.seq_lens.data(), batch.seq_lens.size_bytes()},
             {batch.state_slots.data(), batch.state_slots.size_bytes()}},
            d);
    return {batch.num_seqs, static_cast<const int32_t*>(d[0]), static_cast<const int32_t*>(d[1]),
            static_cast<const int32_t*>(d[2])};
}

void CudaOps::causal_conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& conv_state,
                                 const ForwardBatch& batch, const Tensor& out) {
    const auto profile = profiler_.scope("causal_conv1d_silu");
    const int64_t K = ops_checks::expect_conv1d(x, weight, conv_state, batch, out, kHere);
    expect(K >= 2 && K <= 8, "causal_conv1d_silu", "conv kernel size " + std::to_string(K) + " is not in 2..8");
    kcu::CausalConv1dArgs a;
    a.x = x.data_as<float>(), a.x_stride = x.stride(0), a.out = out.data_as<float>(), a.out_stride = out.stride(0);
    a.C = x.dim(1), a.K = static_cast<int>(K);
    a.weight = weight.data(), a.weight_type = elem_type(weight.dtype(), "causal_conv1d_silu");
    a.conv_state = conv_state.data_as<float>(), a.num_slots = conv_state.dim(0);
    a.seqs = delta_net_seqs(batch);
    a.num_tokens = batch.num_tokens;
    kcu::launch_causal_conv1d_silu(a, stream_);
    invalidate_converted();
}

void CudaOps::gdn_gating(const Tensor& a_in, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias,
                         const Tensor& g, const Tensor& beta) {
    const auto profile = profiler_.scope("gdn_gating");
    ops_checks::expect_gdn_gating(a_in, b, a_log, dt_bias, g, beta, kHere);
    kcu::GdnGatingArgs a;
    a.a = a_in.data_as<float>(), a.a_stride = a_in.stride(0), a.b = b.data_as<float>(), a.b_stride = b.stride(0);
    a.a_log = a_log.data(), a.a_log_type = elem_type(a_log.dtype(), "gdn_gating");
    a.dt_bias = dt_bias.data(), a.dt_bias_type = elem_type(dt_bias.dtype(), "gdn_gating");
    a.g = g.data_as<float>(), a.g_stride = g.stride(0), a.beta = beta.data_as<float>(), a.beta_stride = beta.stride(0);
    a.T = a_in.dim(0), a.H = a_in.dim(1);
    kcu::launch_gdn_gating(a, stream_);
    invalidate_converted();
}

void CudaOps::l2_norm(const Tensor& x, float eps) {
    const auto profile = profiler_.scope("l2_norm");
    ops_checks::expect_heads(x, kHere, "l2_norm", "x");
    kcu::launch_l2_norm({rows3(x), x.dim(0), x.dim(1), x.dim(2), eps}, stream_);
    invalidate_converted();
}

kcu::GatedDeltaRuleArgs CudaOps::delta_rule_args(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                                 const Tensor& beta, const Tensor& state, const ForwardBatch& batch,
                                                 float q_scale, const Tensor& out) {
    ops_checks::expect_delta_rule(q, k, v, g, beta, state, batch, out, kHere);
    expect(q.dim(2) <= kcu::kMaxDeltaRuleDk, "gated_delta_rule",
           "key head dim " + std::to_string(q.dim(2)) + " is above " + std::to_string(kcu::kMaxDeltaRuleDk));
    kcu::GatedDeltaRuleArgs a;
    a.q = rows3(q), a.k = rows3(k), a.v = rows3(v), a.out = rows3(out);
    a.g = g.data_as<float>(), a.g_stride = g.stride(0), a.beta = beta.data_as<float>(), a.beta_stride = beta.stride(0);
    a.Hk = static_cast<int>(q.dim(1)), a.Hv = static_cast<int>(v.dim(1));
    a.dk = static_cast<int>(q.dim(2)), a.dv = static_cast<int>(v.dim(2)), a.q_scale = q_scale;
    a.state = state.data_as<float>(), a.num_slots = state.dim(0);
    a.seqs = delta_net_seqs(batch);
    a.num_tokens = batch.num_tokens;
    return a;
}

// Auto: a sequence with at least this many new tokens runs chunked, a shorter one recurrent, both kinds in one step.
// The recurrent kernel walks a sequence's tokens one barrier each (about 0.35 us per token and layer at Qwen3.5-9B's
// shape: docs/benchmarks.md), the chunked path costs two launches and a whole 64-row chunk's products however few rows
// it holds, so a short sequence is cheaper token by token, and decode batches (one token each) never leave the
// recurrent decode kernel (a decode graph records only it). 32 is a first choice, not a measurement: on the H200
// (2026-12-04) the chunked kernels lost at every size pagoda_delta_net_bench times (see below).
constexpr int32_t kChunkedMinTokens = 32;

// Auto takes the chunked kernels only with PAGODA_DELTA_RULE_CHUNKED=1. They are correct on an H200 (the kernel test,
// the op harness and every golden pass with them; the engine's hit = miss and preemption tests miss their 0.02
// logprob bound by up to 0.025 on qwen3_5, TF32 rounding that differs with the chunk boundaries), but slower than the
// recurrent kernel: one 4,096-token sequence at Qwen3.5-9B's shape 2.52 ms against 1.90, 16 x 32 tokens 255 us
// against 169; only 8 x 512 is ahead (1.15 ms against 1.28); a whole 2,048-token Qwen3.5-9B prefill 92.8 ms against
// 86.3. They walk a sequence's chunks one after another with the whole chunk's work inside the walk; what would win
// is the intra-chunk work for every chunk at once and only the state pass in order. DeltaRuleMode::Chunked runs them
// whatever this says (the tests check them that way). PAGODA_DELTA_RULE_CHUNKED_MIN=N moves the crossing point (2 sends
// every prefill through them: the golden tests' prompts are shorter than 32 tokens).
int32_t auto_chunked_min_tokens() {
    static const int32_t min_tokens = [] {
        const char* env = std::getenv("PAGODA_DELTA_RULE_CHUNKED");
        if (env == nullptr || std::string_view(env) != "1") return 0;
        const char* min = std::getenv("PAGODA_DELTA_RULE_CHUNKED_MIN");
        return min != nullptr ? std::max(1, std::atoi(min)) : kChunkedMinTokens;
    }();
    return min_tokens;
}

void CudaOps::run_delta_rule(kcu::GatedDeltaRuleArgs a, const ForwardBatch& batch, DeltaRuleMode mode) {
    const bool chunked_ok = kcu::gated_delta_rule_chunked_supported(a.dk, a.dv);
    a.chunked_min_tokens = !chunked_ok || mode == DeltaRuleMode::Recurrent ? 0
                           : mode == DeltaRuleMode::Chunked                ? 1
                                                                           : auto_chunked_min_tokens();
    // Which kernels have sequences, from the host's copy of the batch (the kernels decide per sequence again).
    bool any_recurrent = a.chunked_min_tokens == 0, any_chunked = false;
    for (int32_t s = 0; s < batch.num_seqs && a.chunked_min_tokens > 0; ++s) {
        const int32_t len = batch.query_start_loc[s + 1] - batch.query_start_loc[s];
        (len >= a.chunked_min_tokens ? any_chunked : any_recurrent) = true;
    }
    if (any_recurrent) kcu::launch_gated_delta_rule(a, stream_);
    if (any_chunked) {
        void* workspace = delta_rule_workspace_.get(
            kcu::gated_delta_rule_chunked_workspace_bytes(a.num_tokens, a.Hv, a.dk, a.dv), stream_);
        kcu::launch_gated_delta_rule_chunked(a, workspace, stream_);
    }
}

// Recurrent: the recurrent kernels only (the reference the tests hold the chunked kernels to); Auto and Chunked as
// run_delta_rule says. The CPU's modes differ only in fp32 rounding; on the GPU the chunked kernels round their
// products' operands to TF32 (delta_rule_chunked.cu).
void CudaOps::gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                               const Tensor& state, const ForwardBatch& batch, float q_scale, const Tensor& out,
                               DeltaRuleMode mode) {
    const auto profile = profiler_.scope("gated_delta_rule");
    run_delta_rule(delta_rule_args(q, k, v, g, beta, state, batch, q_scale, out), batch, mode);
    invalidate_converted();
}

// No separate gating or norm launches: the kernels L2-normalise q and k and compute g and beta from the gating inputs
// as they load them (one recurrent launch, or the chunked pair, or both).
void CudaOps::gated_delta_net(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a_in, const Tensor& b,
                              const Tensor& a_log, const Tensor& dt_bias, const Tensor& g, const Tensor& beta,
                              const Tensor& state, const ForwardBatch& batch, float q_scale, float l2_eps,
                              const Tensor& out) {
    const auto profile = profiler_.scope("gated_delta_net (fused)");
    ops_checks::expect_gdn_gating(a_in, b, a_log, dt_bias, g, beta, kHere);
    kcu::GatedDeltaRuleArgs a = delta_rule_args(q, k, v, g, beta, state, batch, q_scale, out);
    a.l2_norm_qk = true, a.l2_eps = l2_eps;
    a.gate_a = a_in.data_as<float>(), a.gate_a_stride = a_in.stride(0);
    a.gate_b = b.data_as<float>(), a.gate_b_stride = b.stride(0);
    a.a_log = a_log.data(), a.a_log_type = elem_type(a_log.dtype(), "gated_delta_net");
    a.dt_bias = dt_bias.data(), a.dt_bias_type = elem_type(dt_bias.dtype(), "gated_delta_net");
    run_delta_rule(a, batch, DeltaRuleMode::Auto);
    invalidate_converted();
}

void CudaOps::gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, const Tensor& out) {
    const auto profile = profiler_.scope("gated_rms_norm");
    ops_checks::expect_gated_rms_norm(x, z, weight, out, kHere);
    kcu::GatedRmsNormArgs a;
    a.x = rows3(x), a.z = rows3(z), a.out = rows3(out);
    a.T = x.dim(0), a.H = x.dim(1), a.D = x.dim(2);
    a.weight = weight.data(), a.weight_type = elem_type(weight.dtype(), "gated_rms_norm"), a.eps = eps;
    // The output projection reads out as [T, H · D]: hand it over in bf16 when out is contiguous (as the linear-
    // attention block's output is) over more tokens than the GEMV takes (elementwise.cpp's silu_mul says how).
    const bool handoff = out.is_contiguous() && bf16_handoff() && a.T > kcu::kGemvTokens;
    a.out_bf16 = hand_off_bf16(handoff ? out.reshape(Shape{a.T, a.H * a.D}) : Tensor(), handoff);
    kcu::launch_gated_rms_norm(a, stream_);
}

}  // namespace pagoda
