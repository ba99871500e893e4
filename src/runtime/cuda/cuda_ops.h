// CudaOps, the CUDA implementation of Ops, as one class whose members are defined by op family: the step's host
// arrays, graphs and the class's plumbing (cuda_ops.cpp), linear (linear.cpp), attention and RoPE (attention.cpp),
// norms (norm.cpp), element-wise ops, embedding and logits (elementwise.cpp), MoE (moe.cpp), Gated DeltaNet
// (delta_net.cpp). Private to runtime/cuda/.
//
// CudaOps checks the Tensor views (device, dtype, shape), resolves the batch's host arrays to their device copies,
// and calls the kernels/cuda launchers or cuBLASLt. Activations are F32 on the GPU, as on the CPU: the model code
// is the same for both, the residual stream keeps fp32 precision, and the extra bytes are small next to the weights
// (decode) or the GEMMs (prefill). GEMM inputs are rounded to the weights' 16-bit type right before cuBLASLt.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "common/align.h"
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/cuda/gemm.h"
#include "runtime/cuda/internal.h"
#include "runtime/cuda/op_profiler.h"
#include "runtime/forward_batch.h"
#include "runtime/lora.h"
#include "runtime/ops_checks.h"

namespace pagoda {

namespace kcu = kernels::cuda;

// The shared contract checks (ops_checks.h), for CUDA tensors. (A short macro name, in a header that only the
// runtime/cuda/ op files include.)
#define expect(cond, op, what) PAGODA_OP_EXPECT(cond, op, what)
inline constexpr DeviceKind kHere = DeviceKind::Cuda;

inline bool on_gpu(const Tensor& t) {
    return t.defined() && t.device().kind == DeviceKind::Cuda;
}

inline kcu::ElemType elem_type(DType d, const char* op) {
    switch (d) {
        case DType::F32:
            return kcu::ElemType::F32;
        case DType::BF16:
            return kcu::ElemType::BF16;
        case DType::F16:
            return kcu::ElemType::F16;
        default:
            ops_checks::fail(op, "only F32, BF16 and F16 tensors on CUDA, got " + std::string(dtype_name(d)));
    }
}

// What an int4 weight's dequantised values are rounded to, as the format's own dequantisation rounds them.
inline kcu::ElemType int4_round_to(const LinearWeight& w, const char* op) {
    return w.dequant_dtype == DType::F32 ? kcu::ElemType::F32 : elem_type(w.dequant_dtype, op);
}

// An int4 (or int8) weight as the kernels read it (kcu::Int4Weight): packed rows `row_bytes` apart (a stack of experts
// is one [E*N, K] matrix).
inline kcu::Int4Weight int4_weight(const LinearWeight& w, int64_t row_bytes, const char* op) {
    return {w.data.data(),
            row_bytes,
            w.scales.data_as<float>(),
            w.zeros.defined() ? w.zeros.data_as<float>() : nullptr,
            w.group_size,
            int4_round_to(w, op),
            grouped_int_bits(w.format)};
}

inline kcu::Rows rows2(const Tensor& t) {
    return {t.data_as<float>(), t.stride(0), 0};
}
inline kcu::Rows rows3(const Tensor& t) {
    return {t.data_as<float>(), t.stride(0), t.stride(1)};
}

struct CudaStepGraph final : StepGraph {
    CudaStepGraph(cudaGraphExec_t e, size_t staged) : exec(e), staged_bytes(staged) {}
    ~CudaStepGraph() override { cudaGraphExecDestroy(exec); }
    CudaStepGraph(const CudaStepGraph&) = delete;
    CudaStepGraph& operator=(const CudaStepGraph&) = delete;
    cudaGraphExec_t exec;
    size_t staged_bytes;  // the recorded step's batch arrays: a replay must stage the same layout
};

class CudaOps final : public CudaOpsBase {
  public:
    explicit CudaOps(const CudaOpsConfig& c);
    ~CudaOps() override;

    // --- the step's host arrays ----------------------------------------------------------------------------------
    void invalidate_caches() override { invalidate_converted(); }

    void begin_step(const ForwardBatch& b) override;
    void end_step() override;

