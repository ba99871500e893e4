// CpuOps: checks shapes and dtypes of the Tensor views, then calls the kernels/cpu launchers.
#include "runtime/cpu_ops.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/forward_batch.h"
#include "runtime/lora.h"
#include "runtime/ops_checks.h"

namespace pagoda {

namespace kc = kernels::cpu;

namespace {

// The shared contract checks (ops_checks.h), for host tensors.
#define expect(cond, op, what) PAGODA_OP_EXPECT(cond, op, what)
constexpr DeviceKind kHere = DeviceKind::Host;
static_assert(kc::kLoraMaxRank == kMaxLoraRank, "the CPU LoRA kernel holds ranks up to --max-lora-rank's limit");

kc::RowsF32 rows2(const Tensor& t) {
    return {t.data_as<float>(), t.stride(0), 0};
}
kc::RowsF32 rows3(const Tensor& t) {
    return {t.data_as<float>(), t.stride(0), t.stride(1)};
}

kc::SeqInfo seq_info(const ForwardBatch& b) {
    ops_checks::expect_seqs(b, "forward batch");
    return {b.num_seqs, b.query_start_loc.data(), b.seq_lens.data(), b.state_slots.data()};
}

class CpuOps final : public Ops {
  public:
    // The step's adapter slots, grouped once for every projection of the step (runtime/lora.h).
    void begin_step(const ForwardBatch& batch) override {
        lora_slots_ = batch.lora_slots;
        if (!lora_slots_.empty()) lora_groups_.build(lora_slots_, max_slot(lora_slots_) + 1);
    }
    void end_step() override { lora_slots_ = {}; }

    void embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) override {
        ops_checks::expect_mat(out, kHere, "embedding", "out");
        expect(table.rank() == 2 && table.stride(1) == 1 && dtype_is_float(table.dtype()), "embedding",
               "table must be a float [V, H] tensor, got " + table.to_string());
        expect(out.dim(0) == static_cast<int64_t>(ids.size()) && out.dim(1) == table.dim(1), "embedding",
               "out " + out.to_string() + " does not match ids/table");
        kc::launch_embedding({table.data(), table.dtype(), table.stride(0), table.dim(0), table.dim(1), ids.data(),
                              static_cast<int64_t>(ids.size()), out.data_as<float>(), out.stride(0)});
    }

    void rms_norm(const Tensor& x, const Tensor& weight, float eps, NormKind kind, const Tensor& out) override {
        norm_impl("rms_norm", Tensor(), x, weight, eps, kind, out);
    }

    void add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& weight, float eps, NormKind kind,
                      const Tensor& out) override {
        ops_checks::expect_mat(residual, kHere, "add_rms_norm", "residual");
        expect(residual.shape() == x.shape(), "add_rms_norm", "residual and x shapes differ");
        norm_impl("add_rms_norm", residual, x, weight, eps, kind, out);
    }

    void head_rms_norm(const Tensor& x, const Tensor& weight, float eps, NormKind kind) override {
        ops_checks::expect_heads(x, kHere, "head_rms_norm", "x");
        ops_checks::expect_vec(weight, x.dim(2), kHere, "head_rms_norm", "weight");
        kc::RmsNormArgs a;
        a.x = a.out = rows3(x);
        a.T = x.dim(0), a.H = x.dim(1), a.D = x.dim(2);
        a.weight = weight.data(), a.weight_dtype = weight.dtype(), a.eps = eps;
        a.zero_centred = kind == NormKind::ZeroCentred;
        kc::launch_rms_norm(a);
    }

    void linear(const Tensor& x, const LinearWeight& w, const Tensor& y) override {
        ops_checks::expect_linear(x, w, y, kHere, "linear");
        if (w.format == WeightFormat::kFp8E4M3) {
            linear_fp8(x, w, y);
        } else if (w.is_grouped_int()) {  // int4, int8
            linear_int4(x, w, y);
        } else {
            linear_dense(x, w, y);
        }
        if (w.lora != nullptr && !lora_slots_.empty()) add_lora(x, *w.lora, y);
    }

