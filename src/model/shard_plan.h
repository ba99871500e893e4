// Tensor-parallel sharding plan for the dense Qwen families (qwen2, qwen3): which slice of each weight rank r of N
// holds, as in Megatron-LM and vLLM. Column-parallel layers (q/k/v, gate/up) split their output features (rows of
// the [out, in] weight) by attention head, KV head or MLP column; row-parallel layers (o_proj, down_proj) split their
// input features (columns), so each rank produces a partial sum that an all-reduce completes. The embedding and the
// LM head split the vocabulary, padded to a multiple of N. Norms are replicated. Pure arithmetic on the ModelSpec;
// tensor_parallel.h cuts the weights.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/model_spec.h"

namespace pagoda::model {

enum class SplitDim {
    kNone,     // replicated: every rank holds the whole tensor
    kRows,     // dimension 0 (output features of a [out, in] weight; the only dimension of a bias)
    kColumns,  // dimension 1 (input features)
};

// The part of one checkpoint tensor a rank holds: indices [begin, begin + length) of dimension `dim`. The shard has
// `padded_length` entries along that dimension; those past `length` are zero (vocabulary padding).
struct WeightSlice {
    SplitDim dim = SplitDim::kNone;
    int64_t begin = 0;
    int64_t length = 0;
    int64_t padded_length = 0;
};

// What a split dimension is divided into; each rank holds a contiguous range of these units.
enum class SplitUnit : uint8_t {
    kNone,
    kVocab,       // vocabulary rows, padded to a multiple of N (embedding, LM head)
    kQueryHeads,  // attention heads
    kKvHeads,     // KV heads: split whole, or each held whole by N / num_key_value_heads ranks
    kMlp,         // the dense MLP's intermediate features
};

// How tensor parallelism treats one tensor; each weights struct declares it beside the tensor (weight_visitor.h).
enum class Split : uint8_t {
    kReplicated,     // every rank holds the whole tensor (norms, QK-norms, routers, gate parameters)
    kRows,           // dimension 0 by `unit`: the output features of a column-parallel layer, and its bias
    kColumns,        // dimension 1 by `unit`: the input features of a row-parallel layer (partial sums, all-reduced)
    kExpertStacked,  // [E, N, K] routed experts: not split yet (expert parallelism would split E)
    kNoRule,         // no split written yet (Gated DeltaNet, the shared expert); a split model refuses it
};

struct ShardRole {
    Split split = Split::kReplicated;
    SplitUnit unit = SplitUnit::kNone;
    int64_t unit_size = 1;  // entries per unit along the split dimension: a head's size for a split by heads

    static constexpr ShardRole replicated() { return {}; }
    static constexpr ShardRole rows(SplitUnit unit, int64_t unit_size = 1) { return {Split::kRows, unit, unit_size}; }
    static constexpr ShardRole columns(SplitUnit unit, int64_t unit_size = 1) {
        return {Split::kColumns, unit, unit_size};
    }
    static constexpr ShardRole expert_stacked() { return {Split::kExpertStacked, SplitUnit::kNone, 1}; }
    static constexpr ShardRole no_rule() { return {Split::kNoRule, SplitUnit::kNone, 1}; }
    // Whether ShardPlan::slice can cut a tensor of this role.
    constexpr bool splittable() const { return split != Split::kExpertStacked && split != Split::kNoRule; }
};
std::string describe(const ShardRole& role);  // "rows by query heads of 128", for messages

struct ShardPlan {
    int size = 1;  // tensor-parallel size N
    int rank = 0;  // 0 .. N-1

    int64_t head_dim = 0;
    int64_t q_heads = 0, first_q_head = 0;    // attention heads of this rank: [first, first + q_heads)
    int64_t kv_heads = 0, first_kv_head = 0;  // KV heads of this rank (1 when they are replicated)
    int64_t kv_replicas = 1;                  // ranks holding each KV head: N / num_kv_heads when N > num_kv_heads
    int64_t intermediate = 0, first_intermediate = 0;  // MLP columns of this rank
    int64_t vocab = 0;                                 // the model's vocabulary
    int64_t vocab_per_rank = 0;                        // ceil(vocab / N): the padded vocabulary is N times this
    int64_t first_vocab = 0;                           // rank * vocab_per_rank

    // Real (unpadded) vocabulary rows of this rank: vocab_per_rank, less on the last ranks when N does not divide V.
    int64_t vocab_rows() const;
    // This rank's slice of a tensor of the given role (with size 1, every split range is the whole tensor).
    // The role must be splittable().
    WeightSlice slice(const ShardRole& role) const;
};

// The plan of `rank` in a group of `size` for a model. size 1 works for every family (nothing is split); larger
// sizes need a dense qwen2/qwen3 model with num_attention_heads and intermediate_size divisible by N and N either a
// divisor or a multiple of num_key_value_heads (KV heads are split whole or replicated whole). Errors say which
// condition fails and which sizes would work.
Result<ShardPlan> make_shard_plan(const ModelSpec& spec, int size, int rank);

// The tensor-parallel sizes in [1, max_size] that make_shard_plan accepts for this model.
std::vector<int> valid_tensor_parallel_sizes(const ModelSpec& spec, int max_size = 64);

}  // namespace pagoda::model
