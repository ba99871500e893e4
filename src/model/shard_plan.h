// Tensor-parallel sharding plan for the Qwen families: which slice of each weight rank r of N holds, as in Megatron-LM
// and vLLM. Column-parallel layers (q/k/v, gate/up, the Gated DeltaNet's input projections, the experts' gate_up)
// split their output features (rows of the [out, in] weight) by attention head, KV head, linear-attention head or MLP
// feature; row-parallel layers (o_proj, down_proj, the DeltaNet's out_proj, the experts' down) split their input
// features (columns), so each rank produces a partial sum that an all-reduce completes. The embedding and the LM head
// split the vocabulary, padded to a multiple of N. Norms, routers and gates are replicated. Pure arithmetic on the
// ModelSpec; tensor_parallel.h cuts the weights.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/model_spec.h"

namespace pagoda::model {

enum class SplitDim {
    kNone,     // replicated: every rank holds the whole tensor
    kRows,     // the output features: dimension 0 of a [out, in] weight or of a vector, dimension 1 of [E, out, in]
    kColumns,  // the input features: the last dimension of a [out, in] or [E, out, in] weight
    kExperts,  // whole experts: dimension 0 of a stacked [E, out, in] weight (expert parallelism)
};

// The part of one checkpoint tensor a rank holds along dimension `dim`: the ranges [begin, begin + length), one after
// another (one range, or one per part of the role). The shard has `padded_length` entries along that dimension; those
// past the ranges' total are zero (vocabulary padding).
struct WeightSlice {
    struct Range {
        int64_t begin = 0;
        int64_t length = 0;
    };
    SplitDim dim = SplitDim::kNone;
    std::vector<Range> ranges;
    int64_t padded_length = 0;

    int64_t length() const;  // the ranges' total
};

// What a split dimension is divided into; each rank holds a contiguous range of these units.
enum class SplitUnit : uint8_t {
    kNone,
    kVocab,             // vocabulary rows, padded to a multiple of N (embedding, LM head)
    kQueryHeads,        // attention heads
    kKvHeads,           // KV heads: split whole, or each held whole by N / num_key_value_heads ranks
    kMlp,               // the dense MLP's intermediate features
    kLinearKeyHeads,    // the Gated DeltaNet's key heads (its q and k)
    kLinearValueHeads,  // the Gated DeltaNet's value heads (its v, z, b, a, gates and output)
    kExpertMlp,         // each routed expert's intermediate features (every rank holds every expert's slice)
    kSharedExpertMlp,   // the shared expert's intermediate features
};

// How tensor parallelism treats one tensor; each weights struct declares it beside the tensor (weight_visitor.h).
enum class Split : uint8_t {
    kReplicated,  // every rank holds the whole tensor (norms, QK-norms, routers, gate parameters)
    kRows,        // the output features by `parts`: a column-parallel layer, its bias, its per-head parameters
    kColumns,     // the input features by `parts`: a row-parallel layer (partial sums, all-reduced)
    kNoRule,      // no split written yet (a new weight before its rule); a split model refuses it
};

// One part of a split dimension: `unit`s of `unit_size` entries each (a head's size for a split by heads).
struct SplitPart {
    SplitUnit unit = SplitUnit::kNone;
    int64_t unit_size = 1;
};

struct ShardRole {
    Split split = Split::kReplicated;
    // What the split dimension is made of, in order: one part for most tensors; several where one tensor stacks
    // differently split things along it (the Gated DeltaNet's qkv rows and conv channels are its q, k and v heads;
    // stacked experts' gate_up rows are the gate features, then the up features). A rank's shard holds its range of
    // each part, in the same order, so the shard has the layout of the whole at the rank's head counts.
    std::array<SplitPart, 3> parts{};
    uint8_t num_parts = 0;