    // --- CUDA graphs -----------------------------------------------------------------------------------------------
    bool supports_graphs() const override { return true; }

    void begin_capture() override;

    std::unique_ptr<StepGraph> end_capture() override;

    void replay(const StepGraph& graph, const ForwardBatch& b) override;

    uint64_t memory_generation() const override;

    // --- ops -----------------------------------------------------------------------------------------------------
    void embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) override;

    void rms_norm(const Tensor& x, const Tensor& weight, float eps, NormKind kind, const Tensor& out) override;

    void add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& weight, float eps, NormKind kind,
                      const Tensor& out) override;

    void head_rms_norm(const Tensor& x, const Tensor& weight, float eps, NormKind kind) override;

    void linear(const Tensor& x, const LinearWeight& w, const Tensor& y) override;
    void linear_silu_mul(const Tensor& x, const LinearWeight& w, const Tensor& gu, const Tensor& out) override;
    void linear_gated_add(const Tensor& x, const LinearWeight& w, const Tensor& y, const Tensor& gate,
                          const Tensor& out) override;

    void rope(const Tensor& x, std::span<const int32_t> positions, const RopeTable& table) override;

    void qk_norm_rope(const Tensor& q, const Tensor& k, const Tensor& q_norm, const Tensor& k_norm, float eps,
                      NormKind kind, std::span<const int32_t> positions, const RopeTable& table) override;

    void qk_norm_rope_write_kv(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                               const Tensor& k_norm, float eps, NormKind kind, const ForwardBatch& batch,
                               const RopeTable& table, const KvCacheLayer& cache) override;

    void write_kv(const Tensor& k, const Tensor& v, const ForwardBatch& batch, const KvCacheLayer& cache) override;

    void paged_attention(const Tensor& q, const KvCacheLayer& cache, const ForwardBatch& batch, float scale,
                         const Tensor& out) override;

    void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override;
    void sigmoid_mul(const Tensor& x, const Tensor& gate) override;
    void add(const Tensor& y, const Tensor& x) override { binary("add", kcu::BinaryOp::Add, y, x, y); }

    void copy(const Tensor& dst, const Tensor& src) override;

    void gather_rows(const Tensor& x, std::span<const int32_t> rows, const Tensor& out) override;

    void argmax(const Tensor& logits, std::span<int32_t> out) override;

    // --- Gated DeltaNet (delta_net.cpp) ----------------------------------------------------------------------------
    void causal_conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& conv_state, const ForwardBatch& batch,
                            const Tensor& out) override;
    void gdn_gating(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, const Tensor& g,
                    const Tensor& beta) override;
    void l2_norm(const Tensor& x, float eps) override;
    void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                          const Tensor& state, const ForwardBatch& batch, float q_scale, const Tensor& out,
                          DeltaRuleMode mode) override;
    void gated_delta_net(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b,
                         const Tensor& a_log, const Tensor& dt_bias, const Tensor& g, const Tensor& beta,
                         const Tensor& state, const ForwardBatch& batch, float q_scale, float l2_eps,
                         const Tensor& out) override;
    void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, const Tensor& out) override;

    // --- MoE (moe.cpp) --------------------------------------------------------------------------------------------
    void moe_topk_softmax(const Tensor& router_logits, bool normalize, const Tensor& topk_weights,
                          const Tensor& topk_ids) override;
    void moe_experts(const Tensor& x, const Tensor& topk_weights, const Tensor& topk_ids,
                     const MoeExpertWeights& experts, const Tensor& out) override;

  private:
    struct StepArray {
        const void* host;
        size_t bytes;
        void* device;
    };
    struct HostArray {
        const void* data;
        size_t bytes;
    };

    // Copies the batch's host arrays into the pinned staging memory, one after another at 256-byte offsets (the same
    // offsets for every batch of the same shape: a recorded upload finds a replayed batch's arrays where it expects
    // them), and remembers where each will be on the device; with the arrays, the batch's LoRA token order and
    // tiles (group_lora_tokens). Returns the bytes to upload.
    size_t stage(const ForwardBatch& b);

    // The checked arguments of the attention prologue kernel (q/k norm and RoPE; the caller adds the cache store).
    // `d_positions`: the device copy of `positions` (resolve()).
    kcu::QkNormRopeArgs prologue_args(const Tensor& q, const Tensor& k, const Tensor& q_norm, const Tensor& k_norm,
                                      float eps, NormKind kind, std::span<const int32_t> positions,
                                      const void* d_positions, const RopeTable& table);

    // Where write_kv stores k and v: the checked caches, and the batch's slots on the device (`d_slots`, resolve()),
    // with an fp8 cache's 1 / scale (pending scales are settled first from the stored rows' amax: settle_scales).
    struct KvTarget {
        const int64_t* slots;
        kcu::ElemType type;
        int64_t num_slots;
        float k_inv_scale = 1.0f, v_inv_scale = 1.0f;
        const float* k_heads = nullptr;  // per-head scales (KvScales::k_heads)
        const float* v_heads = nullptr;
    };
    KvTarget kv_target(const Tensor& k, const Tensor& v, const ForwardBatch& batch, const KvCacheLayer& cache,
                       const void* d_slots, const char* op);
    // --calculate-kv-scales on the first write that stores tokens: the amax kernel, then a wait for its two floats
    // (once per layer in a server's life, on an eager prefill step).
    void settle_scales(const Tensor& k, const Tensor& v, const int64_t* d_slots, KvScales& scales);

    static void check_tables(const ForwardBatch& batch, int64_t num_blocks);

    // True when `array` (of the current step's batch) was already checked against a cache of `size` this step;
    // otherwise remembers it. Arrays from outside a step are always checked.
    bool already_checked(const void* array, int64_t size);

    // The batch's sequence arrays for the delta-net kernels, on the device (resolve()).
    kcu::DeltaNetSeqs delta_net_seqs(const ForwardBatch& batch);
    // The checked arguments of the delta-rule kernel (the caller adds a fused variant's inputs).
    kcu::GatedDeltaRuleArgs delta_rule_args(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                            const Tensor& beta, const Tensor& state, const ForwardBatch& batch,
                                            float q_scale, const Tensor& out);
    // Runs the delta rule of `a` in `mode`: the recurrent kernel, the chunked one, or both, each for its sequences.
    void run_delta_rule(kcu::GatedDeltaRuleArgs a, const ForwardBatch& batch, DeltaRuleMode mode);

    // Device copies of host arrays: those of the current step come from its upload; any other array is copied now
    // into per-op scratch (stream order keeps the previous op's reads before this copy).
    void resolve(std::initializer_list<HostArray> arrays, const void** out);
    const void* find_step(const HostArray& a) const;

    void norm_impl(const char* op, const Tensor& residual, const Tensor& x, const Tensor& weight, float eps,
                   NormKind kind, const Tensor& out);

    void binary(const char* op, kcu::BinaryOp kind, const Tensor& a_in, const Tensor& b, const Tensor& out,
                bool handoff = false);
    static bool bf16_handoff();

    void check_cache(const KvCacheLayer& cache, int64_t H_kv, int64_t D, const ForwardBatch& batch, const char* op);

    // Multi-LoRA (lora.cpp): the step's tokens grouped by adapter slot and cut into tiles (by stage(), which uploads
    // them with the batch), and y += each token's adapter delta around a projection that has adapters: the shrink
    // (u = x · Aᵀ, which reads only x) is launched before the projection, on lora_stream_ when overlapping so that it
    // runs beside it, and the expand (y += u · Bᵀ) after both. lora_args: false when no adapter can target the
    // projection (nothing to launch).
    void group_lora_tokens(const ForwardBatch& b);
    bool lora_args(const Tensor& x, const LoraAdapterSet& set, const Tensor& y, kcu::LoraArgs& a);
    void begin_lora(const kcu::LoraArgs& a);
    void finish_lora(const kcu::LoraArgs& a);

    // linear() of a BF16/F16/F32 weight (the checks shared with other formats done).
    void linear_dense(const Tensor& x, const LinearWeight& w, const Tensor& y);
    // linear() of a weight-only fp8 weight: the GEMV for one token, the weight-only tensor-core GEMM for a few
    // (gemm_weight_only), else the weight dequantised to bf16 scratch and the bf16 cuBLASLt GEMM.
    void linear_fp8(const Tensor& x, const LinearWeight& w, const Tensor& y);
    // linear() of an int4 weight: the int4 GEMV for one token, else as linear_fp8.
    void linear_int4(const Tensor& x, const LinearWeight& w, const Tensor& y);
    // linear_silu_mul() of one token and an int4 weight: the tensor-core GEMV with SiLU·mul in its store where
    // linear() would take that GEMV, else linear then silu_mul.
    void linear_int4_silu_mul(const Tensor& x, const LinearWeight& w, const Tensor& gu, const Tensor& out);
    // linear_silu_mul's check of out: F32 [T, I] for a gate/up weight of 2I rows.
    static void expect_silu_mul_out(const LinearWeight& w, const Tensor& out, int64_t T);
    // y = x · wᵀ (+ w's bias) by the weight-only tensor-core GEMM (kernels/cuda/gemm/wo_mma.h) when x has at most
    // wo_mma_max_tokens() rows and the kernel takes the weight: `a` holds the weight's fields; false, and nothing
    // done, otherwise.
    bool gemm_weight_only(const Tensor& x, kcu::WoMmaArgs a, const LinearWeight& w, const Tensor& y);
    // W8A8 (an fp8 weight with input_quant_group): x quantized to e4m3 with its scales and cuBLASLt's fp8 GEMM, on
    // Hopper where the weight's scales are ones cuBLASLt applies (128x128 blocks with groups of 128 inputs, or per
    // channel with per-token inputs); false where it does not apply (the caller rounds x and runs the weight-only
    // paths on it, which also round the rounded x and the weight to bf16 as for weight-only fp8).
    bool gemm_w8a8(const Tensor& x, const LinearWeight& w, const Tensor& y);
    // x rounded to fp8 as w.input_quant_group says, as an f32 [T, K] tensor in scratch.
    Tensor fp8_rounded_input(const Tensor& x, const LinearWeight& w);
    // The GEMM both take for more tokens: the input converted to bf16, cuBLASLt over `dense` (w's bf16 copy), w's bias.
    void gemm_bf16_copy(const Tensor& x, const void* dense, const LinearWeight& w, const Tensor& y);
    // The GEMV of one token of x through w (dense or weight-only fp8) into y.
    kcu::GemvArgs gemv_args(const Tensor& x, const LinearWeight& w, const Tensor& y);
    // An fp8 or int4 expert stack [E, N, K] dequantised to a bf16 one at `dst` (device scratch of E*N*K*2 bytes; a
    // dense stack is returned as it is).
    LinearWeight dequantized_experts(const LinearWeight& w, void* dst);
    // moe_experts' arguments but the weight type and scales, the shapes checked and the workspace taken.
    kcu::MoeExpertsArgs moe_args(const Tensor& x, const Tensor& topk_weights, const Tensor& topk_ids,
                                 const LinearWeight& gu, const LinearWeight& dn, const Tensor& out);

    // --- GEMM input conversion, reused by consecutive linears of the same input (q/k/v, gate/up) -------------
    // Valid only while nothing but linear() has run since the conversion, and no linear wrote over its source.
    struct Converted {
        const void* data = nullptr;
        int64_t rows = 0, cols = 0, stride = 0;
        kcu::ElemType type = kcu::ElemType::F32;
    };
    const void* converted_input(const Tensor& x, kcu::ElemType type);
    void invalidate_converted() { converted_src_ = Converted{}; }
    // For an op about to write out ([T, N] fp32): when handoff, the conversion cache made ready for it to fill with
    // out rounded to bf16, as converted_input(out, BF16) would (the buffer to pass the kernel); else null. Either
    // way the cache no longer holds what it held.
    void* hand_off_bf16(const Tensor& out, bool handoff);
    // The conversion buffer for x's rows in `type`, recorded as holding them (whoever fills it does so next).
    void* claim_conversion(const Tensor& x, kcu::ElemType type);
    static bool overlaps(const Tensor& y, const Converted& c);

    int device_;
    int sm_count_;
    cudaStream_t stream_;
    CudaGemm gemm_;

    std::vector<StepArray> step_;
    std::vector<std::pair<const void*, int64_t>> checked_;
    PinnedScratch step_staging_;
    DeviceScratch step_device_;
    cudaEvent_t staging_free_ = nullptr;
    DeviceScratch op_uploads_;

    DeviceScratch convert_scratch_;
    void* converted_buffer_ = nullptr;
    Converted converted_src_;
    DeviceScratch dequantized_weight_;  // linear_fp8/int4 with more than one token: the bf16 copy of the weight;
                                        // the W8A8 GEMM's output for a token count padded to a multiple of 4
    DeviceScratch gathered_input_;      // linear_int4 of an act-order weight: x's columns in the layout's order;
                                        // linear_fp8 with fp8 activations: x rounded to fp8, or its e4m3 bytes and
                                        // scales for the W8A8 GEMM
    bool w8a8_gemm_ = false;            // cuBLASLt's block-scaled fp8 GEMM is there (Hopper), and not turned off
    // (scaling, N, K, power-of-two bucket of tokens) cuBLASLt had no algorithm for
    std::set<std::tuple<int, int64_t, int64_t, int64_t>> w8a8_refused_;

    DeviceScratch attention_workspace_;
    DeviceScratch moe_workspace_;         // moe_experts: x in 16-bit, the routing, and the per-(token, slot) rows
    DeviceScratch delta_rule_workspace_;  // the chunked delta rule's W, U, attention rows per (token, value head)
    DeviceScratch argmax_device_;
    PinnedScratch argmax_host_;

    std::span<const int32_t> lora_slots_;  // the step's (empty: no adapters)
    LoraTokenGroups lora_groups_;          // its order and tiles are staged with the step's arrays
    DeviceScratch lora_shrunk_;            // the shrink's [K ranges, tokens, parts, rank] output
    // The LoRA kernels on tensor cores (kernels/cuda/lora/lora_mma.cu; x and u rounded to bf16) unless
    // PAGODA_LORA_MMA=0 when the ops were made. One choice for the ops' life, so a token's delta never depends on when
    // it ran. On an H100 (session 26, Qwen3-8B shape, rank 16 on every projection, 8 adapters): 64 streams
    // lose 12.3-15.9% of the throughput without LoRA (three runs) against 20.3% on the CUDA-core kernels, which stay
    // faster for one stream (129.5 tok/s against 116.2; 145.5 without an adapter): the op bench has them ahead up to 8
    // tokens a step and behind from 64 (2,048 tokens: 224 µs against 263 on the q/k/v projection).
    bool lora_tensor_cores_ = true;
    // The shrink beside the base projection (PAGODA_LORA_OVERLAP=0: on stream_ before it), on a stream of the
    // greatest priority so that its few blocks are not queued behind the projection's; forked from stream_ and joined
    // back by the two events (recorded into a CUDA graph as a fork and a join).
    bool lora_overlap_ = true;
    cudaStream_t lora_stream_ = nullptr;
    cudaEvent_t lora_fork_ = nullptr, lora_join_ = nullptr;

    // Unless PAGODA_EARLY_LOADS=0 when the ops were made: the RMSNorm, attention-prologue and decode-attention kernels
    // load what the kernel before them does not write (weights, positions, block tables, older keys), and the MoE pair
    // passes' down pass asks L2 for its experts' rows, before their programmatic-launch wait
    // (kernels/cuda/common.cuh). On by default since session 33: a replayed MoE step 1.5-2.3% faster on an H100.
    bool early_loads_ = true;
    // On unless PAGODA_SHARED_EXPERT_ADD=0: a one-token step's shared-expert down projection adds sigmoid(gate) times
    // its rows into the mixture's output in its GEMV (linear_gated_add): two launches fewer a layer, +2% tok/s on a
    // 12-layer Qwen3.5-35B-A3B shape on an H100 (session 34, docs/benchmarks.md).
    bool shared_expert_add_ = true;
    // On unless PAGODA_INT4_SILU_MUL=0: one token's int4 gate/up with SiLU·mul in the GEMV (linear_int4_silu_mul).
    bool fused_int4_silu_mul_ = true;

    CudaOpProfiler profiler_;
    bool capturing_ = false;
    bool capture_failed_ = false;
    size_t captured_bytes_ = 0;  // staged by the step being recorded
};

}  // namespace pagoda
