// Tensor-parallel sharding plan for the dense Qwen families (qwen2, qwen3): which slice of each weight rank r of N
// holds, as in Megatron-LM and vLLM. Column-parallel layers (q/k/v, gate/up) split their output features (rows of
// the [out, in] weight) by attention head, KV head or MLP column; row-parallel layers (o_proj, down_proj) split their
// input features (columns), so each rank produces a partial sum that an all-reduce completes. The embedding and the
// LM head split the vocabulary, padded to a multiple of N. Norms are replicated. Pure arithmetic on the ModelSpec;
// tensor_parallel.h cuts the weights.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/model_spec.h"

namespace pagoda::model {

// The weights of a dense decoder, named by how they are split.
enum class WeightRole {
    kEmbedding,  // [V, H]
    kLmHead,     // [V, H] (the embedding itself when tied)
    kFinalNorm,  // [H]
    kInputNorm,  // [H] per layer
    kPostNorm,   // [H] per layer
    kQProj,      // [nq*hd, H]
    kKProj,      // [nkv*hd, H]
    kVProj,      // [nkv*hd, H]
    kOProj,      // [H, nq*hd]
    kQBias,      // [nq*hd] (qwen2)
    kKBias,      // [nkv*hd]
    kVBias,      // [nkv*hd]
    kQNorm,      // [hd] (qwen3)
    kKNorm,      // [hd]
    kGateProj,   // [I, H]
    kUpProj,     // [I, H]
    kDownProj,   // [H, I]
};
inline constexpr WeightRole kAllWeightRoles[] = {
    WeightRole::kEmbedding, WeightRole::kLmHead,  WeightRole::kFinalNorm, WeightRole::kInputNorm, WeightRole::kPostNorm,
    WeightRole::kQProj,     WeightRole::kKProj,   WeightRole::kVProj,     WeightRole::kOProj,     WeightRole::kQBias,
    WeightRole::kKBias,     WeightRole::kVBias,   WeightRole::kQNorm,     WeightRole::kKNorm,     WeightRole::kGateProj,
    WeightRole::kUpProj,    WeightRole::kDownProj};
std::string_view role_name(WeightRole role);  // "q_proj"

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
    // This rank's slice of a weight of the given role (with size 1, every split range is the whole tensor).
    WeightSlice slice(WeightRole role) const;
};

// The plan of `rank` in a group of `size` for a model. size 1 works for every family (nothing is split); larger
// sizes need a dense qwen2/qwen3 model with num_attention_heads and intermediate_size divisible by N and N either a
// divisor or a multiple of num_key_value_heads (KV heads are split whole or replicated whole). Errors say which
// condition fails and which sizes would work.
Result<ShardPlan> make_shard_plan(const ModelSpec& spec, int size, int rank);

// The tensor-parallel sizes in [1, max_size] that make_shard_plan accepts for this model.
std::vector<int> valid_tensor_parallel_sizes(const ModelSpec& spec, int max_size = 64);

}  // namespace pagoda::model
