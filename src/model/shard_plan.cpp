#include "model/shard_plan.h"

#include <algorithm>
#include <string>

#include "common/check.h"

namespace pagoda::model {

std::string describe(const ShardRole& role) {
    const char* unit = "";
    switch (role.unit) {
        case SplitUnit::kNone:
            break;
        case SplitUnit::kVocab:
            unit = "vocabulary";
            break;
        case SplitUnit::kQueryHeads:
            unit = "query heads";
            break;
        case SplitUnit::kKvHeads:
            unit = "KV heads";
            break;
        case SplitUnit::kMlp:
            unit = "MLP features";
            break;
    }
    const std::string by = std::string(unit) + (role.unit_size > 1 ? " of " + std::to_string(role.unit_size) : "");
    switch (role.split) {
        case Split::kReplicated:
            return "replicated";
        case Split::kRows:
            return "rows by " + by;
        case Split::kColumns:
            return "columns by " + by;
        case Split::kExpertStacked:
            return "stacked experts";
        case Split::kNoRule:
            return "no tensor-parallel split";
    }
    return "?";
}

int64_t ShardPlan::vocab_rows() const {
    return std::clamp<int64_t>(vocab - first_vocab, 0, vocab_per_rank);
}

WeightSlice ShardPlan::slice(const ShardRole& role) const {
    PAGODA_CHECK_MSG(role.splittable(), "no slice for a tensor that tensor parallelism does not split");
    if (role.split == Split::kReplicated) return {};
    const SplitDim dim = role.split == Split::kRows ? SplitDim::kRows : SplitDim::kColumns;
    int64_t first = 0, count = 0;
    switch (role.unit) {
        case SplitUnit::kVocab:  // padded: the last ranks' shards end in zero rows
            return {dim, first_vocab * role.unit_size, vocab_rows() * role.unit_size, vocab_per_rank * role.unit_size};
        case SplitUnit::kQueryHeads:
            first = first_q_head, count = q_heads;
            break;
        case SplitUnit::kKvHeads:
            first = first_kv_head, count = kv_heads;
            break;
        case SplitUnit::kMlp:
            first = first_intermediate, count = intermediate;
            break;
        case SplitUnit::kNone:
            return {};
    }
    return {dim, first * role.unit_size, count * role.unit_size, count * role.unit_size};
}

namespace {

// Why `size` cannot split this model, or an empty string when it can.
std::string why_not(const ModelSpec& spec, int size) {
    if (size == 1) return {};
    if (spec.family != ModelFamily::kQwen2 && spec.family != ModelFamily::kQwen3) {
        return "tensor parallelism supports the dense qwen2/qwen3 models only, not " +
               std::string(family_name(spec.family));
    }
    const int64_t n = size, nq = spec.num_attention_heads, nkv = spec.num_key_value_heads;
    if (nq <= 0 || nkv <= 0 || nq % nkv != 0) {
        return "the config's attention heads (" + std::to_string(nq) + ") and KV heads (" + std::to_string(nkv) +
               ") are inconsistent";
    }
    if (nq % n != 0) {
        return "num_attention_heads (" + std::to_string(nq) + ") is not divisible by the tensor-parallel size " +
               std::to_string(n);
    }
    if (nkv >= n ? nkv % n != 0 : n % nkv != 0) {
        return "the tensor-parallel size " + std::to_string(n) + " is neither a divisor nor a multiple of " +
               "num_key_value_heads (" + std::to_string(nkv) + "); KV heads are split or replicated whole";
    }
    if (spec.intermediate_size <= 0 || spec.intermediate_size % n != 0) {
        return "intermediate_size (" + std::to_string(spec.intermediate_size) +
               ") is not divisible by the tensor-parallel size " + std::to_string(n);
    }
    return {};
}

}  // namespace

std::vector<int> valid_tensor_parallel_sizes(const ModelSpec& spec, int max_size) {
    std::vector<int> sizes;
    for (int n = 1; n <= max_size; ++n)
        if (why_not(spec, n).empty()) sizes.push_back(n);
    return sizes;
}

Result<ShardPlan> make_shard_plan(const ModelSpec& spec, int size, int rank) {
    if (size < 1) return Status::error("the tensor-parallel size must be at least 1, got " + std::to_string(size));
    if (rank < 0 || rank >= size) {
        return Status::error("rank " + std::to_string(rank) + " is outside a tensor-parallel group of " +
                             std::to_string(size));
    }
    if (std::string why = why_not(spec, size); !why.empty()) {
        std::string valid;
        for (int n : valid_tensor_parallel_sizes(spec))
            valid += (valid.empty() ? "" : ", ") + std::to_string(n);
        return Status::error(why + " (sizes that work for this model: " + valid + ")");
    }
    ShardPlan p;
    p.size = size;
    p.rank = rank;
    const int64_t n = size, r = rank;
    p.head_dim = spec.head_dim;
    p.q_heads = spec.num_attention_heads / n;
    p.first_q_head = r * p.q_heads;
    if (n == 1 || n <= spec.num_key_value_heads) {
        p.kv_heads = spec.num_key_value_heads / n;
        p.first_kv_head = r * p.kv_heads;
    } else {
        // More ranks than KV heads: each rank keeps the one KV head its query heads read, consecutive ranks share it.
        p.kv_replicas = n / spec.num_key_value_heads;
        p.kv_heads = 1;
        p.first_kv_head = r / p.kv_replicas;
    }
    p.intermediate = spec.intermediate_size / n;
    p.first_intermediate = r * p.intermediate;
    p.vocab = spec.vocab_size;
    p.vocab_per_rank = (spec.vocab_size + n - 1) / n;
    p.first_vocab = r * p.vocab_per_rank;
    return p;
}

}  // namespace pagoda::model
