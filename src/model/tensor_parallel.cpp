#include "model/tensor_parallel.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace pagoda::model {

namespace {

Tensor allocate_zeros(OwnedWeights& owned, DType dtype, const Shape& shape) {
    Buffer buffer = Buffer::host_zeros(static_cast<size_t>(shape.numel()) * dtype_size(dtype));
    Tensor t = buffer.view(dtype, shape);
    owned.buffers.push_back(std::move(buffer));
    return t;
}

// The slice's ranges along `axis` of `w` (any rank), with `extra_rows` zero entries after the (zero-)padded ones. One
// range along dimension 0 is contiguous, so such a slice without padding is a view; anything else is copied, range
// after range.
Result<Tensor> cut_along(const Tensor& w, int axis, const WeightSlice& s, OwnedWeights& owned, int64_t extra_rows) {
    if (!w.is_host() || !w.is_contiguous() || axis < 0 || axis >= w.rank())
        return Status::error("cannot shard weight " + w.to_string());
    for (const WeightSlice::Range& r : s.ranges) {
        if (r.begin < 0 || r.length < 0 || r.begin + r.length > w.dim(axis)) {
            return Status::error("shard [" + std::to_string(r.begin) + ", +" + std::to_string(r.length) +
                                 ") is outside weight " + w.to_string());
        }
    }
    if (s.padded_length < s.length()) return Status::error("a shard's padded length is less than its ranges");
    const bool one_range = s.ranges.size() == 1 && s.padded_length == s.length() && extra_rows == 0;
    if (one_range && s.ranges[0].begin == 0 && s.ranges[0].length == w.dim(axis)) return w;
    if (one_range && axis == 0) return w.narrow(0, s.ranges[0].begin, s.ranges[0].length);

    // The tensor as [outer, w.dim(axis), inner]: each outer index copies its ranges' runs of `inner` elements.
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d)
        outer *= w.dim(d);
    for (int d = axis + 1; d < w.rank(); ++d)
        inner *= w.dim(d);
    Shape shape = w.shape();
    shape[axis] = s.padded_length + extra_rows;
    Tensor out = allocate_zeros(owned, w.dtype(), shape);
    const size_t elem = dtype_size(w.dtype());
    const auto* src = static_cast<const std::byte*>(w.data());
    auto* dst = static_cast<std::byte*>(out.data());
    for (int64_t o = 0; o < outer; ++o) {
        int64_t at = o * shape[axis];
        for (const WeightSlice::Range& r : s.ranges) {
            std::memcpy(dst + static_cast<size_t>(at * inner) * elem,
                        src + static_cast<size_t>((o * w.dim(axis) + r.begin) * inner) * elem,
                        static_cast<size_t>(r.length * inner) * elem);
            at += r.length;
        }
    }
    return out;
}

// The slice `s` of a checkpoint tensor of rank 1 to 3 along its split dimension (rows: dimension 0, or 1 of stacked
// experts; columns: the last; experts: dimension 0 of stacked experts, so whole experts are a view).
Result<Tensor> cut(const Tensor& w, const WeightSlice& s, OwnedWeights& owned, int64_t extra_rows = 0) {
    if (!w.defined() || s.dim == SplitDim::kNone) return w;
    if (w.rank() < 1 || w.rank() > 3 || (s.dim == SplitDim::kColumns && w.rank() < 2) ||
        (s.dim == SplitDim::kExperts && w.rank() != 3)) {
        return Status::error("cannot shard weight " + w.to_string());
    }
    const int axis = s.dim == SplitDim::kColumns   ? w.rank() - 1
                     : s.dim == SplitDim::kExperts ? 0
                                                   : std::max(w.rank() - 2, 0);
    return cut_along(w, axis, s, owned, extra_rows);
}

// `s` in units of `unit` entries (scale blocks or groups of a dimension of `full` entries): every range must start
// on a unit and end on one or at the end of the dimension.
Result<WeightSlice> in_units(const WeightSlice& s, int64_t unit, int64_t full, const char* what) {
    WeightSlice out = s;
    out.ranges.clear();
    for (const WeightSlice::Range& r : s.ranges) {
        if (r.begin % unit != 0 || (r.length % unit != 0 && r.begin + r.length != full)) {
            return Status::error("its " + std::string(what) + " [" + std::to_string(r.begin) + ", +" +
                                 std::to_string(r.length) + ") do not fall on its " + std::to_string(unit) +
                                 "-wide scale blocks or groups");
        }
        out.ranges.push_back({r.begin / unit, (r.length + unit - 1) / unit});
    }
    out.padded_length = out.length();
    return out;
}

