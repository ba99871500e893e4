// Tensor parallelism inside the model: cutting a loaded model's weights down to one rank's shard (the slices of
// shard_plan.h), and the two vocab-parallel steps of the forward pass. The all-reduces after each layer's mixer
// (o_proj, the Gated DeltaNet's out_proj) and its MLP or MoE are one line each in Model::forward. With a size-1 plan
// everything here is the plain operation, so a model that is not split runs exactly the code it ran before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "model/arch/arch.h"
#include "model/shard_plan.h"
#include "runtime/communicator.h"
#include "runtime/ops.h"

namespace pagoda::model {

// Replaces every weight by this rank's shard, in place, before the weights go to a device, walking the weights as
// their structs declare them (visit_weights) and cutting each by its ShardRole: a slice of one range of a matrix's
// rows is a view of the checkpoint (zero-copy); column slices, slices of several parts (the Gated DeltaNet's q|k|v
// rows, the experts' gate|up rows), slices of stacked experts and the padded vocabulary shards are copies owned by
// `weights`. The
// embedding shard gets one extra zero row that ids of other ranks read (see embed_tokens); a tied LM head is a view
// of the embedding shard. Nothing changes for a size-1 plan. Errors for any tensor whose role has no split.
Status shard_weights(const ModelSpec& spec, const ShardPlan& plan, ModelWeights& weights);

// The slice `s` of one host tensor (rank 1 to 3) as shard_weights cuts weights: a view where one range of dimension
// 0 is taken, otherwise a copy owned by `owned`. LoRA adapters are cut with their projection's slice this way.
Result<Tensor> cut_tensor(const Tensor& t, const WeightSlice& s, OwnedWeights& owned);

// out [T, H] = the embedding rows of `ids`. Split: each rank reads its own vocabulary range (other ids read the
// shard's zero row) and an all-reduce adds up the ranks. `local_ids` is the caller's scratch, reused across steps.
void embed_tokens(Ops& ops, Communicator& comm, const ShardPlan& plan, const Tensor& table,
                  std::span<const int32_t> ids, std::vector<int32_t>& local_ids, const Tensor& out);

// logits [R, V] = rows [R, H] · lm_headᵀ. Split: each rank computes its vocabulary columns, an all-gather collects
// them on every rank, and they are copied into place without the padding. Scratch from `arena`.
void compute_logits(Ops& ops, Communicator& comm, const ShardPlan& plan, const Tensor& rows,
                    const LinearWeight& lm_head, Arena& arena, const Tensor& logits);
// Arena bytes compute_logits needs for `rows` rows (0 for a size-1 plan).
size_t logits_scratch_bytes(const ShardPlan& plan, int64_t rows);

}  // namespace pagoda::model
