#include "model/shard_plan.h"

#include <algorithm>
#include <string>

#include "common/check.h"

namespace pagoda::model {

namespace {

const char* unit_name(SplitUnit unit) {
    switch (unit) {
        case SplitUnit::kNone:
            return "";
        case SplitUnit::kVocab:
            return "vocabulary";
        case SplitUnit::kQueryHeads:
            return "query heads";
        case SplitUnit::kKvHeads:
            return "KV heads";
        case SplitUnit::kMlp:
            return "MLP features";
        case SplitUnit::kLinearKeyHeads:
            return "linear-attention key heads";
        case SplitUnit::kLinearValueHeads:
            return "linear-attention value heads";
        case SplitUnit::kExpertMlp:
            return "expert MLP features";
        case SplitUnit::kSharedExpertMlp:
            return "shared-expert MLP features";
    }
    return "?";
}

}  // namespace

std::string describe(const ShardRole& role) {
    std::string by;
    for (int i = 0; i < role.num_parts; ++i) {
        const SplitPart& part = role.parts[static_cast<size_t>(i)];
        by += (i > 0 ? ", then " : "") + std::string(unit_name(part.unit)) +
              (part.unit_size > 1 ? " of " + std::to_string(part.unit_size) : "");
    }
    switch (role.split) {
        case Split::kReplicated:
            return "replicated";
        case Split::kRows:
            return "rows by " + by;
        case Split::kColumns:
            return "columns by " + by;
        case Split::kNoRule:
            return "no tensor-parallel split";
    }
    return "?";
}

int64_t WeightSlice::length() const {
    int64_t total = 0;
    for (const Range& r : ranges)
        total += r.length;
    return total;
}

int64_t ShardPlan::vocab_rows() const {
    return std::clamp<int64_t>(vocab - first_vocab, 0, vocab_per_rank);
}

namespace {

// The rank's range of a unit (not the vocabulary), and how many units the whole dimension part has.
struct UnitSplit {
    UnitRange range;
    int64_t total = 0;
};
UnitSplit split_of(const ShardPlan& p, SplitUnit unit) {
    const auto even = [&p](UnitRange r) { return UnitSplit{r, r.count * p.size}; };
    switch (unit) {
        case SplitUnit::kQueryHeads:
            return even({p.q_heads, p.first_q_head});
        case SplitUnit::kKvHeads:  // kv_replicas ranks hold each head
            return {{p.kv_heads, p.first_kv_head}, p.kv_heads * p.size / p.kv_replicas};
        case SplitUnit::kMlp:
            return even({p.intermediate, p.first_intermediate});
        case SplitUnit::kLinearKeyHeads:
            return even(p.linear_key_heads);
        case SplitUnit::kLinearValueHeads:
            return even(p.linear_value_heads);
        case SplitUnit::kExpertMlp:
            return even(p.expert_intermediate);
        case SplitUnit::kSharedExpertMlp:
            return even(p.shared_expert_intermediate);
        case SplitUnit::kNone:
        case SplitUnit::kVocab:
            break;
    }
    PAGODA_CHECK_MSG(false, "no even split for this unit");
    return {};
}

}  // namespace

WeightSlice ShardPlan::slice(const ShardRole& role) const {
    PAGODA_CHECK_MSG(role.splittable(), "no slice for a tensor that tensor parallelism does not split");
    if (role.split == Split::kReplicated || role.num_parts == 0) return {};
    WeightSlice s;
    if (expert_parallel && role.unit() == SplitUnit::kExpertMlp) {  // whole experts instead of every expert's slice
        s.dim = SplitDim::kExperts;
        s.ranges.push_back({experts.first, experts.count});
        s.padded_length = experts.count;
        return s;
    }
    s.dim = role.split == Split::kRows ? SplitDim::kRows : SplitDim::kColumns;
    if (role.unit() == SplitUnit::kVocab) {  // padded: the last ranks' shards end in zero rows
        PAGODA_CHECK_MSG(role.num_parts == 1, "a vocabulary split has one part");
        const int64_t u = role.parts[0].unit_size;
        s.ranges.push_back({first_vocab * u, vocab_rows() * u});
        s.padded_length = vocab_per_rank * u;
        return s;
    }
    // Part after part: each part starts where the whole of the parts before it ends.
    int64_t part_begin = 0;
    for (int i = 0; i < role.num_parts; ++i) {
        const SplitPart& part = role.parts[static_cast<size_t>(i)];
        const UnitSplit units = split_of(*this, part.unit);
        s.ranges.push_back({part_begin + units.range.first * part.unit_size, units.range.count * part.unit_size});
        part_begin += units.total * part.unit_size;
    }
    s.padded_length = s.length();
    return s;
}

namespace {

// "NAME (value) is not divisible by the tensor-parallel size N", or an empty string when it is (and positive).
std::string indivisible(const char* name, int64_t value, int64_t n) {
    if (value > 0 && value % n == 0) return {};
    return std::string(name) + " (" + std::to_string(value) + ") is not divisible by the tensor-parallel size " +
           std::to_string(n);
}

bool has_dense_mlp(const ModelSpec& spec) {
    return std::any_of(spec.layers.begin(), spec.layers.end(),
                       [](const LayerSpec& l) { return l.mlp == MlpKind::kDense; });
}

// Why `size` cannot split this model, or an empty string when it can.
std::string why_not(const ModelSpec& spec, int size, bool expert_parallel) {
    if (size == 1) return {};
    const int64_t n = size, nq = spec.num_attention_heads, nkv = spec.num_key_value_heads;
    if (spec.num_full_attention_layers() > 0) {
        if (nq <= 0 || nkv <= 0 || nq % nkv != 0) {
            return "the config's attention heads (" + std::to_string(nq) + ") and KV heads (" + std::to_string(nkv) +
                   ") are inconsistent";
        }
        if (std::string why = indivisible("num_attention_heads", nq, n); !why.empty()) return why;
        if (nkv >= n ? nkv % n != 0 : n % nkv != 0) {
            return "the tensor-parallel size " + std::to_string(n) + " is neither a divisor nor a multiple of " +
                   "num_key_value_heads (" + std::to_string(nkv) + "); KV heads are split or replicated whole";
        }
    }
    if (spec.num_linear_attention_layers() > 0) {
        const int64_t hk = spec.linear_num_key_heads, hv = spec.linear_num_value_heads;
        if (hk <= 0 || hv <= 0 || hv % hk != 0) {
            return "the config's linear-attention key heads (" + std::to_string(hk) + ") and value heads (" +
                   std::to_string(hv) + ") are inconsistent";
        }
        // The value heads are a multiple of the key heads, so they split too, each rank's reading its own key heads.
        if (std::string why = indivisible("linear_num_key_heads", hk, n); !why.empty()) return why;
    }
    if (has_dense_mlp(spec)) {
        if (std::string why = indivisible("intermediate_size", spec.intermediate_size, n); !why.empty()) return why;
    }
    if (spec.has_moe()) {
        // Expert parallelism gives each rank whole experts; otherwise each rank holds a slice of every expert.
        if (std::string why = expert_parallel ? indivisible("num_experts", spec.num_experts, n)
                                              : indivisible("moe_intermediate_size", spec.moe_intermediate_size, n);
            !why.empty())
            return why;
        if (spec.shared_expert_intermediate_size > 0) {
            if (std::string why =
                    indivisible("shared_expert_intermediate_size", spec.shared_expert_intermediate_size, n);
                !why.empty())
                return why;
        }
    }
    return {};
}

}  // namespace

std::vector<int> valid_tensor_parallel_sizes(const ModelSpec& spec, int max_size, bool expert_parallel) {
    std::vector<int> sizes;
    for (int n = 1; n <= max_size; ++n)
        if (why_not(spec, n, expert_parallel).empty()) sizes.push_back(n);
    return sizes;
}

Result<ShardPlan> make_shard_plan(const ModelSpec& spec, int size, int rank, bool expert_parallel) {
    if (size < 1) return Status::error("the tensor-parallel size must be at least 1, got " + std::to_string(size));
    if (rank < 0 || rank >= size) {
        return Status::error("rank " + std::to_string(rank) + " is outside a tensor-parallel group of " +
                             std::to_string(size));
    }
    if (std::string why = why_not(spec, size, expert_parallel); !why.empty()) {
        std::string valid;
        for (int n : valid_tensor_parallel_sizes(spec, 64, expert_parallel))
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
    if (n == 1 || n <= spec.num_key_value_heads || spec.num_key_value_heads <= 0) {  // <= 0: no full attention
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
    // Every rank the same share of each (why_not checked that N divides those the model has; the others are 0).
    const auto share = [n, r](int64_t total) { return UnitRange{total / n, r * (total / n)}; };
    p.linear_key_heads = share(spec.linear_num_key_heads);
    p.linear_value_heads = share(spec.linear_num_value_heads);
    p.expert_parallel = expert_parallel && spec.has_moe();  // a model without experts has nothing to place
    p.expert_intermediate =
        p.expert_parallel ? UnitRange{spec.moe_intermediate_size, 0} : share(spec.moe_intermediate_size);
    p.experts = p.expert_parallel ? share(spec.num_experts) : UnitRange{spec.num_experts, 0};
    p.shared_expert_intermediate = share(spec.shared_expert_intermediate_size);
    p.vocab = spec.vocab_size;
    p.vocab_per_rank = (spec.vocab_size + n - 1) / n;
    p.first_vocab = r * p.vocab_per_rank;
    return p;
}

}  // namespace pagoda::model