    void linear_dense(const Tensor& x, const LinearWeight& w, const Tensor& y) {
        if (!w.is_dense()) ops_checks::unsupported_format(w, "CPU", "linear");
        expect_dense(w, "linear");
        kc::LinearArgs a;
        a.x = x.data_as<float>(), a.x_stride = x.stride(0);
        a.w = w.data.data(), a.w_dtype = w.data.dtype(), a.w_stride = w.data.stride(0);
        a.bias = w.bias.defined() ? w.bias.data() : nullptr, a.bias_dtype = w.bias.dtype();
        a.y = y.data_as<float>(), a.y_stride = y.stride(0);
        a.T = x.dim(0), a.N = w.out_features(), a.K = w.in_features();
        kc::launch_linear(a);
    }

    void rope(const Tensor& x, std::span<const int32_t> positions, const RopeTable& table) override {
        ops_checks::expect_heads(x, kHere, "rope", "x");
        expect(static_cast<int64_t>(positions.size()) == x.dim(0), "rope", "one position per row of x");
        const int rotary_dim = table.rotary_dim();
        expect(rotary_dim > 0 && rotary_dim <= x.dim(2), "rope", "bad rotary_dim " + std::to_string(rotary_dim));
        kc::launch_rope({rows3(x), x.dim(0), x.dim(1), x.dim(2), positions.data(), rotary_dim, table.inv_freq.data(),
                         table.attention_factor});
    }

    void write_kv(const Tensor& k, const Tensor& v, const ForwardBatch& batch, const KvCacheLayer& cache) override {
        ops_checks::expect_heads(k, kHere, "write_kv", "k");
        ops_checks::expect_heads(v, kHere, "write_kv", "v");
        check_cache(cache, k.dim(1), k.dim(2), batch, "write_kv");
        expect(k.shape() == v.shape() && k.dim(0) == batch.num_tokens &&
                   static_cast<int64_t>(batch.slot_mapping.size()) == k.dim(0),
               "write_kv", "k/v/slot_mapping do not match the batch's tokens");
        kc::PagedKvWriteArgs a;
        a.k = k.data_as<float>(), a.v = v.data_as<float>();
        a.k_stride_t = k.stride(0), a.k_stride_h = k.stride(1), a.v_stride_t = v.stride(0), a.v_stride_h = v.stride(1);
        a.T = k.dim(0), a.H_kv = k.dim(1), a.D = k.dim(2);
        a.slot_mapping = batch.slot_mapping.data();
        a.key_cache = cache.key.data(), a.value_cache = cache.value.data();
        a.num_slots = cache.key.dim(0) * cache.key.dim(1);
        if (cache.scales) {
            KvScales& s = *cache.scales;
            if (settles_kv_scales(&s, batch.slot_mapping)) {
                const kc::KvAmax m = kc::paged_kv_amax(a);
                settle_kv_scales(s, m.k, m.v);
            }
            a.fp8 = true, a.k_inv_scale = 1.0f / s.k, a.v_inv_scale = 1.0f / s.v;
            a.k_head_scales = s.k_heads, a.v_head_scales = s.v_heads;
        }
        kc::launch_paged_kv_write(a);
    }

    void paged_attention(const Tensor& q, const KvCacheLayer& cache, const ForwardBatch& batch, float scale,
                         const Tensor& out) override {
        ops_checks::expect_heads(q, kHere, "paged_attention", "q");
        ops_checks::expect_heads(out, kHere, "paged_attention", "out");
        expect(q.shape() == out.shape() && q.dim(0) == batch.num_tokens, "paged_attention",
               "q/out shapes do not match the batch");
        const Tensor& key_cache = cache.key;
        check_cache(cache, key_cache.dim(2), q.dim(2), batch, "paged_attention");
        expect(q.dim(1) % key_cache.dim(2) == 0, "paged_attention", "query heads not a multiple of kv heads");
        expect(static_cast<int64_t>(batch.block_tables.size()) >=
                   static_cast<int64_t>(batch.num_seqs) * batch.max_blocks_per_seq,
               "paged_attention", "block_tables shorter than num_seqs * max_blocks_per_seq");
        seq_info(batch);
        kc::PagedAttentionArgs a;
        a.q = rows3(q), a.out = rows3(out);
        a.H_q = q.dim(1), a.H_kv = key_cache.dim(2), a.D = q.dim(2);
        a.key_cache = key_cache.data(), a.value_cache = cache.value.data();
        if (cache.scales) {
            a.fp8 = true, a.k_scale = cache.scales->k, a.v_scale = cache.scales->v;
            a.k_head_scales = cache.scales->k_heads, a.v_head_scales = cache.scales->v_heads;
        }
        a.block_size = batch.block_size, a.num_blocks = key_cache.dim(0);
        a.num_seqs = batch.num_seqs, a.query_start_loc = batch.query_start_loc.data();
        a.seq_lens = batch.seq_lens.data(), a.block_tables = batch.block_tables.data();
        a.max_blocks_per_seq = batch.max_blocks_per_seq, a.scale = scale;
        kc::launch_paged_attention(a);
    }

