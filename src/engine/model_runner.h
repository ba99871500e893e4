// ModelRunner: the one interface between the engine and a model. The engine hands it a flattened batch description
// per step (runtime's ForwardBatch plus state-slot copies, and what each sampled row asks of the sampler) and gets
// back either fp32 logits on the host, which the engine samples, or the sampled tokens themselves from a runner that
// samples on its device. A real runner is a small adapter over model forward + backend; tests use a deterministic
// fake. A runner may also launch steps ahead (async scheduling, engine/pipelined_runner.h): the engine then queues
// step n+1 before it has read step n's tokens, and the runner fills them in.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "common/status.h"
#include "engine/sampler.h"
#include "runtime/forward_batch.h"

namespace pagoda::engine {

// Copy the whole linear-attention state (conv + recurrent, every layer) of slot `src` into slot `dst`.
struct StateCopy {
    int32_t src_slot = 0;
    int32_t dst_slot = 0;
};

// Async scheduling: a token of this step's batch that is the token the step launched just before this one sampled for
// the same sequence, which the engine had not read when it built the batch. The runner writes
// previous_samples[sample_index].token into batch.token_ids[token_index] before the forward (0 when that row sampled
// no token: the engine ends such a choice and drops what this step computes for it).
struct PendingToken {
    int32_t token_index = 0;
    int32_t sample_index = 0;
};

struct StepInput {
    ForwardBatch batch;  // token ids, positions, query starts, seq lens, block tables, slot mapping, state slots,
                         // logits rows; all spans owned by the engine and valid during execute()
    // Before the forward, in order: restore prefix-cache snapshots into the slots of sequences that hit them.
    std::span<const StateCopy> state_restores;
    // After the forward, in order: save states at block-aligned checkpoints (a sequence's slot into a spare slot).
    std::span<const StateCopy> state_saves;
    // The logits rows that sample (indices into the rows of batch.logits_indices, ascending) and, for each, what it
    // asks of the sampler. The other rows are prompt-logprobs rows, which the engine reads on the host.
    std::span<const int32_t> sample_rows;
    std::span<const SamplingContext> sampling;
    // Structured output: the sampling contexts' allowed_tokens masks may still be being filled on another thread
    // while the forward runs; a runner that samples calls this before it reads them. Unset: nothing to wait for.
    std::function<void()> await_sampling_inputs;
    // Async scheduling only (a runner that launches ahead); empty otherwise.
    std::span<const PendingToken> pending_tokens;
};

struct StepOutput {
    Status status;
    // Row-major fp32 logits, vocab_size() wide; owned by the runner, valid until the next execute(). Either every row
    // of batch.logits_indices (samples empty: the engine samples on the CPU), or, when the runner sampled, only the
    // rows that are not in sample_rows, in order.
    std::span<const float> logits;
    // Empty, or one result per input.sampling entry: the runner sampled on its device.
    std::span<const SampleResult> samples;
    // Row-major fp32 final-norm hidden states, one row per batch.pooled_indices entry (hidden_size wide); owned by
    // the runner, valid until the next execute(). Empty when the batch pools no row (or the runner cannot pool).
    std::span<const float> pooled;
};

class ModelRunner {
  public:
    virtual ~ModelRunner() = default;
    virtual int32_t vocab_size() const = 0;
    // Called on the engine thread only, one step at a time.
    virtual StepOutput execute(const StepInput& input) = 0;

    // Launching ahead (async scheduling). A runner that can returns true, and then the engine may use launch() and
    // collect() instead of execute(): launch() queues a step behind the ones launched before it and returns at once;
    // collect() waits for the oldest launched step and returns its output (with samples for every sample row: such
    // a runner always samples), valid until the next collect(). At most two steps are launched and not collected;
    // a step's input (and every span in it) stays valid until it is collected. The engine launches a step ahead of
    // an uncollected one only when that one returns nothing but samples (no prompt-logprobs, token-logits or pooled
    // rows), so those outputs may live in the runner's buffers until the next launch.
    virtual bool launches_ahead() const { return false; }
    virtual void launch(const StepInput& input);
    virtual StepOutput collect();

    // Multi-LoRA, for a runner that brings adapters onto its device beside the steps (executor/lora_pager.h); engine
    // thread. lora_ready(id): whether adapter `id` is there, to stay until the steps scheduled next have run; false:
    // it is on its way (this call starts it), and the scheduler keeps its requests waiting while the other sequences
    // step on. lora_in_use(ids): the adapters of the running sequences once a step is scheduled (this step's and those
    // of running sequences it left out). By default every adapter is ready: the step that needs one installs it.
    virtual bool lora_ready(int32_t /*id*/) { return true; }
    virtual void lora_in_use(std::span<const int32_t> /*ids*/) {}
};

}  // namespace pagoda::engine
