// Scheduler: continuous batching under a token budget. Each step it first advances running sequences (decodes and
// prefill chunks, in priority/arrival order), preempting the newest (lowest priority) by recompute when KV blocks run
// out, then admits waiting sequences with their prefix-cache hits while the pool can carry the expected growth of
// every running sequence and the new one (AdmissionPolicy). Engine thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <vector>

#include "engine/admission_policy.h"
#include "engine/block_hash.h"
#include "engine/kv_cache_manager.h"
#include "engine/kv_projection.h"
#include "engine/model_runner.h"
#include "engine/output_length_estimator.h"
#include "engine/state_cache.h"

namespace pagoda::engine {

// What the choices of one request share.
struct SequenceGroup {
    int32_t n = 1;
    int32_t priority = 0;
    int64_t arrival = 0;     // submission order
    BlockHash salt;          // root of the block-hash chain (LoRA id, cache_salt)
    int32_t max_tokens = 0;  // output tokens each choice may produce; 0 (tests): admission reserves no output
    int32_t lora_id = 0;     // the adapter its steps add (0 = none)
    bool use_prefix_cache = true;
    bool prompt_computed = false;  // the first choice has computed the prompt once (siblings may then start)
    bool pooling = false;          // prompt only (embeddings, scores): its zero output says nothing of output lengths
};

struct Sequence {
    SequenceGroup* group = nullptr;
    int32_t index = 0;            // choice index within the group
    std::vector<int32_t> tokens;  // prompt then output
    int32_t prompt_len = 0;
    int32_t num_computed = 0;           // tokens whose KV (and state) are in the cache
    int32_t cached_prompt_tokens = -1;  // prefix hit at first admission; -1 = never admitted

    SeqBlocks blocks;
    std::vector<BlockHash> hashes;  // of the full blocks of `tokens`, extended lazily

    int32_t state_slot = -1;       // hybrid models: the live state
    int32_t checkpoint_slot = -1;  // hybrid models: state after checkpoint_tokens (block-aligned) tokens
    int32_t checkpoint_tokens = 0;
    // A planned step saves a newer state into checkpoint_slot and has not completed: with async scheduling it may
    // be launched, so until complete() the slot holds no state that can be named.
    bool checkpoint_save_planned = false;

    // Async scheduling: >= 0 while the last token is a placeholder for what sample row `pending_sample` of the step in
    // flight draws (the engine writes it in when it reads that step's output).
    int32_t pending_sample = -1;

    uint64_t seed = 0;  // the per-choice RNG seed
    bool running = false;
    bool in_waiting = false;
    bool finished = false;
    int32_t num_output() const { return static_cast<int32_t>(tokens.size()) - prompt_len; }
};

struct ScheduledChunk {
    Sequence* seq = nullptr;
    int32_t start = 0;  // first token of the chunk (== num_computed before the step)
    int32_t length = 0;
    bool samples = false;       // the chunk ends at the last token: its logits row is sampled
    int32_t checkpoint_at = 0;  // > 0: the step saves the state after this many tokens into seq->checkpoint_slot
};

struct StepPlan {
    std::vector<ScheduledChunk> chunks;
    std::vector<Sequence*> preempted;
    std::vector<StateCopy> state_restores;
    std::vector<StateCopy> state_saves;
    int32_t num_tokens = 0;
    void clear();
    bool empty() const { return chunks.empty(); }
};

struct SchedulerConfig {
    int32_t max_num_seqs = 256;
    int32_t max_num_batched_tokens = 2048;
    bool priority_scheduling = false;
    bool hybrid = false;  // the model has linear-attention layers: every sequence holds a state slot
    AdmissionPolicy admission = AdmissionPolicy::kReserveExpected;
    // kReserveExpected reserves at most this many further output tokens per sequence, so that a cold start (no
    // output seen yet: every sequence expected to reach its max_tokens) or a max_tokens near max_model_len does not
    // shrink the batch to a handful; beyond it, preemption is the fallback (SGLang clips likewise at 4,096).
    int32_t max_reserved_output_tokens = 4096;
    // Multi-LoRA: the adapters running sequences may use at once (the model's adapter slots); a waiting sequence
    // with another adapter waits, and later ones may go first (as vLLM's scheduler does). 0: no limit (LoRA off).
    int32_t max_loras = 0;
    // Async scheduling: a sequence's blocks come back one step after its last token (the engine reads a step's
    // tokens after it has launched the next one), so admission counts that step too.
    bool async_scheduling = false;
};

// How a sequence left: the model ended it (EOS, a stop token: its output length is a sample of how long outputs
// run) or something cut it short (max_tokens, max_model_len, a cancel or abort: it would have run at least as long).
enum class SequenceEnd { kModelStop, kCut };

struct SchedulerStats {
    int64_t num_preemptions = 0;
    int64_t num_steps = 0;
};

class Scheduler {
  public:
    // `state` may be null for models without linear-attention layers.
    Scheduler(const SchedulerConfig& config, KvCacheManager& kv, StateCache* state);