// Block scales [.., ceil(full / unit), ..] said once per entry of `axis` instead ([.., full, ..]: entry i takes block
// i / unit's scale): the same scale for every weight, so a cut through a block keeps each weight's scale.
Tensor per_entry_scales(const Tensor& scales, int axis, int64_t unit, int64_t full, OwnedWeights& owned) {
    Shape shape = scales.shape();
    shape[axis] = full;
    Tensor out = allocate_zeros(owned, DType::F32, shape);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d)
        outer *= scales.dim(d);
    for (int d = axis + 1; d < scales.rank(); ++d)
        inner *= scales.dim(d);
    const float* src = scales.data_as<float>();
    float* dst = out.data_as<float>();
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < full; ++i)
            std::copy_n(src + (o * scales.dim(axis) + i / unit) * inner, inner, dst + (o * full + i) * inner);
    return out;
}

// A quantized weight's shard: its data as a dense one's, and its scales (and int4 zero points) cut where the data's
// cut crosses them. The scales mirror the data's layout (linear_weight.h: [nb, kb] / [N] / [1], with a leading E
// for stacked experts), so a cut of rows takes the scale rows of those rows, a cut of columns the scale columns of
// those columns (per-tensor and per-channel scales have none), and a cut of experts those experts' scales.
Status cut_quantized(LinearWeight& w, const WeightSlice& s, OwnedWeights& owned) {
    if (s.padded_length != s.length()) return Status::error("a padded shard of a quantized weight is not supported");
    if (w.input_perm.defined() && s.dim == SplitDim::kColumns) {
        // A rank's inputs are a range of the layer's, but the act-order layout holds them scattered by input_perm:
        // the cut would need the permutation's own shard and a re-sort. Not built.
        return Status::error("act-order GPTQ weights (" + w.describe() +
                             ") cut along their inputs (row-parallel o_proj / down_proj with -tp > 1) are not served "
                             "yet; serve this checkpoint with -tp 1");
    }
    const bool int4 = w.format == WeightFormat::kInt4;
    const bool fp8_block = w.format == WeightFormat::kFp8E4M3 && w.scale_layout == ScaleLayout::kBlock;
    const int64_t N = w.out_features(), K = w.in_features();
    WeightSlice scale_slice;
    int scale_axis = 0;
    bool cut_scales = true;
    switch (s.dim) {
        case SplitDim::kNone:
            return ok_status();
        case SplitDim::kExperts:
            scale_slice = s;  // every layout's stacked scales start with E
            break;
        case SplitDim::kRows: {
            if (w.scale_layout == ScaleLayout::kPerTensor) {
                cut_scales = false;
                break;
            }
            scale_axis = w.scale_layout == ScaleLayout::kPerChannel ? w.scales.rank() - 1 : w.scales.rank() - 2;
            if (fp8_block && !in_units(s, w.block_rows, N, "rows").ok()) {
                // A cut through 128-row blocks (Qwen3-30B-A3B's 768 expert features over 4 ranks): one scale a row.
                w.scales = per_entry_scales(w.scales, scale_axis, w.block_rows, N, owned);
                w.block_rows = 1;
            }
            const int64_t unit = w.scale_layout == ScaleLayout::kBlock ? w.block_rows : 1;
            PAGODA_ASSIGN_OR_RETURN(scale_slice, in_units(s, unit, N, "rows"));
            break;
        }
        case SplitDim::kColumns: {
            if (w.scale_layout == ScaleLayout::kPerTensor || w.scale_layout == ScaleLayout::kPerChannel) {
                cut_scales = false;
                break;
            }
            scale_axis = w.scales.rank() - 1;
            if (fp8_block && !in_units(s, w.block_cols, K, "columns").ok()) {  // likewise one scale a column
                w.scales = per_entry_scales(w.scales, scale_axis, w.block_cols, K, owned);
                w.block_cols = 1;
            }
            const int64_t unit = w.scale_layout == ScaleLayout::kBlock ? w.block_cols : w.group_size;
            PAGODA_ASSIGN_OR_RETURN(scale_slice, in_units(s, unit, K, "columns"));
            break;
        }
    }
    if (int4 && s.dim == SplitDim::kColumns) {  // two inputs a byte: the data's columns are bytes
        WeightSlice bytes = s;
        for (WeightSlice::Range& r : bytes.ranges) {
            if (r.begin % 2 != 0 || r.length % 2 != 0) return Status::error("an int4 cut at an odd column");
            r.begin /= 2, r.length /= 2;
        }
        bytes.padded_length = bytes.length();
        PAGODA_ASSIGN_OR_RETURN(w.data, cut_along(w.data, w.data.rank() - 1, bytes, owned, 0));
    } else {
        PAGODA_ASSIGN_OR_RETURN(w.data, cut(w.data, s, owned));
    }
    if (!cut_scales) return ok_status();
    PAGODA_ASSIGN_OR_RETURN(w.scales, cut_along(w.scales, scale_axis, scale_slice, owned, 0));
    if (w.zeros.defined()) {
        PAGODA_ASSIGN_OR_RETURN(w.zeros, cut_along(w.zeros, scale_axis, scale_slice, owned, 0));
    }
    return ok_status();
}

}  // namespace

