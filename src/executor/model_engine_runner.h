// ModelEngineRunner: the engine's ModelRunner over a loaded Model. It owns the KV block pool and the
// linear-attention state-slot pool (sized from the EngineConfig, so block and slot ids the engine hands out index
// them directly), and applies the engine's state copies around the forward. On a backend with a device sampler
// (CUDA) the logits stay on the device and only the sampled tokens (and any prompt-logprobs rows) come back;
// otherwise the logits are copied to a host buffer and the engine samples them. Every failure comes back as
// StepOutput::status; nothing here aborts the process.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"
#include "engine/model_runner.h"
#include "executor/decode_graphs.h"
#include "executor/device_sampling.h"
#include "executor/lora_pager.h"
#include "model/model.h"
#include "runtime/cache_pools.h"
#include "runtime/device_sampler.h"

namespace pagoda::executor {

class ModelEngineRunner final : public engine::ModelRunner {
  public:
    // Pools: config.num_kv_blocks blocks of config.block_size tokens (when the model has full-attention layers),
    // config.num_state_slots slots (when it has linear-attention layers; must then be > 0). `model` must outlive
    // the runner.
    // With `cuda_graphs` (and a backend that records steps), decode steps replay recorded CUDA graphs
    // (executor/decode_graphs.h); off, every step runs eagerly (vLLM's --enforce-eager).
    static Result<std::unique_ptr<ModelEngineRunner>> create(model::Model& model, const engine::EngineConfig& config,
                                                             bool cuda_graphs = true);

    // Runs the largest step the engine can schedule under `config`, so that every scratch buffer of the forward
    // reaches its peak before serving: after it, steps allocate no device memory (prompt-logprobs rows beyond
    // max_num_seqs aside), and what the device has left can go to the KV pool (resize_kv_pool). The step has
    // max_num_batched_tokens tokens over max_num_seqs sequences (one prefill chunk, the rest one-token decodes),
    // block tables max_model_len wide, split-KV planned for max_model_len and logits for every sequence. It stores
    // no K/V (slot -1) and its attention reads block 0, so any pool will do; its outputs are garbage, unused.
    Status warm_up(const engine::EngineConfig& config);
    // Replaces the KV pool (nothing may be cached in it yet) by one of `num_blocks` blocks.
    Status resize_kv_pool(int32_t num_blocks);
    // Times a step reallocated scratch memory after warm_up (0 when the warm-up covered every step); any thread.
    uint64_t scratch_growths_after_warm_up() const { return growths_after_warm_up_.load(std::memory_order_relaxed); }

    int32_t vocab_size() const override { return static_cast<int32_t>(model_.vocab_size()); }
    engine::StepOutput execute(const engine::StepInput& input) override;
    // The step's forward pass with its state copies, and nothing after it: no sampling, no copy of the logits to the
    // host (they are written to a scratch buffer and dropped). What a tensor-parallel rank on a node other than
    // node 0 runs: its collectives are those of execute(), since the vocabulary-parallel logits all-gather happens
    // inside Model::forward whether or not the rank samples. input.sample_rows / sampling are ignored.
    Status forward_only(const engine::StepInput& input);
    // Multi-LoRA: where the adapters of a step's lora ids come from (model/lora_table.h); the model must have LoRA
    // enabled. Decode steps with adapters are recorded as graphs of their own (executor/decode_graphs.h).
    void set_lora_fetch(model::LoraFetch fetch) { lora_fetch_ = std::move(fetch); }
    // Multi-LoRA: adapters paged in beside the steps (executor/lora_pager.h) from now on, after set_lora_fetch;
    // without it a step installs the adapters it needs itself.
    void page_lora_adapters();
    bool lora_ready(int32_t id) override { return lora_pager_ ? lora_pager_->ready(id) : true; }
    void lora_in_use(std::span<const int32_t> ids) override {
        if (lora_pager_) lora_pager_->in_use(ids);
    }
    // The pager, when adapters are paged in (its counts); null otherwise.
    const LoraPager* lora_pager() const { return lora_pager_.get(); }
    // CUDA graphs recorded for decode steps, and decode steps replayed from them, so far (0 without graphs); safe
    // from any thread.
    size_t recorded_cuda_graphs() const { return graphs_ ? graphs_->recordings() : 0; }
    size_t replayed_cuda_graphs() const { return graphs_ ? graphs_->replays() : 0; }

  private:
    explicit ModelEngineRunner(model::Model& model) : model_(model) {}
    // One warm-up step of `budget` tokens over min(max_num_seqs, budget) sequences (warm_up's shape).
    Status warm_up_step(const engine::EngineConfig& config, int32_t budget);
    Status check_batch(const ForwardBatch& batch) const;
    Status check_copies(std::span<const engine::StateCopy> copies) const;
    void copy_state(const engine::StateCopy& copy);
    void copy_states(std::span<const engine::StateCopy> copies);
    Status run(const engine::StepInput& input);
    Status sample_on_device(const engine::StepInput& input);
    // check_batch and check_copies of a step's input.
    Status check_input(const engine::StepInput& input) const;
    // The state restores, the forward into `logits`, the state saves.
    Status forward_with_copies(const engine::StepInput& input, const Tensor& logits);
    // forward_with_copies into the device logits buffer or the host one, then waits for the device.
    Status run_forward(const engine::StepInput& input, bool device_logits);
    // `rows` logits rows for a forward: the device buffer (grown when a step needs more rows) or the host one.
    Result<Tensor> logits_rows(int64_t rows, bool on_device);

    // Makes the step's adapters resident in the model's adapter table.
    Status prepare_lora(const ForwardBatch& batch);

    model::Model& model_;
    int32_t block_size_ = 16;
    model::LoraFetch lora_fetch_;
    std::unique_ptr<LoraPager> lora_pager_;    // page_lora_adapters()
    std::vector<int32_t> step_loras_;          // the step's distinct adapter ids
    std::optional<uint64_t> warm_generation_;  // Model::memory_generation() after warm_up
    std::atomic<uint64_t> growths_after_warm_up_{0};
    std::optional<KvCachePool> kv_;
    std::optional<StateCachePool> states_;
    std::vector<float> logits_;  // host rows, [rows, vocab], reused across steps
    std::vector<float> pooled_;  // host rows, [pooled rows, hidden], reused across steps

    // Device sampling (null on the CPU backend): the logits buffer on the device, grown when a step needs more rows.
    std::unique_ptr<DeviceSampler> device_sampler_;
    std::unique_ptr<executor::DecodeGraphs> graphs_;  // decode steps as CUDA graphs (device sampling only)
    Buffer device_logits_;
    std::optional<executor::DeviceSamplingBatch> sampling_batch_;
    std::vector<kernels::SampledToken> sampled_;
    std::vector<engine::SampleResult> results_;
    std::vector<uint8_t> is_sample_row_;
};

}  // namespace pagoda::executor
