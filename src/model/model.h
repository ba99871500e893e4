// Model: a loaded checkpoint of one of the Qwen families, ready to run forward passes on a Backend.
//   forward(ForwardBatch) -> logits of the rows the batch asks for.
// KV blocks and linear-attention state slots live in pools the caller owns (the engine, or SequenceRunner for tools
// and tests); the model says how big they must be.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "model/arch/arch.h"
#include "model/lora_table.h"
#include "model/model_dir.h"
#include "model/quantization.h"
#include "model/shard_plan.h"
#include "runtime/backend.h"
#include "runtime/cache_pools.h"
#include "runtime/communicator.h"
#include "runtime/forward_batch.h"

namespace pagoda::model {

struct CheckpointKvScales;  // model/kv_cache_scales.h

// Debug hook: called with the residual stream [T, H] after the embedding (layer 0) and after each decoder layer i
// (layer i+1), i.e. what transformers returns as output_hidden_states (except its last entry, which is normed).
using HiddenObserver = std::function<void(int64_t layer, const Tensor& hidden)>;

// The first op the model needs that a backend does not run, or "" when it runs them all. Model::load
// refuses such a model; the engine asks before it picks a device for --device auto.
// `runs` answers for one op by name (Ops::supports, cuda_runs_op).
std::string_view missing_op(const ModelSpec& spec, const std::function<bool(std::string_view)>& runs);

// How to load a checkpoint beyond what its files say.
struct LoadOptions {
    // --quantization: "" (config.json decides), the checkpoint's own quant_method (checked against it), or "fp8" on an
    // unquantized checkpoint (its projections quantized to fp8 e4m3 with per-channel scales at load).
    std::string quantization;
    // Copy the weights into one buffer in declaration order, as a device backend does, also on the CPU (whose
    // mmapped views are seldom back to back), so that the fused q/k/v, gate/up and delta-net projections run there
    // too: what tests of the fused paths (and of LoRA on them) use.
    bool pack_weights = false;
    // --kv-cache-dtype and --calculate-kv-scales: the KV pools kv_cache_config describes. bfloat16 needs a GPU (the
    // CPU's caches are F32 or fp8); calculated scales need fp8.
    KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
    bool calculate_kv_scales = false;
    // --enable-expert-parallel: with tensor parallelism, each rank holds whole routed experts (num_experts / N of
    // them) instead of a slice of every expert (shard_plan.h). Needs an MoE model.
    bool expert_parallel = false;
    // --fp8-activations: fp8 weights of a checkpoint whose activations are quantized dynamically (activation_scheme
    // dynamic; compressed-tensors FP8_DYNAMIC / block presets) compute as the checkpoint does, their inputs rounded to
    // fp8 per token (group) before the product (LinearWeight::input_quant_group; on Hopper cuBLASLt's fp8 GEMM takes
    // them as they are), and so do the projections --quantization fp8 quantizes (per token). Off: weight-only, as
    // transformers computes such a checkpoint when it dequantises it (the golden references). MoE experts stay
    // weight-only either way.
    bool fp8_activations = false;
    // --load-format dummy: random bf16 weights for the config alone (dummy_checkpoint.h), no safetensors read.
    bool dummy_weights = false;
};

// The model directory as LoadOptions asks for it: its checkpoint mapped, or random weights in its place
// (dummy_weights: config.json alone is needed).
Result<ModelDir> open_model_dir(const std::string& dir, const LoadOptions& options);

class Model {
  public:
    // Opens the model directory (config.json + safetensors) and loads the weights for `backend`. With a
    // communicator of size N > 1, only rank comm.rank()'s tensor-parallel shard (shard_plan.h) is loaded and the
    // forward pass meets the other ranks in comm's collectives; comm must outlive the model.
    static Result<std::unique_ptr<Model>> load(const std::string& dir, Backend& backend,
                                               Communicator& comm = single_communicator(),
                                               const LoadOptions& options = {});
    static Result<std::unique_ptr<Model>> load(ModelDir dir, Backend& backend,
                                               Communicator& comm = single_communicator(),
                                               const LoadOptions& options = {});