    void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
        binary("silu_mul", kc::ElementwiseOp::SiluMul, gate, up, out);
    }
    void sigmoid_mul(const Tensor& x, const Tensor& gate) override {
        binary("sigmoid_mul", kc::ElementwiseOp::SigmoidMul, x, gate, x);
    }
    void add(const Tensor& y, const Tensor& x) override { binary("add", kc::ElementwiseOp::Add, y, x, y); }

    void copy(const Tensor& dst, const Tensor& src) override {
        expect(dst.shape() == src.shape(), "copy", "shapes differ: " + dst.to_string() + " vs " + src.to_string());
        expect(dst.is_host() && src.is_host(), "copy", "host tensors only on the CPU backend");
        expect(dst.rank() >= 1 && dst.rank() <= 2 && dst.stride(-1) == 1 && src.stride(-1) == 1, "copy",
               "rank 1 or 2 with a contiguous last dim");
        const bool two = dst.rank() == 2;
        kc::CopyArgs a;
        a.src = src.data(), a.src_dtype = src.dtype(), a.src_stride = two ? src.stride(0) : 0;
        a.dst = dst.data(), a.dst_dtype = dst.dtype(), a.dst_stride = two ? dst.stride(0) : 0;
        a.T = two ? dst.dim(0) : 1, a.N = dst.dim(-1);
        kc::launch_copy(a);
    }

    void moe_topk_softmax(const Tensor& router_logits, bool normalize, const Tensor& topk_weights,
                          const Tensor& topk_ids) override {
        ops_checks::expect_mat(router_logits, kHere, "moe_topk_softmax", "router_logits");
        expect(topk_weights.dtype() == DType::F32 && topk_weights.is_contiguous() && topk_weights.rank() == 2 &&
                   topk_ids.dtype() == DType::I32 && topk_ids.is_contiguous() &&
                   topk_ids.shape() == topk_weights.shape() && topk_weights.dim(0) == router_logits.dim(0),
               "moe_topk_softmax", "topk_weights F32 [T, k] and topk_ids I32 [T, k], contiguous");
        kc::launch_topk_softmax({router_logits.data_as<float>(), router_logits.stride(0), router_logits.dim(0),
                                 router_logits.dim(1), topk_weights.dim(1), normalize, topk_weights.data_as<float>(),
                                 topk_ids.data_as<int32_t>()});
    }

    void moe_experts(const Tensor& x, const Tensor& topk_weights, const Tensor& topk_ids,
                     const MoeExpertWeights& experts, const Tensor& out) override {
        ops_checks::expect_mat(x, kHere, "moe_experts", "x");
        ops_checks::expect_mat(out, kHere, "moe_experts", "out");
        expect(x.shape() == out.shape(), "moe_experts", "x and out shapes differ");
        const LinearWeight& gu = experts.gate_up;
        const LinearWeight& dn = experts.down;
        for (const LinearWeight* w : {&gu, &dn}) {
            if (w->format == WeightFormat::kFp8E4M3) {
                ops_checks::expect_fp8(*w, kHere, "moe_experts");
                continue;
            }
            if (w->format == WeightFormat::kInt4) {
                ops_checks::expect_int4(*w, kHere, "moe_experts", /*stacked=*/true);
                continue;
            }
            if (!w->is_dense()) ops_checks::unsupported_format(*w, "CPU", "moe_experts");
            expect_dense(*w, "moe_experts");
        }
        expect(gu.data.rank() == 3 && dn.data.rank() == 3 && gu.data.stride(2) == 1 && dn.data.stride(2) == 1,
               "moe_experts",
               "gate_up and down must be stacked [E, 2I, H] and [E, H, I] with a contiguous last dim, got " +
                   gu.data.to_string() + " and " + dn.data.to_string());
        const int64_t E = gu.data.dim(0), H = x.dim(1), I = gu.data.dim(1) / 2;
        expect(E > 0 && gu.data.dim(1) == 2 * I && gu.in_features() == H && dn.data.dim(0) == E &&
                   dn.data.dim(1) == H && dn.in_features() == I,
               "moe_experts",
               "gate_up " + gu.data.to_string() + " and down " + dn.data.to_string() +
                   " do not fit [E, 2I, H] and [E, H, I] with H = " + std::to_string(H));
        expect(topk_weights.is_contiguous() && topk_ids.is_contiguous() && topk_ids.dtype() == DType::I32 &&
                   topk_weights.dtype() == DType::F32 && topk_weights.shape() == topk_ids.shape() &&
                   topk_ids.dim(0) == x.dim(0),
               "moe_experts", "topk_weights/topk_ids must be [T, k]");
        kc::MoeExpertsArgs a;
        a.x = x.data_as<float>(), a.x_stride = x.stride(0);
        a.T = x.dim(0), a.H = H, a.I = I, a.E = E, a.k = topk_ids.dim(1);
        a.topk_weights = topk_weights.data_as<float>(), a.topk_ids = topk_ids.data_as<int32_t>();
        a.gate_up = stacked(gu);
        a.down = stacked(dn);
        a.out = out.data_as<float>(), a.out_stride = out.stride(0);
        a.first_expert = experts.first_expert, a.num_experts = experts.num_experts;
        expect(a.first_expert >= 0 && (a.num_experts == 0 || a.first_expert + E <= a.num_experts), "moe_experts",
               "experts [" + std::to_string(a.first_expert) + ", +" + std::to_string(E) + ") are not among the " +
                   std::to_string(a.num_experts) + " of the model");
        kc::launch_moe_experts(a);
    }

    void causal_conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& conv_state, const ForwardBatch& batch,
                            const Tensor& out) override {
        const int64_t K = ops_checks::expect_conv1d(x, weight, conv_state, batch, out, kHere);
        const int64_t C = x.dim(1);
        kc::CausalConv1dArgs a;
        a.x = x.data_as<float>(), a.x_stride = x.stride(0), a.out = out.data_as<float>(), a.out_stride = out.stride(0);
        a.C = C, a.K = K, a.weight = weight.data(), a.weight_dtype = weight.dtype();
        a.conv_state = conv_state.data_as<float>(), a.num_slots = conv_state.dim(0);
        a.seqs = seq_info(batch);
        kc::launch_causal_conv1d_silu(a);
    }

    void gdn_gating(const Tensor& a_in, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, const Tensor& g,
                    const Tensor& beta) override {
        ops_checks::expect_gdn_gating(a_in, b, a_log, dt_bias, g, beta, kHere);
        kc::GdnGatingArgs a;
        a.a = a_in.data_as<float>(), a.a_stride = a_in.stride(0), a.b = b.data_as<float>(), a.b_stride = b.stride(0);
        a.a_log = a_log.data(), a.a_log_dtype = a_log.dtype(), a.dt_bias = dt_bias.data();
        a.dt_bias_dtype = dt_bias.dtype();
        a.g = g.data_as<float>(), a.g_stride = g.stride(0), a.beta = beta.data_as<float>();
        a.beta_stride = beta.stride(0), a.T = a_in.dim(0), a.H = a_in.dim(1);
        kc::launch_gdn_gating(a);
    }

    void l2_norm(const Tensor& x, float eps) override {
        ops_checks::expect_heads(x, kHere, "l2_norm", "x");
        kc::launch_l2_norm({rows3(x), x.dim(0), x.dim(1), x.dim(2), eps});
    }

    void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                          const Tensor& state, const ForwardBatch& batch, float q_scale, const Tensor& out,
                          DeltaRuleMode mode) override {
        ops_checks::expect_delta_rule(q, k, v, g, beta, state, batch, out, kHere);
        const int64_t Hk = q.dim(1), dk = q.dim(2), Hv = v.dim(1), dv = v.dim(2);
        kc::DeltaRuleArgs a;
        a.q = rows3(q), a.k = rows3(k), a.v = rows3(v), a.out = rows3(out);
        a.g = g.data_as<float>(), a.g_stride = g.stride(0), a.beta = beta.data_as<float>();
        a.beta_stride = beta.stride(0);
        a.Hk = Hk, a.Hv = Hv, a.dk = dk, a.dv = dv, a.q_scale = q_scale;
        a.state = state.data_as<float>(), a.num_slots = state.dim(0);
        a.seqs = seq_info(batch);
        a.mode = mode == DeltaRuleMode::Auto ? 0 : mode == DeltaRuleMode::Recurrent ? 1 : 2;
        kc::launch_gated_delta_rule(a);
    }

    void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, const Tensor& out) override {
        ops_checks::expect_gated_rms_norm(x, z, weight, out, kHere);
        kc::GatedRmsNormArgs a;
        a.x = rows3(x), a.z = rows3(z), a.out = rows3(out);
        a.T = x.dim(0), a.H = x.dim(1), a.D = x.dim(2);
        a.weight = weight.data(), a.weight_dtype = weight.dtype(), a.eps = eps;
        kc::launch_gated_rms_norm(a);
    }

    void gather_rows(const Tensor& x, std::span<const int32_t> rows, const Tensor& out) override {
        ops_checks::expect_mat(x, kHere, "gather_rows", "x");
        ops_checks::expect_mat(out, kHere, "gather_rows", "out");
        expect(out.dim(0) == static_cast<int64_t>(rows.size()) && out.dim(1) == x.dim(1), "gather_rows",
               "out must be [rows, N]");
        for (int32_t r : rows)
            expect(r >= 0 && r < x.dim(0), "gather_rows", "row index out of range");
        kc::CopyArgs a;
        a.src = x.data(), a.src_stride = x.stride(0), a.dst = out.data(), a.dst_stride = out.stride(0);
        a.T = out.dim(0), a.N = out.dim(1), a.rows = rows.data();
        kc::launch_copy(a);
    }

    void argmax(const Tensor& logits, std::span<int32_t> out) override {
        ops_checks::expect_mat(logits, kHere, "argmax", "logits");
        expect(static_cast<int64_t>(out.size()) == logits.dim(0), "argmax", "one output per row");
        kc::launch_argmax({logits.data_as<float>(), logits.stride(0), logits.dim(0), logits.dim(1), out.data()});
    }

  private:
    std::vector<float>
        gathered_;  // x in the order an act-order weight takes (linear_int4), or rounded to fp8 (linear_fp8)

    static int32_t max_slot(std::span<const int32_t> slots) {
        int32_t m = -1;
        for (int32_t s : slots)
            m = std::max(m, s);
        return m;
    }

    // y += each token's adapter delta, adapter by adapter (the tokens of one are lora_groups_.tokens(slot)).
    void add_lora(const Tensor& x, const LoraAdapterSet& set, const Tensor& y) {
        expect(x.dim(0) == static_cast<int64_t>(lora_slots_.size()), "linear",
               "a projection with adapters ran on " + std::to_string(x.dim(0)) + " rows, not the step's " +
                   std::to_string(lora_slots_.size()) + " tokens");
        const int32_t slots = std::min(lora_groups_.num_slots(), static_cast<int32_t>(set.slots.size()));
        for (int32_t s = 0; s < slots; ++s) {
            const std::span<const int32_t> tokens = lora_groups_.tokens(s);
            if (tokens.empty()) continue;
            for (const LoraSlice& slice : set.slots[static_cast<size_t>(s)]) {
                kc::LoraDeltaArgs a;
                a.x = x.data_as<float>(), a.x_stride = x.stride(0);
                a.y = y.data_as<float>(), a.y_stride = y.stride(0), a.row_offset = slice.row_offset;
                a.a = slice.a.data_as<float>(), a.b = slice.b.data_as<float>();
                a.rank = slice.a.dim(0), a.K = slice.a.dim(1), a.N = slice.b.dim(0), a.scale = slice.scale;
                expect(a.K == x.dim(1) && a.row_offset + a.N <= y.dim(1) && a.rank <= kc::kLoraMaxRank, "linear",
                       "a LoRA slice does not fit its projection");
                a.tokens = tokens.data(), a.num_tokens = static_cast<int64_t>(tokens.size());
                kc::launch_lora_delta(a);
            }
        }
    }

    std::span<const int32_t> lora_slots_;
    LoraTokenGroups lora_groups_;

    void norm_impl(const char* op, const Tensor& residual, const Tensor& x, const Tensor& weight, float eps,
                   NormKind kind, const Tensor& out) {
        ops_checks::expect_mat(x, kHere, op, "x");
        ops_checks::expect_mat(out, kHere, op, "out");
        expect(x.shape() == out.shape(), op, "x " + x.to_string() + " and out " + out.to_string() + " differ");
        ops_checks::expect_vec(weight, x.dim(1), kHere, op, "weight");
        kc::RmsNormArgs a;
        a.x = rows2(x), a.out = rows2(out);
        if (residual.defined()) a.residual = rows2(residual);
        a.T = x.dim(0), a.H = 1, a.D = x.dim(1);
        a.weight = weight.data(), a.weight_dtype = weight.dtype(), a.eps = eps;
        a.zero_centred = kind == NormKind::ZeroCentred;
        kc::launch_rms_norm(a);
    }

    void binary(const char* op, kc::ElementwiseOp kind, const Tensor& a_in, const Tensor& b, const Tensor& out) {
        ops_checks::expect_binary(a_in, b, out, kind == kc::ElementwiseOp::SigmoidMul, kHere, op);
        const bool heads = a_in.rank() == 3;
        kc::ElementwiseArgs a;
        a.op = kind;
        a.a = a_in.data_as<float>(), a.a_stride = a_in.stride(0);
        a.b = b.data_as<float>(), a.b_stride = b.stride(0), a.b_cols = b.dim(-1);
        a.out = out.data_as<float>(), a.out_stride = out.stride(0);
        a.T = a_in.dim(0), a.N = a_in.dim(-1);
        if (heads) {
            a.H = a_in.dim(1), a.a_stride_h = a_in.stride(1), a.b_stride_h = b.stride(1);
            a.out_stride_h = out.stride(1);
        }
        kc::launch_elementwise(a);
    }

    // F32 caches, or F8_E4M3 ones with their scales (the pool gives an fp8 layer its scales, and only an fp8 one).
    void check_cache(const KvCacheLayer& cache, int64_t H_kv, int64_t D, const ForwardBatch& batch, const char* op) {
        const Tensor &kc_ = cache.key, &vc = cache.value;
        const DType want = cache.scales ? DType::F8_E4M3 : DType::F32;
        expect(kc_.dtype() == want && vc.dtype() == want && kc_.is_contiguous() && vc.is_contiguous() &&
                   kc_.rank() == 4 && kc_.shape() == vc.shape(),
               op,
               "caches must be contiguous F32 (or F8_E4M3 with scales) [blocks, block_size, H_kv, D], got " +
                   kc_.to_string());
        expect(kc_.dim(1) == batch.block_size && kc_.dim(2) == H_kv && kc_.dim(3) == D, op,
               "cache " + kc_.to_string() + " does not match block_size " + std::to_string(batch.block_size) +
                   ", heads " + std::to_string(H_kv) + ", head_dim " + std::to_string(D));
    }

    // An [E, N, K] expert stack as the kernel takes it (fp8: with each expert's scale grid).
    static kc::StackedWeight stacked(const LinearWeight& w) {
        kc::StackedWeight s;
        s.data = w.data.data(), s.dtype = w.data.dtype(), s.expert_stride = w.data.stride(0);
        s.row_stride = w.data.stride(1);
        if (w.format == WeightFormat::kFp8E4M3) {
            const ScaleBlocks b = w.scale_blocks();
            s.scales = {w.scales.data_as<float>(), b.rows, b.cols, b.stride};
            s.scale_expert_stride = w.scales.numel() / w.data.dim(0);
        }
        if (w.format == WeightFormat::kInt4) {
            s.int4 = int4_weight(w);
            s.scale_expert_stride = w.scales.numel() / w.data.dim(0);
        }
        return s;
    }

    // Weight-only fp8: dequantised to f32 chunk by chunk, then the f32 GEMM (gemm_fp8.cpp); with dynamic activation
    // quantization (W8A8) the input is rounded as the CUDA fp8 GEMM takes it first.
    void linear_fp8(const Tensor& x, const LinearWeight& w, const Tensor& y) {
        ops_checks::expect_fp8(w, kHere, "linear");
        const ScaleBlocks blocks = w.scale_blocks();
        kc::LinearFp8Args a;
        a.x = x.data_as<float>(), a.x_stride = x.stride(0);
        if (w.input_quant_group != 0) {
            const int64_t T = x.dim(0), K = w.in_features();
            if (gathered_.size() < static_cast<size_t>(T * K)) gathered_.resize(static_cast<size_t>(T * K));
            kc::launch_quantize_fp8_activations(
                {x.data_as<float>(), x.stride(0), gathered_.data(), T, K, w.input_quant_group});
            a.x = gathered_.data(), a.x_stride = K;
        }
        a.w = static_cast<const uint8_t*>(w.data.data()), a.w_stride = w.data.stride(0);
        a.scales = {w.scales.data_as<float>(), blocks.rows, blocks.cols, blocks.stride};
        a.bias = w.bias.defined() ? w.bias.data() : nullptr, a.bias_dtype = w.bias.dtype();
        a.y = y.data_as<float>(), a.y_stride = y.stride(0);
        a.T = x.dim(0), a.N = w.out_features(), a.K = w.in_features();
        kc::launch_linear_fp8(a);
    }

    // Weight-only int4 (and int8): dequantised to f32 chunk by chunk, then the f32 GEMM (gemm_int4.cpp).
    // int4/int8; an act-order weight (input_perm) takes x's columns in its layout's order, gathered first.
    void linear_int4(const Tensor& x, const LinearWeight& w, const Tensor& y) {
        ops_checks::expect_int4(w, kHere, "linear");
        kc::LinearInt4Args a;
        a.x = x.data_as<float>(), a.x_stride = x.stride(0);
        if (w.input_perm.defined()) {
            const int64_t T = x.dim(0), K = w.in_features();
            if (gathered_.size() < static_cast<size_t>(T * K)) gathered_.resize(static_cast<size_t>(T * K));
            const int32_t* perm = w.input_perm.data_as<int32_t>();
            for (int64_t t = 0; t < T; ++t) {
                const float* row = a.x + t * a.x_stride;
                float* dst = gathered_.data() + t * K;
                for (int64_t k = 0; k < K; ++k)
                    dst[k] = row[perm[k]];
            }
            a.x = gathered_.data(), a.x_stride = K;
        }
        a.w = int4_weight(w);
        a.bias = w.bias.defined() ? w.bias.data() : nullptr, a.bias_dtype = w.bias.dtype();
        a.y = y.data_as<float>(), a.y_stride = y.stride(0);
        a.T = x.dim(0), a.N = w.out_features(), a.K = w.in_features();
        kc::launch_linear_int4(a);
    }
    static kc::Int4Weight int4_weight(const LinearWeight& w) {
        return {static_cast<const uint8_t*>(w.data.data()),
                w.data.stride(0),
                w.scales.data_as<float>(),
                w.zeros.defined() ? w.zeros.data_as<float>() : nullptr,
                w.group_size,
                w.in_features() / w.group_size,
                w.dequant_dtype,
                grouped_int_bits(w.format)};
    }

    // A dense weight's data must be of the format's dtype (LinearWeight::dense makes them agree).
    static void expect_dense(const LinearWeight& w, const char* op) {
        const DType want = w.format == WeightFormat::kBf16  ? DType::BF16
                           : w.format == WeightFormat::kF16 ? DType::F16
                                                            : DType::F32;
        expect(w.data.dtype() == want, op,
               "weight data " + w.data.to_string() + " does not match its format " + std::string(w.describe()));
    }
};

}  // namespace

std::unique_ptr<Ops> make_cpu_ops() {
    return std::make_unique<CpuOps>();
}

}  // namespace pagoda
