// ModelRunner: the one interface between the engine and a model. The engine hands it a flattened batch description
// per step (runtime's ForwardBatch plus state-slot copies) and gets fp32 logits on the host back. A real runner is a
// small adapter over model forward + backend; tests use a deterministic fake.
#pragma once

#include <cstdint>
#include <span>

#include "common/status.h"
#include "runtime/forward_batch.h"

namespace pagoda::engine {

// Copy the whole linear-attention state (conv + recurrent, every layer) of slot `src` into slot `dst`.
struct StateCopy {
    int32_t src_slot = 0;
    int32_t dst_slot = 0;
};

struct StepInput {
    ForwardBatch batch;  // token ids, positions, query starts, seq lens, block tables, slot mapping, state slots,
                         // logits rows; all spans owned by the engine and valid during execute()
    // Before the forward, in order: restore prefix-cache snapshots into the slots of sequences that hit them.
    std::span<const StateCopy> state_restores;
    // After the forward, in order: save states at block-aligned checkpoints (a sequence's slot into a spare slot).
    std::span<const StateCopy> state_saves;
};

struct StepOutput {
    Status status;
    // [batch.logits_indices.size() x vocab_size()] row-major; owned by the runner, valid until the next execute().
    std::span<const float> logits;
};

class ModelRunner {
  public:
    virtual ~ModelRunner() = default;
    virtual int32_t vocab_size() const = 0;
    // Called on the engine thread only, one step at a time.
    virtual StepOutput execute(const StepInput& input) = 0;
};

}  // namespace pagoda::engine