    static constexpr ShardRole replicated() { return {}; }
    static constexpr ShardRole rows(SplitUnit unit, int64_t unit_size = 1) {
        return {Split::kRows, {{{unit, unit_size}}}, 1};
    }
    static constexpr ShardRole rows(std::initializer_list<SplitPart> parts) { return of(Split::kRows, parts); }
    static constexpr ShardRole columns(SplitUnit unit, int64_t unit_size = 1) {
        return {Split::kColumns, {{{unit, unit_size}}}, 1};
    }
    static constexpr ShardRole no_rule() { return {Split::kNoRule, {}, 0}; }
    // Whether ShardPlan::slice can cut a tensor of this role.
    constexpr bool splittable() const { return split != Split::kNoRule; }
    // The first part's unit (the only one of a one-part role).
    constexpr SplitUnit unit() const { return parts[0].unit; }

  private:
    static constexpr ShardRole of(Split split, std::initializer_list<SplitPart> list) {
        ShardRole r{split, {}, 0};
        for (const SplitPart& p : list)
            r.parts.at(r.num_parts++) = p;  // at(): a fourth part is a programmer's error that must stop
        return r;
    }
};
std::string describe(const ShardRole& role);  // "rows by query heads of 128", for messages

// A rank's contiguous range of one split unit: [first, first + count).
struct UnitRange {
    int64_t count = 0;
    int64_t first = 0;
};

struct ShardPlan {
    int size = 1;  // tensor-parallel size N
    int rank = 0;  // 0 .. N-1

    int64_t head_dim = 0;
    int64_t q_heads = 0, first_q_head = 0;    // attention heads of this rank: [first, first + q_heads)
    int64_t kv_heads = 0, first_kv_head = 0;  // KV heads of this rank (1 when they are replicated)
    int64_t kv_replicas = 1;                  // ranks holding each KV head: N / num_kv_heads when N > num_kv_heads
    int64_t intermediate = 0, first_intermediate = 0;  // MLP columns of this rank
    // The Gated DeltaNet's key and value heads of this rank; value head h reads key head h / (value / key heads) on
    // a rank as in the whole model, since both are split into N equal contiguous ranges.
    UnitRange linear_key_heads, linear_value_heads;
    UnitRange expert_intermediate;  // each routed expert's intermediate features of this rank
    // Expert parallelism (vLLM's --enable-expert-parallel): each rank holds whole routed experts, this range of
    // them, instead of a slice of every expert; a tensor whose role splits expert MLP features is then cut along its
    // expert dimension, and the MoE output is a partial sum as before (each rank adds the experts it holds). Without
    // it, every rank holds every expert: experts = {num_experts, 0}.
    bool expert_parallel = false;
    UnitRange experts;
    UnitRange shared_expert_intermediate;  // the shared expert's intermediate features of this rank
    int64_t vocab = 0;                     // the model's vocabulary
    int64_t vocab_per_rank = 0;            // ceil(vocab / N): the padded vocabulary is N times this
    int64_t first_vocab = 0;               // rank * vocab_per_rank

    // Real (unpadded) vocabulary rows of this rank: vocab_per_rank, less on the last ranks when N does not divide V.
    int64_t vocab_rows() const;
    // This rank's slice of a tensor of the given role (with size 1, every split range is the whole tensor).
    // The role must be splittable().
    WeightSlice slice(const ShardRole& role) const;
};

// The plan of `rank` in a group of `size` for a model. size 1 works for every model (nothing is split); larger sizes
// need num_attention_heads divisible by N and N either a divisor or a multiple of num_key_value_heads (KV heads are
// split whole or replicated whole), and N dividing what the model's layers split: intermediate_size (dense MLPs),
// linear_num_key_heads (Gated DeltaNet; the value heads are a multiple of them), moe_intermediate_size (MoE, or
// num_experts with expert_parallel) and shared_expert_intermediate_size (the shared expert is split by features in
// both modes; expert_parallel changes nothing for a model without experts). Errors say which condition fails and
// which sizes would work.
Result<ShardPlan> make_shard_plan(const ModelSpec& spec, int size, int rank, bool expert_parallel = false);

// The tensor-parallel sizes in [1, max_size] that make_shard_plan accepts for this model.
std::vector<int> valid_tensor_parallel_sizes(const ModelSpec& spec, int max_size = 64, bool expert_parallel = false);

}  // namespace pagoda::model
