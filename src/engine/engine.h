// Engine: the engine thread and its inbox. One thread owns every piece of scheduling state (queues, KV blocks, prefix
// cache, state slots); other threads talk to it only through submit/cancel/admin messages and read results from
// per-request streams. See docs/engine.md for the threading contract and the step.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <vector>

#include "common/status.h"
#include "engine/admission_policy.h"
#include "engine/model_runner.h"
#include "engine/request.h"
#include "engine/sampling_params.h"

namespace pagoda::engine {

struct EngineConfig {
    int32_t max_model_len = 4096;           // prompt + output tokens of one sequence
    int32_t max_num_seqs = 256;             // sequences per step
    int32_t max_num_batched_tokens = 2048;  // tokens per step (the chunked-prefill budget)
    int32_t block_size = 16;
    int32_t num_kv_blocks = 0;  // must hold at least one max_model_len sequence
    bool enable_prefix_caching = true;
    bool priority_scheduling = false;
    AdmissionPolicy admission = AdmissionPolicy::kReserveExpected;
    int32_t max_waiting_requests = 1024;  // a fuller queue rejects new requests
    int32_t max_unread_tokens = 8192;     // per request; a reader further behind is cancelled

    // Models with linear-attention layers: state slots (>= 2 * max_num_seqs + max_state_snapshots recommended:
    // each running sequence holds its state and a checkpoint). 0 = a pure full-attention model.
    int32_t num_state_slots = 0;
    int32_t max_state_snapshots = 0;

    std::vector<int32_t> eos_token_ids;  // stop a request unless ignore_eos
    GenerationConfig generation_config;  // sampling defaults from generation_config.json
    uint64_t seed = 0;                   // seeds of the requests that bring none are drawn from this
    // Multi-LoRA: the adapters running requests may use at once (--max-loras); 0 = LoRA off (a request with a
    // lora_id is refused).
    int32_t max_loras = 0;
};

struct EngineStats {
    int32_t num_running = 0;
    int32_t num_waiting = 0;
    int32_t num_requests = 0;  // in flight (submitted, not yet ended)
    int32_t num_free_kv_blocks = 0;
    int32_t num_kv_blocks = 0;
    int32_t num_cached_kv_blocks = 0;
    int32_t num_free_state_slots = 0;
    int32_t num_state_slots = 0;
    int32_t num_state_snapshots = 0;
    int64_t state_snapshot_hits = 0;  // prefix hits on hybrid models that restored a saved state
    int64_t prefix_queried_tokens = 0;
    int64_t prefix_hit_tokens = 0;
    int64_t num_preemptions = 0;
    int64_t num_steps = 0;                 // model steps run
    int64_t num_steps_launched_ahead = 0;  // async scheduling: launched before the step ahead of them was read
    int64_t num_generated_tokens = 0;
    int64_t max_step_tokens = 0;  // the largest batch a step ran (must stay <= max_num_batched_tokens)
    // The distinct adapters (lora_id) of the running and the waiting requests (filled only with LoRA on).
    std::vector<int32_t> running_lora_ids, waiting_lora_ids;
};

// Observes each step on the engine thread (tests and metrics); must not call into the engine.
class StepObserver {
  public:
    virtual ~StepObserver() = default;
    virtual void on_step(const StepInput& input, const EngineStats& stats) = 0;
};

class Engine {
  public:
    // Starts the engine thread. `runner` (and `observer`, if any) must outlive the engine.
    static Result<std::unique_ptr<Engine>> create(const EngineConfig& config, ModelRunner& runner,
                                                  StepObserver* observer = nullptr);
    ~Engine();  // shutdown()
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Any thread. Checks the request (an error says what is wrong with it) and queues it for the engine thread,
    // which may still reject it (queue full, draining) through the stream with FinishReason::kRejected.
    Result<std::shared_ptr<RequestStream>> submit(Request request);
    // Any thread; unknown or finished ids are ignored. The request ends with FinishReason::kAbort.
    void cancel(RequestId id);
    // Any thread: stop admitting new requests; the future is ready once every request in flight has ended.
    std::future<void> drain();
    // Any thread: stop / restart running steps (requests are still accepted and queued; cancels still work).
    void pause();
    void resume();
    EngineStats stats();
    // Any thread, never waits for a step: the stats as the engine thread published them after its latest step or
    // inbox pass (what /metrics reports), before the streams were told of that step: a reader that saw a request
    // end sees stats that include it. stats() is exact but waits until the current step ends.
    EngineStats latest_stats();
    // Aborts what is in flight, frees everything and joins the engine thread. Idempotent.
    void shutdown();
    // Any thread, never blocks: asks the engine thread to shut down as shutdown() does, without joining it.
    void begin_shutdown();

    struct Impl;

  private:
    explicit Engine(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::engine