Result<Tensor> cut_tensor(const Tensor& t, const WeightSlice& s, OwnedWeights& owned) {
    return cut(t, s, owned);
}

Status shard_weights(const ModelSpec& spec, const ShardPlan& plan, ModelWeights& w) {
    if (plan.size == 1) return ok_status();
    OwnedWeights& owned = w.owned;
    const bool tied = w.lm_head.data.data() == w.embed.data();
    for (LayerWeights& layer : w.layers)  // the experts each MoE layer keeps (all of them without expert parallelism)
        layer.moe.first_expert = plan.experts.first;
    // Each tensor as its struct declares it (visit_weights): replicated ones stay, split ones are cut.
    return visit_weights(w, spec, [&](const WeightEntry& e) -> Status {
        Tensor& t = e.data();
        if (!t.defined() || e.role.split == Split::kReplicated) return ok_status();
        if (!e.role.splittable()) {
            return Status::error(e.name + ": tensor parallelism cannot split it yet (" + describe(e.role) + ")");
        }
        if (tied && e.linear == &w.lm_head) {  // a view of the embedding's shard, which was cut just before
            t = w.embed.narrow(0, 0, plan.vocab_per_rank);
            return ok_status();
        }
        if (e.linear != nullptr && !e.linear->is_dense()) {
            Status cut_status = cut_quantized(*e.linear, plan.slice(e.role), owned);
            if (!cut_status.ok())
                return Status::error(e.name + ": tensor parallelism cannot split this " + e.linear->describe() +
                                     " weight as " + describe(e.role) + ": " + cut_status.message());
            return ok_status();
        }
        // The embedding keeps one zero row past its padded shard: the row ids of other ranks read (embed_tokens).
        const int64_t extra_rows = &t == &w.embed ? 1 : 0;
        auto shard = cut(t, plan.slice(e.role), owned, extra_rows);
        if (!shard.ok()) return shard.status().with_context(e.name);
        t = std::move(shard).value();
        return ok_status();
    });
}

void embed_tokens(Ops& ops, Communicator& comm, const ShardPlan& plan, const Tensor& table,
                  std::span<const int32_t> ids, std::vector<int32_t>& local_ids, const Tensor& out) {
    if (plan.size == 1) return ops.embedding(table, ids, out);
    const int64_t first = plan.first_vocab, rows = plan.vocab_rows();
    const auto zero_row = static_cast<int32_t>(plan.vocab_per_rank);
    local_ids.resize(ids.size());
    for (size_t t = 0; t < ids.size(); ++t) {
        const int64_t local = ids[t] - first;
        local_ids[t] = local >= 0 && local < rows ? static_cast<int32_t>(local) : zero_row;
    }
    ops.embedding(table, local_ids, out);
    comm.all_reduce_sum(out);
}

size_t logits_scratch_bytes(const ShardPlan& plan, int64_t rows) {
    if (plan.size == 1) return 0;
    // This rank's [R, V/N] and the gathered [N, R, V/N], each with the arena's alignment slack.
    return static_cast<size_t>(rows * plan.vocab_per_rank) * (plan.size + 1) * sizeof(float) + 2 * 64;
}

void compute_logits(Ops& ops, Communicator& comm, const ShardPlan& plan, const Tensor& rows,
                    const LinearWeight& lm_head, Arena& arena, const Tensor& logits) {
    if (plan.size == 1) return ops.linear(rows, lm_head, logits);
    const int64_t R = rows.dim(0), Vs = plan.vocab_per_rank, V = logits.dim(1);
    Tensor local = arena.f32(R, Vs);
    ops.linear(rows, lm_head, local);
    Tensor gathered = arena.take(DType::F32, Shape{plan.size, R, Vs});
    comm.all_gather(local, gathered);
    // gathered[r] holds columns [r*Vs, (r+1)*Vs) of the padded vocabulary; the padding columns are dropped.
    for (int r = 0; r < plan.size; ++r) {
        const int64_t begin = r * Vs, width = std::min(Vs, V - begin);
        if (width <= 0) break;
        ops.copy(logits.narrow(1, begin, width), gathered.select(r).narrow(1, 0, width));
    }
}

}  // namespace pagoda::model