    void add(Sequence* seq);
    // Takes the sequence out (finished or cancelled), releasing its blocks, slots and checkpoint; its output length
    // teaches the admission estimate.
    void remove(Sequence* seq, SequenceEnd end = SequenceEnd::kCut);
    void schedule(StepPlan& plan);
    // After the step ran: advances num_computed, publishes full blocks and checkpoints.
    void complete(const StepPlan& plan);
    // After a failed step: forgets the checkpoints it was to write (their slots hold nothing trustworthy).
    void discard_checkpoints(const StepPlan& plan);

    int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
    int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
    const SchedulerStats& stats() const { return stats_; }
    const std::vector<Sequence*>& running() const { return running_; }
    const OutputLengthEstimator& output_lengths() const { return output_lengths_; }
    // The distinct adapter ids (non-zero) of the running or the waiting sequences.
    void lora_ids(bool running, std::vector<int32_t>& out) const;
    // Multi-LoRA: whether an adapter is on the device (ModelRunner::lora_ready). A waiting sequence whose adapter the
    // running ones do not use waits while it is not, unless nothing runs: then its step installs the adapter, which
    // stalls no one.
    void set_lora_ready(std::function<bool(int32_t)> ready) { lora_ready_ = std::move(ready); }

  private:
    // Order of service: (priority if enabled, arrival, choice index); lower first.
    struct Before {
        bool by_priority = false;
        bool operator()(const Sequence* a, const Sequence* b) const;
    };
    void ensure_hashes(Sequence* s, int32_t num_blocks);
    int32_t align_chunk(const Sequence* s, int32_t start, int32_t length) const;
    int32_t expected_steps(const Sequence* s) const;
    void project_running();
    bool try_admit(Sequence* s, int32_t& budget, StepPlan& plan);
    void preempt(Sequence* s, StepPlan& plan);
    void release(Sequence* s);
    void plan_chunk(Sequence* s, int32_t length, StepPlan& plan);
    void publish_checkpoint(Sequence* s);
    void insert_running(Sequence* s);

    SchedulerConfig config_;
    KvCacheManager& kv_;
    StateCache* state_;
    std::set<Sequence*, Before> waiting_;
    std::vector<Sequence*> running_;  // sorted by key: the back is the first to be preempted
    std::vector<int32_t> cached_scratch_;
    OutputLengthEstimator output_lengths_;
    KvProjection projection_;  // this step's running sequences (and admissions), for admission
    int64_t free_at_schedule_ = 0;
    std::vector<int32_t> active_loras_;    // schedule()'s scratch
    std::vector<int32_t> arriving_loras_;  // and its adapters found on their way (not ready) this round
    std::function<bool(int32_t)> lora_ready_;
    SchedulerStats stats_;
};

}  // namespace pagoda::engine
