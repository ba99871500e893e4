#include "model/arch/blocks.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "common/align.h"
#include "common/check.h"
#include "model/parallel_copy.h"

namespace pagoda::model {

// --- Arena -----------------------------------------------------------------------------------------------------------

namespace {
constexpr size_t kArenaAlign = 64;
}  // namespace

void Arena::reserve(Allocator& allocator, size_t bytes) {
    used_ = 0;
    if (buffer_.size() >= bytes) return;
    auto buffer = Buffer::allocate(allocator, bytes, kArenaAlign);
    PAGODA_CHECK_MSG(buffer.ok(), buffer.message().c_str());
    buffer_ = std::move(buffer).value();
    ++reallocations_;
}

Tensor Arena::take(DType dtype, const Shape& shape) {
    const size_t bytes = align_up(static_cast<size_t>(shape.numel()) * dtype_size(dtype), kArenaAlign);
    PAGODA_CHECK_MSG(used_ + bytes <= buffer_.size(), "scratch arena too small");
    Tensor t(static_cast<std::byte*>(buffer_.data()) + used_, dtype, shape, buffer_.device());
    used_ += bytes;
    return t;
}

NormKind norm_kind(const ModelSpec& spec) {
    return spec.zero_centered_norm ? NormKind::ZeroCentred : NormKind::Plain;
}

namespace {

// [T, heads, dim] view of row-major memory whose rows are `row_stride` floats apart and whose heads are
// `head_stride` floats apart, starting `offset` floats into each row.
Tensor heads_view(const Tensor& base, int64_t offset, int64_t heads, int64_t dim, int64_t head_stride) {
    const int64_t strides[3] = {base.stride(0), head_stride, 1};
    return Tensor(base.data_as<float>() + offset, DType::F32, Shape{base.dim(0), heads, dim}, strides, base.device());
}

}  // namespace

// --- Attention -------------------------------------------------------------------------------------------------------

Status visit_weights(AttentionWeights& w, const ModelSpec& spec, const AttentionOptions& options, const std::string& p,
                     const WeightVisitor& visit) {
    const int64_t H = spec.hidden_size, nq = spec.num_attention_heads, nkv = spec.num_key_value_heads;
    const int64_t hd = spec.head_dim;
    const int64_t q_head = hd * (options.output_gate ? 2 : 1);  // rows of one head in q_proj: [query | gate]
    const ShardRole q_rows = ShardRole::rows(SplitUnit::kQueryHeads, q_head);
    const ShardRole kv_rows = ShardRole::rows(SplitUnit::kKvHeads, hd);
    constexpr WeightSource f32 = WeightSource::kF32;
    std::vector<WeightEntry> e = {
        linear_entry(p, "q_proj.weight", w.q, Shape{nq * q_head, H}, q_rows),
        linear_entry(p, "k_proj.weight", w.k, Shape{nkv * hd, H}, kv_rows),
        linear_entry(p, "v_proj.weight", w.v, Shape{nkv * hd, H}, kv_rows),
        linear_entry(p, "o_proj.weight", w.o, Shape{H, nq * hd}, ShardRole::columns(SplitUnit::kQueryHeads, hd)),
    };
    if (options.bias) {
        e.push_back(tensor_entry(p, "q_proj.bias", w.q.bias, Shape{nq * q_head}, f32, q_rows));
        e.push_back(tensor_entry(p, "k_proj.bias", w.k.bias, Shape{nkv * hd}, f32, kv_rows));
        e.push_back(tensor_entry(p, "v_proj.bias", w.v.bias, Shape{nkv * hd}, f32, kv_rows));
    }
    if (options.qk_norm) {  // per head: every rank holds the whole [hd] vector
        e.push_back(tensor_entry(p, "q_norm.weight", w.q_norm, Shape{hd}, f32, ShardRole::replicated()));
        e.push_back(tensor_entry(p, "k_norm.weight", w.k_norm, Shape{hd}, f32, ShardRole::replicated()));
    }
    return visit_all(e, visit);
}

size_t attention_scratch_floats(const ModelSpec& spec) {
    const int64_t nq = spec.num_attention_heads, nkv = spec.num_key_value_heads, hd = spec.head_dim;
    return static_cast<size_t>(2 * nq * hd + 2 * nkv * hd + nq * hd);
}

void attention_forward(Ops& ops, const ModelSpec& spec, const AttentionWeights& w, const Tensor& x,
                       const ForwardBatch& batch, const RopeTable& rope, const KvCacheLayer& cache, Arena& arena,
                       const Tensor& out) {
    // Head counts from the weights: this rank's heads when the model is split for tensor parallelism.
    const int64_t T = x.dim(0), hd = spec.head_dim, nq = w.o.in_features() / hd, nkv = w.k.out_features() / hd;
    const bool gated = w.q.out_features() == 2 * nq * hd;
    const int64_t q_width = w.q.out_features();

    Tensor q_out, k_out, v_out;
    if (w.qkv.defined()) {  // one projection; q, k and v are column slices of its output
        Tensor qkv_out = arena.f32(T, w.qkv.out_features());
        ops.linear(x, w.qkv, qkv_out);
        q_out = qkv_out.narrow(1, 0, q_width);
        k_out = qkv_out.narrow(1, q_width, nkv * hd);
        v_out = qkv_out.narrow(1, q_width + nkv * hd, nkv * hd);
    } else {
        q_out = arena.f32(T, q_width);
        k_out = arena.f32(T, nkv * hd);
        v_out = arena.f32(T, nkv * hd);
        ops.linear(x, w.q, q_out);
        ops.linear(x, w.k, k_out);
        ops.linear(x, w.v, v_out);
    }

    // Gated attention: each head's slice of q_proj is [query(hd) | gate(hd)] (per-head interleave).
    Tensor q = heads_view(q_out, 0, nq, hd, gated ? 2 * hd : hd);
    Tensor k = heads_view(k_out, 0, nkv, hd, hd);
    Tensor v = heads_view(v_out, 0, nkv, hd, hd);
    const NormKind kind = norm_kind(spec);
    const float eps = static_cast<float>(spec.rms_norm_eps);
    ops.qk_norm_rope_write_kv(q, k, v, w.q_norm, w.k_norm, eps, kind, batch, rope, cache);
    Tensor attn = arena.f32(T, nq * hd);
    ops.paged_attention(q, cache, batch, 1.0f / std::sqrt(static_cast<float>(hd)), attn.reshape(Shape{T, nq, hd}));
    if (gated) {
        // attn[:, h] *= sigmoid(gate of head h): the gates are the second halves of q_out's per-head [q | gate].
        ops.sigmoid_mul(attn.reshape(Shape{T, nq, hd}), heads_view(q_out, hd, nq, hd, 2 * hd));
    }
    ops.linear(attn, w.o, out);
}

// --- MLP -------------------------------------------------------------------------------------------------------------

Status visit_weights(MlpWeights& w, int64_t hidden, int64_t intermediate, SplitUnit unit, const std::string& p,
                     const WeightVisitor& visit) {
    const ShardRole column_parallel = ShardRole::rows(unit), row_parallel = ShardRole::columns(unit);
    const WeightEntry e[] = {
        linear_entry(p, "gate_proj.weight", w.gate, Shape{intermediate, hidden}, column_parallel),
        linear_entry(p, "up_proj.weight", w.up, Shape{intermediate, hidden}, column_parallel),
        linear_entry(p, "down_proj.weight", w.down, Shape{hidden, intermediate}, row_parallel),
    };
    return visit_all(e, visit);
}

namespace {

// silu(x · gateᵀ) ⊙ (x · upᵀ): the MLP's input to its down projection, [T, I] from the arena.
Tensor mlp_hidden(Ops& ops, const MlpWeights& w, const Tensor& x, Arena& arena) {
    const int64_t T = x.dim(0), I = w.gate.out_features();
    Tensor h = arena.f32(T, I);
    if (w.gate_up.defined()) {  // one projection; gate and up are the halves of its output
        ops.linear_silu_mul(x, w.gate_up, arena.f32(T, 2 * I), h);
    } else {
        Tensor g = arena.f32(T, I), u = arena.f32(T, I);
        ops.linear(x, w.gate, g);
        ops.linear(x, w.up, u);
        ops.silu_mul(g, u, h);
    }
    return h;
}

}  // namespace

void mlp_forward(Ops& ops, const MlpWeights& w, const Tensor& x, Arena& arena, const Tensor& out) {
    ops.linear(mlp_hidden(ops, w, x, arena), w.down, out);
}

Tensor rows_back_to_back(std::initializer_list<const Tensor*> parts) {
    return rows_back_to_back(std::span<const Tensor* const>(parts.begin(), parts.size()));
}

Tensor rows_back_to_back(std::span<const Tensor* const> parts) {
    const Tensor& first = *parts.front();
    int64_t rows = 0;
    const std::byte* next = static_cast<const std::byte*>(first.data());
    for (const Tensor* t : parts) {
        if (!t->defined() || !t->is_contiguous() || t->dtype() != first.dtype() || t->rank() != first.rank() ||
            t->device() != first.device() || t->data() != next)
            return Tensor();
        for (int d = 1; d < t->rank(); ++d)
            if (t->dim(d) != first.dim(d)) return Tensor();
        rows += t->dim(0);
        next = static_cast<const std::byte*>(t->data()) + t->nbytes();
    }
    Shape shape = first.shape();
    shape[0] = rows;
    return Tensor(first.data(), first.dtype(), shape, first.device());
}

namespace {
// Whether fp8 weights can be viewed as one: the same scale layout over the same blocks, the same input rounding, and
// every part but the last whole block rows (so that the scale grids' rows stack as the data's do). Per-tensor scales
// differ between the parts: never.
bool fp8_parts_fuse(std::initializer_list<const LinearWeight*> parts) {
    const LinearWeight& first = **parts.begin();
    if (first.scale_layout != ScaleLayout::kBlock && first.scale_layout != ScaleLayout::kPerChannel) return false;
    size_t i = 0;
    for (const LinearWeight* p : parts) {
        const bool last = ++i == parts.size();
        if (p->scale_layout != first.scale_layout || p->block_rows != first.block_rows ||
            p->block_cols != first.block_cols || p->input_quant_group != first.input_quant_group ||
            p->input_perm.defined() || !p->scales.defined())
            return false;
        if (first.scale_layout == ScaleLayout::kBlock && !last && p->out_features() % first.block_rows != 0)
            return false;
    }
    return true;
}

// Whether grouped integer weights (int4, int8) can be viewed as one: the same groups, rounding and zero points (all
// or none), and no act-order permutation (each projection has its own).
bool grouped_int_parts_fuse(std::initializer_list<const LinearWeight*> parts) {
    const LinearWeight& first = **parts.begin();
    for (const LinearWeight* p : parts)
        if (p->group_size != first.group_size || p->dequant_dtype != first.dequant_dtype ||
            p->zeros.defined() != first.zeros.defined() || p->input_perm.defined() || !p->scales.defined())
            return false;
    return true;
}

// The weights as one, when they are of one format that fuses (dense; fp8 and grouped integers as fp8_parts_fuse and
// grouped_int_parts_fuse say) and their data (and biases, scales and zero points) lie back to back.
LinearWeight fuse_rows(std::initializer_list<const LinearWeight*> parts) {
    const LinearWeight& first = **parts.begin();
    const bool fp8 = first.format == WeightFormat::kFp8E4M3, grouped = first.is_grouped_int();
    for (const LinearWeight* p : parts) {
        if (!p->defined() || (!p->is_dense() && !fp8 && !grouped) || p->format != first.format ||
            p->bias.defined() != first.bias.defined())
            return LinearWeight();
    }
    if ((fp8 && !fp8_parts_fuse(parts)) || (grouped && !grouped_int_parts_fuse(parts))) return LinearWeight();
    std::vector<const Tensor*> data, bias, scales, zeros;
    for (const LinearWeight* p : parts)
        data.push_back(&p->data), bias.push_back(&p->bias), scales.push_back(&p->scales), zeros.push_back(&p->zeros);
    const Tensor fused_data = rows_back_to_back(data);
    if (!fused_data.defined()) return LinearWeight();
    LinearWeight fused;
    if (fp8 || grouped) {
        const Tensor fused_scales = rows_back_to_back(scales);
        if (!fused_scales.defined()) return LinearWeight();
        if (fp8) {
            fused = LinearWeight::fp8(fused_data, fused_scales, first.scale_layout, first.block_rows, first.block_cols);
            fused.input_quant_group = first.input_quant_group;
        } else {
            const Tensor fused_zeros = first.zeros.defined() ? rows_back_to_back(zeros) : Tensor();
            if (first.zeros.defined() && !fused_zeros.defined()) return LinearWeight();
            fused = LinearWeight::grouped_int(grouped_int_bits(first.format), fused_data, fused_scales, fused_zeros,
                                              first.group_size);
            fused.dequant_dtype = first.dequant_dtype;
        }
    } else {
        fused = LinearWeight::dense(fused_data);
    }
    if (first.bias.defined()) {
        fused.bias = rows_back_to_back(bias);
        if (!fused.bias.defined()) return LinearWeight();  // one linear takes one bias
    }
    return fused;
}
}  // namespace

void fuse_projections(AttentionWeights& w) {
    w.qkv = fuse_rows({&w.q, &w.k, &w.v});
}

void fuse_projections(MlpWeights& w) {
    w.gate_up = fuse_rows({&w.gate, &w.up});
}

void fuse_projections(DeltaNetWeights& w) {
    w.in_proj = fuse_rows({&w.qkv, &w.z, &w.b, &w.a});
}

// --- MoE -------------------------------------------------------------------------------------------------------------

namespace {
// Qwen3-MoE's per-expert tensors (experts.{e}.gate_proj/up_proj/down_proj) stacked once into owned [E, 2I, H] and
// [E, H, I] buffers, the layout Qwen3.5-MoE checkpoints store; the copies run on all cores (parallel_copy.h says why).
// fp8 experts (Qwen3-30B-A3B-FP8 stores them one by one, each with its weight_scale_inv): the data stacked as the
// dense ones, each expert's scale grid stacked likewise. The gate|up grid is the gate's above the up's, which holds
// only when I is a whole number of scale blocks; H must be too, so that a stack is also one [E*N, K] matrix with one
// grid (CUDA dequantises it so). Per-tensor scales do not stack (gate and up have one each).
Status stack_fp8_experts(WeightLoader& loader, const std::string& p, int64_t first, int64_t E, int64_t I, int64_t H,
                         MoeWeights& out) {
    LinearWeight gate_up, down;
    std::vector<CopyJob> copies;
    // Copies `src`'s data and scales into expert e's rows of `dst`, from row `row` on (after the loop).
    const auto place = [&copies](const LinearWeight& src, const LinearWeight& dst, int64_t e, int64_t row) {
        const Tensor d = dst.data.select(e), s = dst.scales.select(e);
        const int64_t scale_row = dst.scale_layout == ScaleLayout::kBlock ? row / dst.block_rows : row;
        copies.push_back({d.narrow(0, row, src.out_features()).data(), src.data.data(), src.data.nbytes()});
        copies.push_back({s.narrow(0, scale_row, src.scales.dim(0)).data(), src.scales.data(), src.scales.nbytes()});
    };
    for (int64_t e = 0; e < E; ++e) {
        const std::string ep = p + std::to_string(first + e) + ".";
        PAGODA_ASSIGN_OR_RETURN(LinearWeight g, loader.linear(ep + "gate_proj.weight", Shape{I, H}));
        PAGODA_ASSIGN_OR_RETURN(LinearWeight u, loader.linear(ep + "up_proj.weight", Shape{I, H}));
        PAGODA_ASSIGN_OR_RETURN(LinearWeight d, loader.linear(ep + "down_proj.weight", Shape{H, I}));
        if (g.format != WeightFormat::kFp8E4M3 || u.format != g.format || d.format != g.format) {
            return Status::error(ep + ": experts of one layer must share one format (found " + g.describe() + ", " +
                                 u.describe() + ", " + d.describe() + ")");
        }
        if (e == 0) {
            const bool block = g.scale_layout == ScaleLayout::kBlock;
            if (g.scale_layout == ScaleLayout::kPerTensor ||
                (block && (I % g.block_rows != 0 || H % g.block_rows != 0))) {
                return Status::error(p + ": fp8 experts with " + g.describe() + " of " + std::to_string(I) + "x" +
                                     std::to_string(H) + " cannot be stacked (per-channel scales, or blocks that " +
                                     "divide the expert width and the hidden size, are served)");
            }
            gate_up = LinearWeight::fp8(loader.allocate(DType::F8_E4M3, Shape{E, 2 * I, H}), Tensor(), g.scale_layout,
                                        g.block_rows, g.block_cols);
            down = LinearWeight::fp8(loader.allocate(DType::F8_E4M3, Shape{E, H, I}), Tensor(), d.scale_layout,
                                     d.block_rows, d.block_cols);
            gate_up.scales = loader.allocate(DType::F32, gate_up.expected_scales_shape());
            down.scales = loader.allocate(DType::F32, down.expected_scales_shape());
        }
        place(g, gate_up, e, 0);
        place(u, gate_up, e, I);
        place(d, down, e, 0);
    }
    parallel_copy(copies);
    out.gate_up = std::move(gate_up);
    out.down = std::move(down);
    return ok_status();
}

// int4 experts (Qwen3-30B-A3B-GPTQ-Int4, AWQ and W4A16 checkpoints store them one by one): every expert's packed
// tensors found and checked first (one thread: the loader records what it hands out), then each expert repacked
// straight into its rows of the stacks [E, 2I, H/2] and [E, H, I/2] with its scales and zeros, experts on all cores
// (the page faults and the unpacking both proceed in parallel, as parallel_copy.h says). The gate|up stack's scales are
// the gate's rows above the up's: groups run along the inputs, so rows stack like the data.
Status stack_int4_experts(WeightLoader& loader, const std::string& p, int64_t first, int64_t E, int64_t I, int64_t H,
                          MoeWeights& out) {
    struct Slot {
        WeightLoader::Int4Module module;
        LinearWeight* stack;
        int64_t expert, row;
    };
    std::vector<Slot> slots;
    LinearWeight gate_up, down;
    for (int64_t e = 0; e < E; ++e) {
        const std::string ep = p + std::to_string(first + e) + ".";
        for (const auto& [name, rows, cols, stack, row] : {std::tuple{"gate_proj.weight", I, H, &gate_up, int64_t{0}},
                                                           std::tuple{"up_proj.weight", I, H, &gate_up, I},
                                                           std::tuple{"down_proj.weight", H, I, &down, int64_t{0}}}) {
            if (!loader.stored_int4(ep + name)) {
                return Status::error(ep + name + ": experts of one layer must share one format (the first " +
                                     "expert's gate_proj is int4, this one is not)");
            }
            PAGODA_ASSIGN_OR_RETURN(const CheckpointQuantization q, loader.int4_quantization(ep + name));
            if (q.bits() != 4) {
                // The expert kernels (CPU and CUDA) read 4-bit values only; 8-bit experts would need passes of their
                // own.
                return Status::error(ep + name + ": " + std::to_string(q.bits()) +
                                     "-bit MoE experts are not served yet (8-bit dense layers are, and 4-bit experts)");
            }
            PAGODA_ASSIGN_OR_RETURN(WeightLoader::Int4Module m, loader.int4_module(ep + name, Shape{rows, cols}, q));
            if (stack->defined() && m.group != stack->group_size) {  // (a module rule's own group)
                return Status::error(ep + name + ": the experts of one layer must share one group size (" +
                                     std::to_string(m.group) + " here, " + std::to_string(stack->group_size) +
                                     " before)");
            }
            if (stack->defined() && m.zero_points != stack->zeros.defined()) {  // (a config group's own symmetry)
                return Status::error(ep + name + ": the experts of one layer must all have zero points or none");
            }
            if (!m.input_perm.empty()) {  // the grouped expert kernels take no input permutation
                return Status::error(ep + name + ": act-order GPTQ MoE experts (g_idx not k / group_size) are not " +
                                     "served yet (act-order dense layers are)");
            }
            if (!stack->defined()) {
                const int64_t N = stack == &gate_up ? 2 * I : H, G = m.K / m.group;
                *stack = LinearWeight::int4(
                    loader.allocate(DType::U8, Shape{E, N, m.K / 2}), loader.allocate(DType::F32, Shape{E, N, G}),
                    m.zero_points ? loader.allocate(DType::F32, Shape{E, N, G}) : Tensor(), m.group);
                stack->dequant_dtype = m.dequant_dtype;
            }
            if (m.dequant_dtype != stack->dequant_dtype) {
                return Status::error(ep + name + ": the experts' scales of one layer must share one dtype");
            }
            slots.push_back({std::move(m), stack, e, row});
        }
    }
    parallel_for(slots.size(), [&loader, &slots](size_t i) {
        const Slot& s = slots[i];
        const LinearWeight& w = *s.stack;
        const int64_t G = s.module.K / s.module.group;
        Int4Layout dst;
        dst.N = s.module.N, dst.K = s.module.K, dst.group = s.module.group;
        dst.data = static_cast<uint8_t*>(w.data.select(s.expert).narrow(0, s.row, dst.N).data());
        const int64_t scale_offset = (s.expert * w.scales.dim(1) + s.row) * G;
        dst.scales = w.scales.data_as<float>() + scale_offset;
        dst.zeros = w.zeros.defined() ? w.zeros.data_as<float>() + scale_offset : nullptr;
        loader.repack_int4(s.module, dst);
    });
    out.gate_up = std::move(gate_up);
    out.down = std::move(down);
    return ok_status();
}

// Experts [first, first + E) of the checkpoint's, stacked as experts [0, E) (every expert, or this rank's under expert
// parallelism).
Status stack_experts(WeightLoader& loader, const std::string& p, int64_t first, int64_t E, int64_t I, int64_t H,
                     MoeWeights& out) {
    const std::string gate0 = p + std::to_string(first) + ".gate_proj.weight";
    if (loader.stored_fp8(gate0)) return stack_fp8_experts(loader, p, first, E, I, H, out);
    if (loader.stored_int4(gate0)) return stack_int4_experts(loader, p, first, E, I, H, out);
    if (loader.int4_checkpoint() && !loader.has(gate0)) {
        return Status::error(p + std::to_string(first) + ".gate_proj: neither packed int4 tensors nor a weight; int4 " +
                             "MoE experts are served " +
                             "stored one by one (experts.<e>.gate_proj.qweight ...), not fused (not yet)");
    }
    // Dense experts take only this rank's features under tensor parallelism: gate and up rows [f0, f0 + Il), down
    // columns [f0, f0 + Il) (one copy per row of down).
    const int64_t f0 = loader.expert_features_first(), Il = loader.expert_features_count(I);
    if (f0 < 0 || Il <= 0 || f0 + Il > I) return Status::error(p + ": expert features to hold out of range");
    out.stacked_for_rank = out.stacked_for_rank || Il != I;
    Tensor gate_up, down;
    std::vector<CopyJob> copies;
    for (int64_t e = 0; e < E; ++e) {
        const std::string ep = p + std::to_string(first + e) + ".";
        PAGODA_ASSIGN_OR_RETURN(Tensor g, loader.view(ep + "gate_proj.weight", Shape{I, H}));
        PAGODA_ASSIGN_OR_RETURN(Tensor u, loader.view(ep + "up_proj.weight", Shape{I, H}));
        PAGODA_ASSIGN_OR_RETURN(Tensor d, loader.view(ep + "down_proj.weight", Shape{H, I}));
        if (e == 0) {
            gate_up = loader.allocate(g.dtype(), Shape{E, 2 * Il, H});
            down = loader.allocate(d.dtype(), Shape{E, H, Il});
        }
        if (g.dtype() != gate_up.dtype() || u.dtype() != gate_up.dtype() || d.dtype() != down.dtype()) {
            return Status::error(ep + ": experts of one layer must share one dtype (found " +
                                 std::string(dtype_name(g.dtype())) + ", " + std::string(dtype_name(u.dtype())) + ", " +
                                 std::string(dtype_name(d.dtype())) + ")");
        }
        Tensor ge = gate_up.select(e);
        copies.push_back({ge.narrow(0, 0, Il).data(), g.narrow(0, f0, Il).data(), g.narrow(0, f0, Il).nbytes()});
        copies.push_back({ge.narrow(0, Il, Il).data(), u.narrow(0, f0, Il).data(), u.narrow(0, f0, Il).nbytes()});
        if (Il == I) {
            copies.push_back({down.select(e).data(), d.data(), d.nbytes()});
        } else {
            const size_t row_bytes = static_cast<size_t>(Il) * dtype_size(d.dtype());
            for (int64_t h = 0; h < H; ++h)
                copies.push_back({down.select(e).select(h).data(), d.select(h).narrow(0, f0, Il).data(), row_bytes});
        }
    }
    parallel_copy(copies);
    out.gate_up = LinearWeight::dense(gate_up);
    out.down = LinearWeight::dense(down);
    return ok_status();
}
}  // namespace

Status prepare_moe(const ModelSpec& spec, WeightLoader& loader, const std::string& p, MoeWeights& out) {
    const int64_t E = spec.num_experts, I = spec.moe_intermediate_size, H = spec.hidden_size;
    if (E <= 0 || I <= 0 || spec.num_experts_per_tok <= 0 || spec.num_experts_per_tok > E) {
        return Status::error("MoE layer " + p + ": the config's num_experts/num_experts_per_tok/moe_intermediate_size" +
                             " are missing or inconsistent");
    }
    out.has_shared = spec.shared_expert_intermediate_size > 0;
    out.per_expert_checkpoint = !loader.has(p + "experts.gate_up_proj");
    if (!out.per_expert_checkpoint && loader.stored_fp8(p + "experts.gate_up_proj"))
        return Status::error(p + "experts.gate_up_proj: fused MoE experts stored as fp8 are not served yet");
    if (!out.per_expert_checkpoint) return ok_status();  // fused: views of the checkpoint, cut by shard_weights
    const int64_t first = loader.experts_first(), held = loader.experts_count(E);
    if (first < 0 || held <= 0 || first + held > E) return Status::error(p + ": experts to hold out of range");
    out.stacked_for_rank = held != E;  // the dense path also says so when it took only this rank's features
    return stack_experts(loader, p + "experts.", first, held, I, H, out);
}

Status visit_weights(MoeWeights& w, const ModelSpec& spec, const std::string& p, const WeightVisitor& visit) {
    const int64_t E = spec.num_experts, I = spec.moe_intermediate_size, H = spec.hidden_size;
    // Tensor parallelism splits every expert like the dense MLP (its intermediate features: the gate and the up rows
    // of gate_up, the columns of down), so each rank runs every expert on its slice and the MoE output is a partial
    // sum like the MLP's. The router and the shared expert's gate are replicated: every rank routes alike.
    // Stacks a rank built of its own experts are its shard already.
    const ShardRole gate_up = w.stacked_for_rank
                                  ? ShardRole::replicated()
                                  : ShardRole::rows({{SplitUnit::kExpertMlp, 1}, {SplitUnit::kExpertMlp, 1}});
    const ShardRole down = w.stacked_for_rank ? ShardRole::replicated() : ShardRole::columns(SplitUnit::kExpertMlp);
    const auto experts = w.per_expert_checkpoint ? unpacked_entry : linear_entry;  // stacked by prepare_moe, or fused
    const WeightEntry e[] = {
        dense_linear_entry(p, "gate.weight", w.router, Shape{E, H}, ShardRole::replicated()),
        experts(p, "experts.gate_up_proj", w.gate_up, Shape{E, 2 * I, H}, gate_up),
        experts(p, "experts.down_proj", w.down, Shape{E, H, I}, down),
    };
    PAGODA_RETURN_IF_ERROR(visit_all(e, visit));
    if (spec.shared_expert_intermediate_size <= 0) return ok_status();
    PAGODA_RETURN_IF_ERROR(visit_weights(w.shared, H, spec.shared_expert_intermediate_size, SplitUnit::kSharedExpertMlp,
                                         p + "shared_expert.", visit));
    // sigmoid(x · gate) scales the shared expert's output: a partial sum scaled alike on every rank stays one.
    return visit(
        dense_linear_entry(p, "shared_expert_gate.weight", w.shared_gate, Shape{1, H}, ShardRole::replicated()));
}

size_t moe_scratch_floats(const ModelSpec& spec) {
    return static_cast<size_t>(spec.num_experts + 2 * spec.num_experts_per_tok + spec.hidden_size + 1 +
                               3 * spec.shared_expert_intermediate_size);
}

void moe_forward(Ops& ops, const ModelSpec& spec, const MoeWeights& w, const Tensor& x, Arena& arena,
                 const Tensor& out) {
    const int64_t T = x.dim(0), E = w.router.out_features(), k = spec.num_experts_per_tok;
    Tensor router_logits = arena.f32(T, E);
    Tensor topk_w = arena.f32(T, k);
    Tensor topk_ids = arena.take(DType::I32, Shape{T, k});
    // Qwen3.5-MoE always renormalises the top-k weights (hard-coded in its router).
    const bool normalize = spec.norm_topk_prob || spec.family == ModelFamily::kQwen3_5Moe;
    ops.linear(x, w.router, router_logits);
    ops.moe_topk_softmax(router_logits, normalize, topk_w, topk_ids);
    ops.moe_experts(x, topk_w, topk_ids, MoeExpertWeights{w.gate_up, w.down, w.first_expert, E}, out);
    if (w.has_shared) {
        // The shared expert's gate first, so that its down projection can add sigmoid(gate) times its rows into out.
        Tensor gate = arena.f32(T, 1);
        ops.linear(x, w.shared_gate, gate);
        ops.linear_gated_add(mlp_hidden(ops, w.shared, x, arena), w.shared.down, arena.f32(T, x.dim(1)), gate, out);
    }
}

// --- Gated DeltaNet --------------------------------------------------------------------------------------------------

namespace {

struct DeltaDims {
    int64_t H, Hk, Hv, dk, dv, K, Kd, Vd, C, r;
};

DeltaDims delta_dims(const ModelSpec& spec) {
    DeltaDims d{};
    d.H = spec.hidden_size;
    d.Hk = spec.linear_num_key_heads;
    d.Hv = spec.linear_num_value_heads;
    d.dk = spec.linear_key_head_dim;
    d.dv = spec.linear_value_head_dim;
    d.K = spec.linear_conv_kernel_dim;
    d.Kd = d.Hk * d.dk;
    d.Vd = d.Hv * d.dv;
    d.C = 2 * d.Kd + d.Vd;
    d.r = d.Hk > 0 ? d.Hv / d.Hk : 0;
    return d;
}

Status check_delta_dims(const DeltaDims& d) {
    if (d.Hk <= 0 || d.Hv <= 0 || d.dk <= 0 || d.dv <= 0 || d.K <= 1 || d.Hv % d.Hk != 0) {
        return Status::error("linear-attention dimensions in the config are missing or inconsistent (key heads " +
                             std::to_string(d.Hk) + ", value heads " + std::to_string(d.Hv) + ")");
    }
    return ok_status();
}

// Copies `rows` rows of `src` starting at `src_row` to `dst` starting at `dst_row` (same dtype and width).
void copy_rows(const Tensor& dst, int64_t dst_row, const Tensor& src, int64_t src_row, int64_t rows) {
    const size_t row_bytes = static_cast<size_t>(src.dim(1)) * dtype_size(src.dtype());
    std::memcpy(static_cast<std::byte*>(dst.data()) + dst_row * row_bytes,
                static_cast<const std::byte*>(src.data()) + src_row * row_bytes, rows * row_bytes);
}

// Rows `rows` of `tensor` [N, C] (row i of the result is source row rows[i]) in a new tensor [rows, C].
Tensor gathered(WeightLoader& loader, const Tensor& tensor, std::span<const int64_t> rows) {
    const Tensor out = loader.allocate(tensor.dtype(), Shape{static_cast<int64_t>(rows.size()), tensor.dim(1)});
    for (size_t i = 0; i < rows.size(); ++i)
        copy_rows(out, static_cast<int64_t>(i), tensor, rows[i], 1);
    return out;
}

// Rows `rows` of `src` (row i of the result is source row rows[i]) copied into `data` [rows, src's row width] as a
// weight of their own: dense; int4 / int8 (GPTQModel writes Qwen3-Next's in_proj_qkvz so) with their group scales and
// zero points, one row of them an output row; or fp8 with its scales gathered alike. Per-channel scales follow their
// rows and a per-tensor one stays; block scales follow their block rows, which needs every block row of the result to
// take its rows from one block row of the source: Qwen3-Next's q/k/v/z runs of 128 rows fall on 128-row blocks at
// real shapes, and in_proj_ba's 2·Hv rows lie in one block.
Result<LinearWeight> gather_rows(WeightLoader& loader, const LinearWeight& src, std::span<const int64_t> rows,
                                 const Tensor& data, const std::string& name) {
    const int64_t n = static_cast<int64_t>(rows.size());
    for (int64_t i = 0; i < n; ++i)
        copy_rows(data, i, src.data, rows[static_cast<size_t>(i)], 1);
    LinearWeight out = src;
    out.data = data;
    if (src.is_grouped_int()) {  // (an act-order permutation is of the inputs: every row's)
        out.scales = gathered(loader, src.scales, rows);
        if (src.zeros.defined()) out.zeros = gathered(loader, src.zeros, rows);
        return out;
    }
    if (src.format != WeightFormat::kFp8E4M3) return LinearWeight::dense(data);
    const float* from = src.scales.data_as<float>();
    switch (src.scale_layout) {
        case ScaleLayout::kPerChannel:
            out.scales = loader.allocate(DType::F32, Shape{n});
            for (int64_t i = 0; i < n; ++i)
                out.scales.data_as<float>()[i] = from[rows[static_cast<size_t>(i)]];
            break;
        case ScaleLayout::kBlock: {
            const int64_t br = src.block_rows, cols = src.scales.dim(1), blocks = (n + br - 1) / br;
            out.scales = loader.allocate(DType::F32, Shape{blocks, cols});
            for (int64_t j = 0; j < blocks; ++j) {
                const int64_t source_block = rows[static_cast<size_t>(j * br)] / br;
                for (int64_t i = j * br; i < std::min(n, (j + 1) * br); ++i) {
                    if (rows[static_cast<size_t>(i)] / br != source_block) {
                        return Status::error(name + ": its packed parts do not fall on its " + std::to_string(br) +
                                             "-row scale blocks, so they cannot be split apart");
                    }
                }
                std::copy(from + source_block * cols, from + (source_block + 1) * cols,
                          out.scales.data_as<float>() + j * cols);
            }
            break;
        }
        default:
            break;  // one scale for the whole tensor: every row's
    }
    return out;
}

}  // namespace

Status visit_weights(DeltaNetWeights& w, const ModelSpec& spec, DeltaNetLayout layout, const std::string& p,
                     const WeightVisitor& visit) {
    const DeltaDims d = delta_dims(spec);
    // The projections of a packed checkpoint are built by prepare_delta_net; the rest is read by name either way.
    const auto projection = layout == DeltaNetLayout::kPacked ? unpacked_entry : linear_entry;
    // Tensor parallelism splits the heads: a rank keeps its key heads' q and k and its value heads' v, z, b, a, gates
    // and output columns (its value heads read its key heads, as in the whole model); the qkv rows and the conv
    // channels over them are cut part by part, so a rank's [q | k | v] has the whole's layout at its head counts.
    const ShardRole qkv = ShardRole::rows(
        {{SplitUnit::kLinearKeyHeads, d.dk}, {SplitUnit::kLinearKeyHeads, d.dk}, {SplitUnit::kLinearValueHeads, d.dv}});
    const ShardRole value_rows = ShardRole::rows(SplitUnit::kLinearValueHeads, d.dv);
    const ShardRole per_value_head = ShardRole::rows(SplitUnit::kLinearValueHeads);
    constexpr WeightSource f32 = WeightSource::kF32;
    const WeightEntry e[] = {
        projection(p, "in_proj_qkv.weight", w.qkv, Shape{d.C, d.H}, qkv),
        projection(p, "in_proj_z.weight", w.z, Shape{d.Vd, d.H}, value_rows),
        projection(p, "in_proj_b.weight", w.b, Shape{d.Hv, d.H}, per_value_head),
        projection(p, "in_proj_a.weight", w.a, Shape{d.Hv, d.H}, per_value_head),
        tensor_entry(p, "conv1d.weight", w.conv, Shape{d.C, d.K}, f32, qkv, Shape{d.C, 1, d.K}),
        tensor_entry(p, "A_log", w.a_log, Shape{d.Hv}, f32, per_value_head),
        tensor_entry(p, "dt_bias", w.dt_bias, Shape{d.Hv}, f32, per_value_head),
        tensor_entry(p, "norm.weight", w.norm, Shape{d.dv}, f32, ShardRole::replicated()),  // per head, every head
        linear_entry(p, "out_proj.weight", w.out, Shape{d.H, d.Vd},
                     ShardRole::columns(SplitUnit::kLinearValueHeads, d.dv)),
    };
    return visit_all(e, visit);
}

PackedDeltaNetRows packed_delta_net_rows(const ModelSpec& spec) {
    const DeltaDims d = delta_dims(spec);
    const int64_t group = 2 * d.dk + 2 * d.r * d.dv;  // rows per key head: q(dk) k(dk) v(r*dv) z(r*dv)
    PackedDeltaNetRows rows;
    rows.qkvz.resize(static_cast<size_t>(d.C + d.Vd));
    rows.ba.resize(static_cast<size_t>(2 * d.Hv));
    // Value head g*r+j of group g keeps its index, so the split layout (and the shared forward) applies unchanged.
    const auto place = [](std::vector<int64_t>& to, int64_t dst, int64_t src, int64_t n) {
        for (int64_t i = 0; i < n; ++i)
            to[static_cast<size_t>(dst + i)] = src + i;
    };
    for (int64_t g = 0; g < d.Hk; ++g) {
        const int64_t src = g * group;
        place(rows.qkvz, g * d.dk, src, d.dk);
        place(rows.qkvz, d.Kd + g * d.dk, src + d.dk, d.dk);
        place(rows.qkvz, 2 * d.Kd + g * d.r * d.dv, src + 2 * d.dk, d.r * d.dv);
        place(rows.qkvz, d.C + g * d.r * d.dv, src + 2 * d.dk + d.r * d.dv, d.r * d.dv);
        place(rows.ba, g * d.r, g * 2 * d.r, d.r);
        place(rows.ba, d.Hv + g * d.r, g * 2 * d.r + d.r, d.r);
    }
    return rows;
}

Status prepare_delta_net(const ModelSpec& spec, WeightLoader& loader, DeltaNetLayout layout, const std::string& p,
                         DeltaNetWeights& out) {
    const DeltaDims d = delta_dims(spec);
    PAGODA_RETURN_IF_ERROR(check_delta_dims(d));
    if (layout != DeltaNetLayout::kPacked) return ok_status();
    const int64_t group = 2 * d.dk + 2 * d.r * d.dv;  // rows per key head: q(dk) k(dk) v(r*dv) z(r*dv)
    const std::string qkvz_name = p + "in_proj_qkvz.weight", ba_name = p + "in_proj_ba.weight";
    PAGODA_ASSIGN_OR_RETURN(const LinearWeight qkvz, loader.linear(qkvz_name, Shape{d.Hk * group, d.H}));
    PAGODA_ASSIGN_OR_RETURN(const LinearWeight ba, loader.linear(ba_name, Shape{d.Hk * 2 * d.r, d.H}));
    // Re-order once into [q_all | k_all | v_all | z_all] and [b_all | a_all] (packed_delta_net_rows), each part a
    // weight of its own (fp8, int4 and int8 ones with their scales), back to back in one allocation (fuse_projections
    // joins them).
    const PackedDeltaNetRows rows = packed_delta_net_rows(spec);
    const std::span<const int64_t> all(rows.qkvz), pairs(rows.ba);
    // (Rows as stored: H values, or H / 2 bytes of int4.)
    const Tensor split = loader.allocate(qkvz.data.dtype(), Shape{d.C + d.Vd, qkvz.data.dim(1)});
    const Tensor split_ba = loader.allocate(ba.data.dtype(), Shape{2 * d.Hv, ba.data.dim(1)});
    PAGODA_ASSIGN_OR_RETURN(out.qkv,
                            gather_rows(loader, qkvz, all.subspan(0, d.C), split.narrow(0, 0, d.C), qkvz_name));
    PAGODA_ASSIGN_OR_RETURN(out.z,
                            gather_rows(loader, qkvz, all.subspan(d.C, d.Vd), split.narrow(0, d.C, d.Vd), qkvz_name));
    PAGODA_ASSIGN_OR_RETURN(out.b,
                            gather_rows(loader, ba, pairs.subspan(0, d.Hv), split_ba.narrow(0, 0, d.Hv), ba_name));
    PAGODA_ASSIGN_OR_RETURN(
        out.a, gather_rows(loader, ba, pairs.subspan(d.Hv, d.Hv), split_ba.narrow(0, d.Hv, d.Hv), ba_name));
    return ok_status();
}

size_t delta_net_scratch_floats(const ModelSpec& spec) {
    const int64_t Kd = spec.linear_num_key_heads * spec.linear_key_head_dim;
    const int64_t Vd = spec.linear_num_value_heads * spec.linear_value_head_dim;
    const int64_t C = 2 * Kd + Vd;
    return static_cast<size_t>(2 * C + 2 * Vd + 4 * spec.linear_num_value_heads);
}

void delta_net_forward(Ops& ops, const ModelSpec& spec, const DeltaNetWeights& w, const Tensor& x,
                       const ForwardBatch& batch, const Tensor& conv_state, const Tensor& recurrent_state, Arena& arena,
                       const Tensor& out) {
    // Head counts from the weights: this rank's heads when the model is split for tensor parallelism.
    const int64_t T = x.dim(0), dk = spec.linear_key_head_dim, dv = spec.linear_value_head_dim;
    const int64_t Hv = w.b.out_features(), Vd = Hv * dv, C = w.qkv.out_features(), Kd = (C - Vd) / 2, Hk = Kd / dk;

    // The input projections' outputs side by side in one [T, C + Vd + 2 Hv] buffer: mixed qkv | z | b | a.
    const Tensor proj = arena.f32(T, C + Vd + 2 * Hv);
    const Tensor mixed = proj.narrow(1, 0, C), z = proj.narrow(1, C, Vd);
    const Tensor b = proj.narrow(1, C + Vd, Hv), a = proj.narrow(1, C + Vd + Hv, Hv);
    if (w.in_proj.defined()) {
        ops.linear(x, w.in_proj, proj);
    } else {
        ops.linear(x, w.qkv, mixed);
        ops.linear(x, w.z, z);
        ops.linear(x, w.b, b);
        ops.linear(x, w.a, a);
    }

    Tensor conv = arena.f32(T, C);
    ops.causal_conv1d_silu(mixed, w.conv, conv_state, batch, conv);
    Tensor q = heads_view(conv, 0, Hk, dk, dk);
    Tensor k = heads_view(conv, Kd, Hk, dk, dk);
    Tensor v = heads_view(conv, 2 * Kd, Hv, dv, dv);

    Tensor g = arena.f32(T, Hv);
    Tensor beta = arena.f32(T, Hv);
    Tensor o = arena.f32(T, Vd);
    Tensor o3 = o.reshape(Shape{T, Hv, dv});
    ops.gated_delta_net(q, k, v, a, b, w.a_log, w.dt_bias, g, beta, recurrent_state, batch,
                        1.0f / std::sqrt(static_cast<float>(dk)), /*l2_eps=*/1e-6f, o3);
    ops.gated_rms_norm(o3, heads_view(proj, C, Hv, dv, dv), w.norm, static_cast<float>(spec.rms_norm_eps), o3);
    ops.linear(o, w.out, out);
}

}  // namespace pagoda::model
