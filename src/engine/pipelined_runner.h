// PipelinedRunner: async scheduling (vLLM's --async-scheduling) over any runner that executes one step at a time.
// The wrapped runner's steps run in launch order on one worker thread, so while the device computes step n (and the
// worker waits for its sampled tokens) the engine thread hands out step n-1's tokens to the streams, schedules step
// n+1 and builds its batch: the device no longer waits on the host between steps. Before a step runs, the worker
// writes the tokens sampled by the step before it into the batch (StepInput::pending_tokens). A runner that returns
// host logits (the CPU backend) has its sample rows sampled here, on the worker, by the engine's Sampler, so the
// tokens are those the engine would have drawn. The worker runs the wrapped runner's steps one after another, as a
// device stream would, so KV blocks and state slots the engine frees and hands out again while a step is in flight
// are only written by later steps after that step is done with them.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "engine/model_runner.h"
#include "engine/sampler.h"

namespace pagoda::engine {

class PipelinedRunner final : public ModelRunner {
  public:
    // `inner` must outlive this runner; it is only called from the worker thread from here on.
    explicit PipelinedRunner(ModelRunner& inner);
    ~PipelinedRunner() override;
    PipelinedRunner(const PipelinedRunner&) = delete;
    PipelinedRunner& operator=(const PipelinedRunner&) = delete;

    int32_t vocab_size() const override { return vocab_size_; }
    // One step, launched and collected (no step may be in flight).
    StepOutput execute(const StepInput& input) override;
    bool launches_ahead() const override { return true; }
    void launch(const StepInput& input) override;
    StepOutput collect() override;
    // (The wrapped runner's, which answers on the engine thread while its steps run on the worker.)
    bool lora_ready(int32_t id) override { return inner_.lora_ready(id); }
    void lora_in_use(std::span<const int32_t> ids) override { inner_.lora_in_use(ids); }

  private:
    // A launched step's output as the engine reads it. Three of them: two steps in flight and the one collected last,
    // whose output the engine may still be reading.
    struct Result {
        Status status;
        std::vector<SampleResult> samples;
        std::vector<float> host_logits;  // the non-sample rows, when this runner sampled the others
        std::span<const float> logits;   // host_logits, or the wrapped runner's rows (valid until its next step)
        std::span<const float> pooled;
    };

    // A launched step, and whether it was launched before the step ahead of it was collected (it builds on it).
    struct Queued {
        StepInput input;
        bool follows_uncollected = false;
    };

    void work();
    void run_step(const Queued& step, const Result* previous, Result& result);

    ModelRunner& inner_;
    const int32_t vocab_size_;
    Sampler sampler_;                 // worker thread only
    std::vector<int32_t> token_ids_;  // worker thread only: the batch's tokens with the pending ones filled in
    std::vector<uint8_t> is_sample_row_;

    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Queued> queued_;  // launched, not yet run
    Result results_[3];          // step i's output in results_[i % 3]
    int64_t launched_ = 0, done_ = 0, collected_ = 0;
    bool stopping_ = false;
    std::thread worker_;
};

}  // namespace pagoda::engine