    const ModelSpec& spec() const { return dir_.spec; }
    const ModelDir& dir() const { return dir_; }
    Backend& backend() const { return backend_; }
    int64_t vocab_size() const { return dir_.spec.vocab_size; }  // the whole vocabulary, also when split
    const ShardPlan& shard_plan() const { return plan_; }
    const ModelWeights& weights() const { return weights_; }

    // Pool shapes for this model (0 layers of a kind the model does not have; this rank's KV heads).
    KvCacheConfig kv_cache_config(int32_t num_blocks, int32_t block_size) const;
    StateCacheConfig state_cache_config(int32_t num_slots) const;

    // Runs one step. `logits` is F32 [batch.logits_indices.size(), vocab_size()] on the backend's device.
    // `kv` may be null for a model without full-attention layers, `states` for one without linear attention.
    // `pooled` (needed when batch.pooled_indices is not empty): F32 [pooled_indices.size(), hidden_size], on the
    // device or in host memory, gets those rows' final-norm hidden states (what transformers returns as
    // last_hidden_state, and the LM head reads).
    // Errors (token id out of range, missing pools) are returned, never CHECKed.
    Status forward(const ForwardBatch& batch, const KvCachePool* kv, const StateCachePool* states, const Tensor& logits,
                   const HiddenObserver& observer = {}, const Tensor& pooled = Tensor());

    // Multi-LoRA: makes every projection able to take adapter deltas, with `max_loras` adapter slots of rank up to
    // `max_rank` (model/lora_table.h); a split model's ranks each hold their cut of every adapter. On a device the
    // slots' memory is taken here, so call it before the KV pool is sized. Before the first forward.
    Status enable_lora(int32_t max_loras, int64_t max_rank);
    // The adapter table; null unless enable_lora ran.
    LoraTable* lora() { return lora_.get(); }
    const LoraTable* lora() const { return lora_.get(); }
    // Reads and checks a PEFT adapter directory against this model (model/lora_adapter.h); needs enable_lora.
    Result<std::shared_ptr<const LoraAdapter>> read_lora(const std::string& dir) const;

    // Changes whenever scratch memory a forward pass uses was reallocated (the model's and the ops'): a recorded
    // forward pass (DecodeGraphs) is valid only while this stays the same.
    uint64_t memory_generation() const { return arena_.reallocations() + backend_.ops().memory_generation(); }

  private:
    Model(ModelDir dir, Backend& backend, Communicator& comm, const ShardPlan& plan)
        : dir_(std::move(dir)), backend_(backend), comm_(comm), plan_(plan) {}
    Status load_weights(const QuantizationPlan& quantization);
    Status upload_weights();  // device backends: weights into device memory
    // --fp8-activations: marks every fp8 projection whose checkpoint quantizes its inputs dynamically (per token for
    // the ones quantized at load); an error when there is none.
    Status quantize_activations(bool quantized_at_load);
    Status place_kv_scales(const std::vector<CheckpointKvScales>& scales);
    size_t scratch_bytes(int64_t tokens, int64_t logits_rows) const;

    ModelDir dir_;
    Backend& backend_;
    Communicator& comm_;
    ShardPlan plan_;
    std::vector<int32_t> local_ids_;  // vocab-parallel embedding scratch
    ModelWeights weights_;
    std::vector<int32_t> cache_layer_;  // layer -> index among the layers of its kind (KV or state pool)
    RopeTable rope_;                    // the config's RoPE frequencies (rope_table_for)
    Arena arena_;
    std::unique_ptr<LoraTable> lora_;
    std::vector<int32_t> lora_slots_;  // the step's ForwardBatch::lora_slots
    KvCacheDtype kv_cache_dtype_ = KvCacheDtype::kAuto;
    bool calculate_kv_scales_ = false;
    std::vector<KvScales> kv_layer_scales_;  // the checkpoint's k_scale / v_scale (fp8 KV cache), empty when none
    Buffer kv_head_scales_;  // their per-head factors on the backend's device (kv_layer_scales_ point in)
};

}  // namespace pagoda::model
