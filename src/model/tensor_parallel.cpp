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

// The slice `s` of a rank-1 or rank-2 checkpoint tensor, with `extra_rows` zero rows after the (zero-)padded rows.
// Whole rows are contiguous, so a row slice without padding is a view; anything else is copied.
Result<Tensor> cut(const Tensor& w, const WeightSlice& s, OwnedWeights& owned, int64_t extra_rows = 0) {
    if (!w.defined() || s.dim == SplitDim::kNone) return w;
    if (!w.is_host() || !w.is_contiguous() || w.rank() > 2 || (s.dim == SplitDim::kColumns && w.rank() != 2)) {
        return Status::error("cannot shard weight " + w.to_string());
    }
    const int axis = s.dim == SplitDim::kRows ? 0 : 1;
    if (s.begin < 0 || s.length < 0 || s.begin + s.length > w.dim(axis) || s.padded_length < s.length) {
        return Status::error("shard [" + std::to_string(s.begin) + ", +" + std::to_string(s.length) +
                             ") is outside weight " + w.to_string());
    }
    if (axis == 0 && s.length == s.padded_length && extra_rows == 0) return w.narrow(0, s.begin, s.length);
    if (axis == 1 && s.length == w.dim(1)) return w;

    const size_t elem = dtype_size(w.dtype());
    const int64_t cols = w.rank() == 2 ? w.dim(1) : 1;
    const auto* src = static_cast<const std::byte*>(w.data());
    if (axis == 0) {
        Shape shape = w.shape();
        shape[0] = s.padded_length + extra_rows;
        Tensor out = allocate_zeros(owned, w.dtype(), shape);
        std::memcpy(out.data(), src + static_cast<size_t>(s.begin * cols) * elem,
                    static_cast<size_t>(s.length * cols) * elem);
        return out;
    }
    Tensor out = allocate_zeros(owned, w.dtype(), Shape{w.dim(0), s.length});
    auto* dst = static_cast<std::byte*>(out.data());
    for (int64_t row = 0; row < w.dim(0); ++row) {
        std::memcpy(dst + static_cast<size_t>(row * s.length) * elem,
                    src + static_cast<size_t>(row * cols + s.begin) * elem, static_cast<size_t>(s.length) * elem);
    }
    return out;
}

}  // namespace

Status shard_weights(const ModelSpec& spec, const ShardPlan& plan, ModelWeights& w) {
    if (plan.size == 1) return ok_status();
    for (size_t i = 0; i < w.layers.size(); ++i) {
        if (w.layers[i].attention != AttentionKind::kFull || w.layers[i].mlp != MlpKind::kDense) {
            return Status::error("layer " + std::to_string(i) +
                                 ": tensor parallelism supports dense full-attention layers only");
        }
    }
    OwnedWeights& owned = w.owned;
    const bool tied = w.lm_head.data.data() == w.embed.data();
    // Each tensor as its struct declares it (visit_weights): replicated ones stay, split ones are cut.
    return visit_weights(w, spec, [&](const WeightEntry& e) -> Status {
        Tensor& t = e.data();
        if (!t.defined() || e.role.split == Split::kReplicated) return ok_status();
        if (e.linear != nullptr && !e.linear->is_dense()) {
            return Status::error(e.name + ": tensor parallelism of " + e.linear->describe() +
                                 " weights is not supported");
        }
        if (!e.role.splittable()) {
            return Status::error(e.name + ": tensor parallelism cannot split it yet (" + describe(e.role) + ")");
        }
        if (tied && e.linear == &w.lm_head) {  // a view of the embedding's shard, which was cut just before
            t = w.embed.narrow(0, 0, plan.vocab_per_rank);
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
