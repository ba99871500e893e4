#include "model/shard_plan.h"

#include <algorithm>
#include <string>

namespace pagoda::model {

std::string_view role_name(WeightRole role) {
    switch (role) {
        case WeightRole::kEmbedding:
            return "embed_tokens";
        case WeightRole::kLmHead:
            return "lm_head";
        case WeightRole::kFinalNorm:
            return "norm";
        case WeightRole::kInputNorm:
            return "input_layernorm";
        case WeightRole::kPostNorm:
            return "post_attention_layernorm";
        case WeightRole::kQProj:
            return "q_proj";
        case WeightRole::kKProj:
            return "k_proj";
        case WeightRole::kVProj:
            return "v_proj";
        case WeightRole::kOProj:
            return "o_proj";
        case WeightRole::kQBias:
            return "q_proj.bias";
        case WeightRole::kKBias:
            return "k_proj.bias";
        case WeightRole::kVBias:
            return "v_proj.bias";
        case WeightRole::kQNorm:
            return "q_norm";
        case WeightRole::kKNorm:
            return "k_norm";
        case WeightRole::kGateProj:
            return "gate_proj";
        case WeightRole::kUpProj:
            return "up_proj";
        case WeightRole::kDownProj:
            return "down_proj";
    }
    return "?";
}

int64_t ShardPlan::vocab_rows() const {
    return std::clamp<int64_t>(vocab - first_vocab, 0, vocab_per_rank);
}

WeightSlice ShardPlan::slice(WeightRole role) const {
    const WeightSlice q_rows{SplitDim::kRows, first_q_head * head_dim, q_heads * head_dim, q_heads * head_dim};
    const WeightSlice kv_rows{SplitDim::kRows, first_kv_head * head_dim, kv_heads * head_dim, kv_heads * head_dim};
    const WeightSlice mlp_rows{SplitDim::kRows, first_intermediate, intermediate, intermediate};
    switch (role) {
        case WeightRole::kEmbedding:
        case WeightRole::kLmHead:
            return {SplitDim::kRows, first_vocab, vocab_rows(), vocab_per_rank};
        case WeightRole::kQProj:
        case WeightRole::kQBias:
            return q_rows;
        case WeightRole::kKProj:
        case WeightRole::kVProj:
        case WeightRole::kKBias:
        case WeightRole::kVBias:
            return kv_rows;
        case WeightRole::kOProj:
            return {SplitDim::kColumns, q_rows.begin, q_rows.length, q_rows.length};
        case WeightRole::kGateProj:
        case WeightRole::kUpProj:
            return mlp_rows;
        case WeightRole::kDownProj:
            return {SplitDim::kColumns, mlp_rows.begin, mlp_rows.length, mlp_rows.length};
        case WeightRole::kFinalNorm:
        case WeightRole::kInputNorm:
        case WeightRole::kPostNorm:
        case WeightRole::kQNorm:
        case WeightRole::kKNorm:
            return {};
    }
    return {};
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
