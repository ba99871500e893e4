// The bytes node 0 sends to the other nodes of a multi-node tensor-parallel group (docs/deployment-multinode.md):
// each step's StepInput (the ForwardBatch arrays and scalars, the state copies; not what the sampler needs, as only
// node 0 samples) and, once at start, the EngineConfig sizes every rank's pools must share. Pure functions over
// bytes (wire_format.h); the decoders accept only input whose arrays agree with each other, and say what is wrong
// otherwise, so that a garbled or foreign message is an error and never an out-of-bounds index in a kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"
#include "engine/model_runner.h"

namespace pagoda::dist {

// Appends the step to `out` (cleared first; its capacity is reused, so steady-state steps do not allocate). The
// batch's lora_ids travel with it (the other nodes' ranks add the same adapters' deltas).
void encode_step(const engine::StepInput& input, std::vector<std::byte>& out);

// A kLoraAdapter message (node_messages.h): adapter `id` (> 0) and the directory to read it from.
void encode_lora_adapter(int32_t id, const std::string& path, std::vector<std::byte>& out);
// Errors: truncated or trailing bytes, an id <= 0, an empty path or one longer than kMaxLoraPathBytes.
Status decode_lora_adapter(std::span<const std::byte> bytes, int32_t& id, std::string& path);

struct PoolSizes;

// A decoded step: owns the arrays its StepInput views. Reused across steps (the vectors keep their capacity). Not
// copyable: a copy's StepInput would view the original's arrays.
class DecodedStep {
  public:
    DecodedStep() = default;
    DecodedStep(const DecodedStep&) = delete;
    DecodedStep& operator=(const DecodedStep&) = delete;
    // The step; valid until the next decode_step into this object. sample_rows and sampling are empty.
    const engine::StepInput& input() const { return input_; }

  private:
    friend Status decode_step(std::span<const std::byte> bytes, const PoolSizes& limits, DecodedStep& out);
    engine::StepInput input_;
    ForwardBatchArrays arrays_;
    std::vector<engine::StateCopy> state_restores_, state_saves_;
};

// Decodes what encode_step wrote. Errors: truncated or trailing bytes, array sizes that disagree with num_tokens /
// num_seqs (lora_ids: none or one per token, none negative), query starts that do not partition the tokens, a context
// shorter than its new tokens, logits rows outside the tokens, and a step larger than the engine under `limits`
// schedules (more tokens, sequences, state copies, table columns or context than the pools were made for: a confused
// peer must not make a node reserve scratch for it). Block, slot and state ids are checked against the pools by the
// runner.
Status decode_step(std::span<const std::byte> bytes, const PoolSizes& limits, DecodedStep& out);

// The EngineConfig fields that size a rank's pools and scratch (the rest is node 0's scheduling business).
struct PoolSizes {
    int32_t num_kv_blocks = 0;
    int32_t block_size = 0;
    int32_t num_state_slots = 0;
    int32_t max_num_seqs = 0;
    int32_t max_model_len = 0;
    int32_t max_num_batched_tokens = 0;

    static PoolSizes of(const engine::EngineConfig& config);
    engine::EngineConfig to_config() const;  // those fields set, the others at their defaults
    bool operator==(const PoolSizes&) const = default;
};
void encode_pool_sizes(const PoolSizes& sizes, std::vector<std::byte>& out);
// The largest step message encode_step writes for a step within `sizes` (a receive limit).
size_t max_step_bytes(const PoolSizes& sizes);
// Errors for the wrong length and for sizes that are negative or zero where a pool needs them.
Result<PoolSizes> decode_pool_sizes(std::span<const std::byte> bytes);

}  // namespace pagoda::dist
