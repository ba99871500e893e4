// The engine thread: inbox handling, the step (schedule, build the batch, run the model, sample, update), events.
//
// Async scheduling (a runner that launches ahead, engine/pipelined_runner.h): the engine launches step n+1 before it
// reads step n's output. Step n is committed when it is launched (the scheduler counts its tokens as computed, full
// blocks go to the prefix cache) and each sequence it samples gets a placeholder token, which step n+1's batch names
// as pending (the runner writes the drawn token in) and which the engine overwrites when it reads step n. Only then
// are tokens handed to the streams and stop conditions checked, so a sequence that stops at step n has run one step
// for nothing, dropped. A sequence whose step-n token is its last by length gets no placeholder and waits.
// A step whose output lives in the runner's buffers (prompt-logprobs, token-logits and pooled rows) is collected right
// after its launch. Rows whose sampling reads the tokens so far (penalties) or a grammar's state wait in the runner
// (StepInput::await_sampling_inputs) until the engine has read the step before and prepared them: their token views
// taken again (commit() may have moved the tokens), their grammar masks computed from the advanced matchers. Requests
// that end stay allocated until no launched step can still read them.
#include "engine/engine.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "common/check.h"
#include "common/log.h"
#include "engine/grammar_masks.h"
#include "engine/kv_cache_manager.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/state_cache.h"

namespace pagoda::engine {

namespace {

// A request is the group its choices share.
struct RequestState : SequenceGroup {
    RequestId id = 0;
    std::shared_ptr<RequestStream> stream;
    Request request;             // params resolved against the generation config
    std::vector<Sequence> seqs;  // one per choice; never resized after creation (the scheduler holds pointers)
    int32_t unfinished = 0;
    int32_t prompt_logprobs_done = 0;  // prompt positions whose row was turned into prompt logprobs
    Usage usage;
    std::vector<grammar::GrammarMatcher> matchers;  // structured output: one per choice; empty without a grammar
    std::vector<uint8_t> grammar_waiting;           // per choice: the grammar_after_token was not generated yet
    int64_t touched_step = -1;
    bool scheduled = false;  // its first chunk was put into a step (RequestTimes::scheduled is set)
};

// One step's batch and what the engine needs to read its output. Two of them: with async scheduling the engine
// builds one while the other is in flight.
struct StepSlot {
    StepPlan plan;
    ForwardBatchArrays arrays;
    std::vector<int32_t> sample_rows;                      // rows of arrays.logits_indices that sample
    std::vector<SamplingContext> sampling;                 // one per sample row
    std::vector<Sequence*> sampled_seqs;                   // one per sample row
    std::vector<int32_t> token_pos;                        // per sample row: its placeholder's index in tokens, or -1
    std::vector<std::pair<int32_t, int32_t>> prompt_rows;  // per chunk: first prompt position, number of rows
    std::vector<PendingToken> pending_tokens;
    StepInput input;
    bool constrained = false;   // some sample row has grammar masks (known once prepared)
    bool read_at_once = false;  // its output is read before another step is launched (see the top of this file)
    // Some sample row reads the tokens so far or has a grammar: the runner waits for prepare_sampling() before it
    // samples. inputs_ready is guarded by Impl::sampling_mu.
    bool deferred_inputs = false;
    bool inputs_ready = false;
};

struct Message {
    enum class Kind { kSubmit, kCancel, kDrain, kStats, kPause, kResume, kShutdown };
    explicit Message(Kind k) : kind(k) {}
    Kind kind;
    std::unique_ptr<RequestState> request;
    RequestId id = 0;
    std::promise<void> drained;
    std::promise<EngineStats> stats;
};

uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

RequestState& owner(const Sequence& s) {
    return *static_cast<RequestState*>(s.group);
}

bool contains(std::span<const int32_t> ids, int32_t id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// The context's views of the sequence's tokens taken again, as long as they were when the batch was built: commit()
// appends placeholders, which may move the tokens.
void retake_token_views(SamplingContext& ctx, const Sequence& s) {
    PAGODA_CHECK(static_cast<size_t>(s.prompt_len) + ctx.output_tokens.size() <= s.tokens.size());
    ctx.prompt_tokens = std::span<const int32_t>(s.tokens).first(static_cast<size_t>(s.prompt_len));
    ctx.output_tokens =
        std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(s.prompt_len), ctx.output_tokens.size());
}

}  // namespace

struct Engine::Impl {
    Impl(const EngineConfig& c, ModelRunner& r, StepObserver* o)
        : config(c),
          runner(r),
          observer(o),
          vocab_size(r.vocab_size()),
          pipelined(r.launches_ahead()),
          kv(c.num_kv_blocks, c.block_size, c.enable_prefix_caching),
          state(c.num_state_slots > 0
                    ? std::optional<StateCache>(std::in_place, c.num_state_slots, c.max_state_snapshots)
                    : std::nullopt),
          scheduler(SchedulerConfig{.max_num_seqs = c.max_num_seqs,
                                    .max_num_batched_tokens = c.max_num_batched_tokens,
                                    .priority_scheduling = c.priority_scheduling,
                                    .hybrid = c.num_state_slots > 0,
                                    .admission = c.admission,
                                    .max_loras = c.max_loras,
                                    .async_scheduling = r.launches_ahead()},
                    kv, state ? &*state : nullptr),
          sampler(vocab_size),
          grammar_masks(vocab_size, c.eos_token_ids) {
        if (c.max_loras > 0) scheduler.set_lora_ready([this](int32_t id) { return runner.lora_ready(id); });
    }

    void run();
    void handle(Message& m);
    void handle_submit(std::unique_ptr<RequestState> r);
    void end_request_choices(RequestState& r, FinishReason reason, const std::string& message);
    void step();
    bool schedule_step(StepSlot& slot);
    void build_batch(StepSlot& slot);
    void fill_grammar_masks(StepSlot& slot);
    void prepare_sampling(StepSlot& slot);
    void await_sampling_inputs(const StepSlot& slot);
    bool output_ok(StepSlot& slot, const StepOutput& out);
    void fail_steps(std::span<StepSlot* const> slots, const std::string& message, bool committed);
    void commit(StepSlot& slot);
    // Whether `s`, with `more_tokens` beyond those it has, reaches its max_tokens or max_model_len: what ends a choice
    // by length (sample_and_update), and what commit() predicts of the token a step is drawing.
    bool reaches_length_limit(const Sequence& s, int32_t more_tokens) const {
        return s.num_output() + more_tokens >= owner(s).max_tokens ||
               static_cast<int32_t>(s.tokens.size()) + more_tokens >= config.max_model_len;
    }
    void finish_in_flight();
    StepOutput collect();
    StepOutput collect_prepared(const StepSlot& slot);
    void sample_and_update(StepSlot& slot, const StepOutput& out, double now);
    void deliver_pooled(RequestState& r, Sequence& s, std::span<const float> values);
    void finish_choice(RequestState& r, Sequence& s, FinishReason reason, std::string message, int32_t stop_id);
    void end_without_a_token(RequestState& r, Sequence& s);
    void touch(RequestState& r);
    void flush_touched();
    void erase_ended();
    EngineStats collect_stats() const;
    void publish_stats();
    bool idle() const { return scheduler.num_running() == 0 && scheduler.num_waiting() == 0; }

    const EngineConfig config;
    ModelRunner& runner;
    StepObserver* observer;
    const int32_t vocab_size;
    const bool pipelined;  // async scheduling: the runner launches steps ahead

    // Engine-thread state.
    KvCacheManager kv;
    std::optional<StateCache> state;
    Scheduler scheduler;
    std::vector<int32_t> step_loras;  // schedule_step's scratch: the running sequences' adapters
    Sampler sampler;
    GrammarMasks grammar_masks;
    std::unordered_map<RequestId, std::unique_ptr<RequestState>> requests;
    std::vector<RequestState*> touched;
    // Ended requests with the number of steps launched when they ended: erased once those steps are collected.
    std::vector<std::pair<RequestId, int64_t>> ended;
    int64_t launched_steps = 0, collected_steps = 0, launched_ahead = 0;
    std::vector<std::promise<void>> drain_waiters;
    bool draining = false;
    bool paused = false;
    bool stopping = false;
    int64_t arrivals = 0;
    int64_t step_index = 0;
    int64_t generated_tokens = 0;
    int64_t max_step_tokens = 0;

    // The steps' flattened batches; reused so that steady state does not allocate.
    StepSlot slots[2];
    StepSlot* in_flight = nullptr;      // async scheduling: launched and committed, its output not read yet
    std::vector<float> pooled_scratch;  // a kTokenLogits request's logits
    std::mutex sampling_mu;             // StepSlot::inputs_ready, between the engine and the runner's thread
    std::condition_variable sampling_cv;
    std::vector<TokenLogprobs> prompt_scratch;

    // Inbox, shared with other threads.
    std::mutex mu;
    std::condition_variable cv;
    std::vector<Message> inbox;
    std::vector<Message> local;
    bool closed = false;  // the engine thread has exited; guarded by mu
    std::atomic<RequestId> next_id{1};
    std::thread thread;

    // The stats as of the end of the latest loop iteration, for readers that must not wait for a step.
    std::mutex published_mu;
    EngineStats published;
};

// ---- engine thread ------------------------------------------------------------------------------------------------

void Engine::Impl::run() {
    while (true) {
        {
            std::unique_lock lock(mu);
            if ((idle() || paused) && !in_flight) cv.wait(lock, [&] { return !inbox.empty(); });
            std::swap(inbox, local);
        }
        for (Message& m : local)
            handle(m);
        local.clear();
        if (stopping) break;
        if (!idle() && !paused)
            step();
        else if (in_flight)
            finish_in_flight();  // nothing more to launch (or paused): read the step in flight
        // Published before the streams hear of this step: whoever read a request's end sees stats that include it.
        publish_stats();
        flush_touched();
        erase_ended();
        if (draining && requests.empty()) {
            for (auto& p : drain_waiters)
                p.set_value();
            drain_waiters.clear();
        }
    }
    // Shutdown: abort everything in flight, free every block and slot, answer what is still queued.
    if (in_flight) finish_in_flight();
    for (auto& [id, r] : requests)
        end_request_choices(*r, FinishReason::kAbort, "the engine is shutting down");
    while (true) {
        flush_touched();
        erase_ended();
        for (auto& p : drain_waiters)
            p.set_value();
        drain_waiters.clear();
        {
            std::lock_guard lock(mu);
            if (inbox.empty()) {
                {
                    std::lock_guard published_lock(published_mu);
                    published = collect_stats();
                }
                // From here on other threads may read the (now idle) state directly; this thread touches nothing.
                closed = true;
                return;
            }
            std::swap(inbox, local);
        }
        for (Message& m : local)
            handle(m);  // submits are rejected, stats answered, drains completed
        local.clear();
    }
}

void Engine::Impl::handle(Message& m) {
    switch (m.kind) {
        case Message::Kind::kSubmit:
            handle_submit(std::move(m.request));
            break;
        case Message::Kind::kCancel: {
            auto it = requests.find(m.id);
            if (it != requests.end()) end_request_choices(*it->second, FinishReason::kAbort, "cancelled");
            break;
        }
        case Message::Kind::kDrain:
            draining = true;
            drain_waiters.push_back(std::move(m.drained));
            break;
        case Message::Kind::kStats:
            m.stats.set_value(collect_stats());
            break;
        case Message::Kind::kPause:
            paused = true;
            break;
        case Message::Kind::kResume:
            paused = false;
            break;
        case Message::Kind::kShutdown:
            stopping = true;
            break;
    }
}

void Engine::Impl::handle_submit(std::unique_ptr<RequestState> owned) {
    RequestState& r = *owned;
    const RequestId id = r.id;
    requests.emplace(id, std::move(owned));
    std::string reject;
    if (stopping || closed)
        reject = "the engine is shutting down";
    else if (draining)
        reject = "the engine is draining and admits no new requests";
    else if (scheduler.num_waiting() + r.n > config.max_waiting_requests)
        reject = "the waiting queue is full (" + std::to_string(scheduler.num_waiting()) +
                 " sequences waiting); retry later";
    if (!reject.empty()) {
        end_request_choices(r, FinishReason::kRejected, reject);
        return;
    }
    r.arrival = arrivals++;
    const uint64_t base_seed =
        r.request.params.seed ? *r.request.params.seed : mix64(config.seed ^ mix64(static_cast<uint64_t>(r.arrival)));
    for (int32_t i = 0; i < r.n; ++i) {
        Sequence& s = r.seqs[i];
        s.seed = base_seed + static_cast<uint64_t>(i);
        scheduler.add(&s);
    }
}

void Engine::Impl::touch(RequestState& r) {
    if (r.touched_step == step_index) return;
    r.touched_step = step_index;
    touched.push_back(&r);
}

void Engine::Impl::flush_touched() {
    for (RequestState* r : touched)
        r->stream->notify();
    touched.clear();
    ++step_index;
}

void Engine::Impl::erase_ended() {
    // A request that ended while steps were in flight may still be read by them (sampling parameters, tokens).
    std::erase_if(ended, [this](const std::pair<RequestId, int64_t>& e) {
        if (e.second > collected_steps) return false;
        requests.erase(e.first);
        return true;
    });
}

void Engine::Impl::finish_choice(RequestState& r, Sequence& s, FinishReason reason, std::string message,
                                 int32_t stop_id) {
    if (s.finished) return;
    scheduler.remove(&s, reason == FinishReason::kStop ? SequenceEnd::kModelStop : SequenceEnd::kCut);
    s.finished = true;
    r.stream->finish(s.index, reason, std::move(message), stop_id, r.usage);
    touch(r);
    if (--r.unfinished == 0) ended.emplace_back(r.id, launched_steps);
}

void Engine::Impl::end_request_choices(RequestState& r, FinishReason reason, const std::string& message) {
    for (Sequence& s : r.seqs)
        finish_choice(r, s, reason, message, -1);
}

void Engine::Impl::build_batch(StepSlot& slot) {
    ForwardBatchArrays& arrays = slot.arrays;
    arrays.clear();
    slot.prompt_rows.clear();
    slot.sample_rows.clear();
    slot.sampling.clear();
    slot.sampled_seqs.clear();
    slot.token_pos.clear();
    slot.pending_tokens.clear();
    slot.read_at_once = false;
    slot.deferred_inputs = false;
    slot.constrained = false;
    for (const ScheduledChunk& c : slot.plan.chunks) {
        const Sequence& s = *c.seq;
        const int32_t row0 =
            arrays.add_sequence(std::span<const int32_t>(s.tokens).subspan(c.start, c.length), c.start, s.blocks.table,
                                config.block_size, s.state_slot, owner(s).request.lora_id);
        if (s.pending_sample >= 0) {
            // Its last token is the step in flight's draw: this chunk is that one token.
            PAGODA_CHECK(c.start + c.length == static_cast<int32_t>(s.tokens.size()));
            slot.pending_tokens.push_back({row0 + c.length - 1, s.pending_sample});
        }
        // Prompt logprobs: every prompt position but the last produces a row (the last one samples), once.
        const RequestState& r = owner(s);
        int32_t first = 0, count = 0;
        if (r.request.params.prompt_logprobs && s.index == 0) {
            first = std::max(c.start, r.prompt_logprobs_done);
            count = std::max(0, std::min(c.start + c.length, s.prompt_len - 1) - first);
            for (int32_t p = first; p < first + count; ++p)
                arrays.logits_indices.push_back(row0 + (p - c.start));
        }
        slot.prompt_rows.emplace_back(first, count);
        slot.read_at_once |= count > 0;
        const int32_t last_row = static_cast<int32_t>(arrays.token_ids.size()) - 1;
        if (c.samples && r.request.pooling == PoolingTask::kLastHidden) {
            arrays.pooled_indices.push_back(last_row);
            slot.read_at_once = true;
        } else if (c.samples && r.request.pooling == PoolingTask::kTokenLogits) {
            arrays.logits_indices.push_back(last_row);  // a host row, as prompt logprobs rows are
            slot.read_at_once = true;
        } else if (c.samples) {
            slot.sample_rows.push_back(static_cast<int32_t>(arrays.logits_indices.size()));
            arrays.logits_indices.push_back(last_row);
            SamplingContext& ctx = slot.sampling.emplace_back();
            ctx.params = &r.request.params;
            ctx.prompt_tokens = std::span<const int32_t>(s.tokens).first(s.prompt_len);
            ctx.output_tokens = std::span<const int32_t>(s.tokens).subspan(s.prompt_len);
            ctx.eos_token_ids = config.eos_token_ids;
            ctx.seed = s.seed;
            slot.sampled_seqs.push_back(c.seq);
            // A grammar (even one still waiting for its start token) reads the token before this one.
            slot.deferred_inputs |= r.request.params.reads_output_tokens() || !r.matchers.empty();
        }
    }
    const int32_t max_blocks = arrays.lay_out_block_tables(slot.plan.chunks.size(), [&slot](size_t i) {
        return std::span<const int32_t>(slot.plan.chunks[i].seq->blocks.table);
    });
    StepInput& input = slot.input;
    input.batch = arrays.view(config.block_size, max_blocks);
    input.state_restores = slot.plan.state_restores;
    input.state_saves = slot.plan.state_saves;
    input.sample_rows = slot.sample_rows;
    input.sampling = slot.sampling;
    input.pending_tokens = slot.pending_tokens;
    input.await_sampling_inputs = nullptr;
    {
        std::lock_guard lock(sampling_mu);
        slot.inputs_ready = false;
    }
    if (slot.deferred_inputs) input.await_sampling_inputs = [this, &slot] { await_sampling_inputs(slot); };
    // Without async scheduling nothing is in flight: the rows can be prepared now (the masks fill while the forward
    // runs, as before).
    if (!pipelined) prepare_sampling(slot);
}

// The sampling inputs of `slot` that depend on the step before it, once the engine has read that step: token views
// taken again from the sequences (as long as they were when the batch was built; commit() may have moved them), the
// grammar masks started on the masks' helper thread. Then the runner may sample.
void Engine::Impl::prepare_sampling(StepSlot& slot) {
    if (!slot.deferred_inputs) return;
    for (size_t k = 0; k < slot.sampled_seqs.size(); ++k) {
        const Sequence& s = *slot.sampled_seqs[k];
        if (s.finished) {
            // It ended while the engine read the step before (no token drawn, or its request cut short): its row
            // here is dropped, and its last token may be a placeholder never filled in. Nothing of it is read.
            slot.sampling[k].prompt_tokens = {};
            slot.sampling[k].output_tokens = {};
            continue;
        }
        retake_token_views(slot.sampling[k], s);
    }
    fill_grammar_masks(slot);
    {
        std::lock_guard lock(sampling_mu);
        slot.inputs_ready = true;
    }
    sampling_cv.notify_all();
}

// The runner's thread, before it samples `slot`.
void Engine::Impl::await_sampling_inputs(const StepSlot& slot) {
    {
        std::unique_lock lock(sampling_mu);
        sampling_cv.wait(lock, [&] { return slot.inputs_ready; });
    }
    grammar_masks.wait();
}

// Structured output: the masks of this step's sampled rows whose requests have a grammar, computed on the masks'
// helper thread while the forward runs (StepInput::await_sampling_inputs).
void Engine::Impl::fill_grammar_masks(StepSlot& slot) {
    size_t rows = 0;
    // A choice whose grammar waits for the end of its reasoning draws from the whole vocabulary; one that ended while
    // the step before was read (async scheduling) has its row dropped.
    auto constrained = [](const Sequence& s) {
        const RequestState& r = owner(s);
        return !s.finished && !r.matchers.empty() && !r.grammar_waiting[static_cast<size_t>(s.index)];
    };
    for (const Sequence* s : slot.sampled_seqs)
        rows += constrained(*s);
    if (rows == 0) return;
    slot.constrained = true;
    grammar_masks.begin_step(rows);
    size_t row = 0;
    for (size_t k = 0; k < slot.sampled_seqs.size(); ++k) {
        RequestState& r = owner(*slot.sampled_seqs[k]);
        if (!constrained(*slot.sampled_seqs[k])) continue;
        grammar_masks.add(row, &r.matchers[slot.sampled_seqs[k]->index]);
        slot.sampling[k].allowed_tokens = grammar_masks.mask(row++);
    }
    grammar_masks.start();
}

// Schedules into `slot` and builds its batch; false when the plan is empty.
bool Engine::Impl::schedule_step(StepSlot& slot) {
    scheduler.schedule(slot.plan);
    if (slot.plan.empty()) return false;
    if (config.max_loras > 0) {  // the adapters the runner keeps: the running sequences', this step's among them
        scheduler.lora_ids(/*running=*/true, step_loras);
        runner.lora_in_use(step_loras);
    }
    PAGODA_CHECK(slot.plan.num_tokens <= config.max_num_batched_tokens);
    max_step_tokens = std::max<int64_t>(max_step_tokens, slot.plan.num_tokens);
    const double scheduled_at = clock_seconds();
    for (const ScheduledChunk& c : slot.plan.chunks) {
        RequestState& r = owner(*c.seq);
        if (r.scheduled) continue;
        r.scheduled = true;
        r.stream->mark_scheduled(scheduled_at);
    }
    build_batch(slot);
    return true;
}

void Engine::Impl::step() {
    StepSlot& slot = slots[in_flight == &slots[0] ? 1 : 0];
    if (!schedule_step(slot)) {
        // Nothing to run until the step in flight is read (every running sequence waits on it), or a sequence had
        // to give up its own blocks (it is admitted again next step).
        if (in_flight) {
            finish_in_flight();
            return;
        }
        PAGODA_CHECK_MSG(!slot.plan.preempted.empty(), "the scheduler made no progress with requests pending");
        return;
    }
    StepOutput out;
    if (!pipelined) {
        out = runner.execute(slot.input);
        ++launched_steps;
        ++collected_steps;
    } else {
        runner.launch(slot.input);
        ++launched_steps;
        launched_ahead += in_flight != nullptr;
        if (in_flight) {
            // Read the step before this one while this one runs.
            StepSlot& previous = *in_flight;
            in_flight = nullptr;
            const StepOutput previous_out = collect_prepared(previous);
            if (!output_ok(previous, previous_out)) {
                // This step, built on it, is not run (PipelinedRunner): collected and failed with it.
                (void)collect();
                StepSlot* failed[] = {&previous, &slot};
                fail_steps(failed, "model step failed: " + previous_out.status.message(), /*committed=*/true);
                return;
            }
            sample_and_update(previous, previous_out, clock_seconds());
        }
        if (!slot.read_at_once) {
            commit(slot);
            prepare_sampling(slot);
            in_flight = &slot;
            return;
        }
        prepare_sampling(slot);  // the runner waits for it before it samples
        out = collect_prepared(slot);
    }
    if (!output_ok(slot, out)) {
        StepSlot* failed[] = {&slot};
        fail_steps(failed, "model step failed: " + out.status.message(), /*committed=*/false);
        return;
    }
    commit(slot);
    sample_and_update(slot, out, clock_seconds());
}

StepOutput Engine::Impl::collect() {
    StepOutput out = runner.collect();
    ++collected_steps;
    return out;
}

// A step whose sampling may wait on prepare_sampling() must have had it, or its runner would wait forever.
StepOutput Engine::Impl::collect_prepared(const StepSlot& slot) {
    PAGODA_CHECK_MSG(!slot.deferred_inputs || slot.inputs_ready, "collecting a step whose sampling was not prepared");
    return collect();
}

// Reads the step in flight (async scheduling) when nothing else is launched before it.
void Engine::Impl::finish_in_flight() {
    StepSlot& slot = *in_flight;
    in_flight = nullptr;
    const StepOutput out = collect_prepared(slot);
    if (!output_ok(slot, out)) {
        StepSlot* failed[] = {&slot};
        fail_steps(failed, "model step failed: " + out.status.message(), /*committed=*/true);
        return;
    }
    sample_and_update(slot, out, clock_seconds());
}

// Whether the step ran; false for a failed step (its requests are left to fail_steps). Pooling requests of a runner
// that returns no hidden states end here, the rest of the step stands.
bool Engine::Impl::output_ok(StepSlot& slot, const StepOutput& out) {
    if (slot.constrained) grammar_masks.wait();  // the runner may not have sampled, or failed before it did
    if (!out.status.ok()) return false;
    const size_t host_rows = slot.arrays.logits_indices.size() - (out.samples.empty() ? 0 : slot.sample_rows.size());
    PAGODA_CHECK(out.samples.empty() || out.samples.size() == slot.sample_rows.size());
    PAGODA_CHECK(out.logits.size() == host_rows * static_cast<size_t>(vocab_size));
    if (const size_t pooled_rows = slot.arrays.pooled_indices.size();
        pooled_rows > 0 && (out.pooled.empty() || out.pooled.size() % pooled_rows != 0)) {
        // A runner that cannot pool (a test double).
        for (const ScheduledChunk& c : slot.plan.chunks)
            if (c.samples && owner(*c.seq).request.pooling == PoolingTask::kLastHidden)
                end_request_choices(owner(*c.seq), FinishReason::kAbort, "the model runner returns no hidden states");
    }
    return true;
}

// Failed steps end their requests. One not committed has offered nothing to the prefix cache; one committed at its
// launch (async scheduling) may have offered blocks and a state snapshot, and a later step may have found them: both
// caches are emptied then.
void Engine::Impl::fail_steps(std::span<StepSlot* const> failed, const std::string& message, bool committed) {
    size_t sequences = 0;
    for (StepSlot* slot : failed)
        sequences += slot->plan.chunks.size();
    PAGODA_LOG_ERROR(message + " (" + std::to_string(sequences) + " sequences end)");
    for (StepSlot* slot : failed)
        scheduler.discard_checkpoints(slot->plan);
    for (StepSlot* slot : failed)
        for (const ScheduledChunk& c : slot->plan.chunks)
            end_request_choices(owner(*c.seq), FinishReason::kAbort, message);
    if (committed) {
        kv.reset_prefix_cache();
        if (state) state->reset_snapshots();
    }
}

// The step's tokens count as computed; each sequence it samples gets a placeholder for its draw unless that draw is
// its last by length (then it waits for it with nothing to schedule).
void Engine::Impl::commit(StepSlot& slot) {
    scheduler.complete(slot.plan);
    slot.token_pos.assign(slot.sampled_seqs.size(), -1);
    for (size_t k = 0; k < slot.sampled_seqs.size(); ++k) {
        Sequence& s = *slot.sampled_seqs[k];
        if (!s.running) continue;  // ended meanwhile
        if (reaches_length_limit(s, /*more_tokens=*/1)) continue;
        slot.token_pos[k] = static_cast<int32_t>(s.tokens.size());
        s.tokens.push_back(kNoToken);
        s.pending_sample = static_cast<int32_t>(k);
    }
}

void Engine::Impl::sample_and_update(StepSlot& slot, const StepOutput& out, double now) {
    const ForwardBatchArrays& arrays = slot.arrays;
    const StepPlan& plan = slot.plan;
    const std::span<const float> logits = out.logits;
    size_t row = 0;     // next host logits row
    size_t sample = 0;  // next sampling entry
    size_t pooled = 0;  // next pooled hidden-state row
    const size_t hidden_width = arrays.pooled_indices.empty() ? 0 : out.pooled.size() / arrays.pooled_indices.size();
    for (size_t ci = 0; ci < plan.chunks.size(); ++ci) {
        const ScheduledChunk& c = plan.chunks[ci];
        Sequence& s = *c.seq;
        RequestState& r = owner(s);
        if (const auto [first, count] = slot.prompt_rows[ci]; count > 0) {
            const int32_t k = *r.request.params.prompt_logprobs;
            prompt_scratch.resize(count);
            for (int32_t i = 0; i < count; ++i) {
                const std::span<const float> lg = logits.subspan(row++ * vocab_size, vocab_size);
                TokenLogprobs& lp = prompt_scratch[i];
                lp.logprob = log_softmax_at(lg, s.tokens[first + i + 1]);
                lp.rank = logit_rank(lg, s.tokens[first + i + 1]);
                lp.num_top = top_logprobs(lg, k, lp.top);
            }
            if (!s.finished) {
                r.stream->push_prompt_logprobs(prompt_scratch);
                r.prompt_logprobs_done = first + count;
                touch(r);
            }
        }
        if (!c.samples) continue;
        if (r.request.pooling == PoolingTask::kLastHidden) {
            const size_t p = pooled++;
            if (!s.finished) deliver_pooled(r, s, out.pooled.subspan(p * hidden_width, hidden_width));
            continue;
        }
        if (r.request.pooling == PoolingTask::kTokenLogits) {
            const std::span<const float> lg = logits.subspan(row++ * vocab_size, vocab_size);
            pooled_scratch.clear();
            for (int32_t id : r.request.pooling_token_ids)
                pooled_scratch.push_back(lg[static_cast<size_t>(id)]);
            if (!s.finished) deliver_pooled(r, s, pooled_scratch);
            continue;
        }
        const size_t k = sample++;
        const std::span<const float> row_logits =
            out.samples.empty() ? logits.subspan(row++ * vocab_size, vocab_size) : std::span<const float>();
        if (s.finished) continue;  // its request was aborted earlier in this loop, or while the step was in flight
        const SamplingParams& p = r.request.params;
        SampleResult res;
        if (out.samples.empty()) {
            SamplingContext ctx = slot.sampling[k];
            retake_token_views(ctx, s);
            res = sampler.sample(row_logits, ctx);
        } else {
            res = out.samples[k];
        }
        const int32_t tok = res.token;
        const int32_t pos = slot.token_pos[k];
        if (pos >= 0) {
            PAGODA_CHECK(s.pending_sample == static_cast<int32_t>(k));
            s.pending_sample = -1;
        }
        if (tok == kNoToken) {
            if (pos >= 0) s.tokens.pop_back();  // the placeholder (nothing was appended after it)
            end_without_a_token(r, s);
            continue;
        }
        if (pos >= 0)
            s.tokens[static_cast<size_t>(pos)] = tok;
        else
            s.tokens.push_back(tok);
        ++r.usage.completion_tokens;
        ++generated_tokens;
        if (s.index == 0) r.usage.cached_tokens = std::max(0, s.cached_prompt_tokens);

        TokenLogprobs lp;
        if (p.logprobs) {
            lp.logprob = res.logprob;
            lp.num_top = res.num_top;
            lp.top = res.top;
        }
        const int32_t unread = r.stream->push_token(s.index, tok, p.logprobs ? &lp : nullptr, r.usage, now);
        touch(r);
        if (unread > config.max_unread_tokens) {
            end_request_choices(
                r, FinishReason::kAbort,
                "the client fell behind by more than " + std::to_string(config.max_unread_tokens) + " tokens");
            continue;
        }
        // EOS and stop ids end the choice (or, with ignore_eos, leave the grammar where it ended).
        const bool ends = contains(p.stop_token_ids, tok) || contains(config.eos_token_ids, tok);
        if (!r.matchers.empty() && r.grammar_waiting[static_cast<size_t>(s.index)]) {
            r.grammar_waiting[static_cast<size_t>(s.index)] = tok != *p.grammar_after_token;
        } else if (!r.matchers.empty() && !ends && !r.matchers[s.index].accept_token(tok)) {
            // The mask keeps this from happening; a runner that ignored it must not make the engine crash.
            finish_choice(r, s, FinishReason::kAbort,
                          "structured output: token " + std::to_string(tok) + " does not follow the grammar", -1);
            continue;
        }
        if (contains(p.stop_token_ids, tok))
            finish_choice(r, s, FinishReason::kStop, {}, tok);
        else if (!p.ignore_eos && contains(config.eos_token_ids, tok))
            finish_choice(r, s, FinishReason::kStop, {}, tok);
        else if (reaches_length_limit(s, 0))
            finish_choice(r, s, FinishReason::kLength, {}, -1);
    }
    if (observer) observer->on_step(slot.input, collect_stats());
}

// The sampler found every token masked out. With a grammar that is its end with no EOS token to close it (a
// checkpoint that names none): the answer is complete. Anything else is a grammar with no way on, which ends this
// choice with the reason, not the step.
void Engine::Impl::end_without_a_token(RequestState& r, Sequence& s) {
    if (!r.matchers.empty() && r.matchers[static_cast<size_t>(s.index)].can_end()) {
        finish_choice(r, s, FinishReason::kStop, {}, -1);
        return;
    }
    finish_choice(r, s, FinishReason::kAbort,
                  r.matchers.empty() ? "every token was masked out"
                                     : "structured output: the grammar allows no token after the output so far",
                  -1);
}

// A pooling request's one result: its vector, then its end (its blocks go back; full ones stay in the prefix cache).
void Engine::Impl::deliver_pooled(RequestState& r, Sequence& s, std::span<const float> values) {
    if (s.index == 0) r.usage.cached_tokens = std::max(0, s.cached_prompt_tokens);
    r.stream->push_pooled(values);
    finish_choice(r, s, FinishReason::kStop, {}, -1);
}

void Engine::Impl::publish_stats() {
    const EngineStats st = collect_stats();
    std::lock_guard lock(published_mu);
    published = st;
}

EngineStats Engine::Impl::collect_stats() const {
    EngineStats st;
    st.num_running = scheduler.num_running();
    st.num_waiting = scheduler.num_waiting();
    st.num_requests = static_cast<int32_t>(requests.size() - ended.size());  // ended ones are erased at the end
    st.num_free_kv_blocks = kv.num_free_blocks();
    st.num_kv_blocks = kv.num_blocks();
    st.num_cached_kv_blocks = kv.num_cached_blocks();
    if (state) {
        st.num_free_state_slots = state->num_free_slots();
        st.num_state_slots = state->num_slots();
        st.num_state_snapshots = state->num_snapshots();
        st.state_snapshot_hits = state->stats().hits;
    }
    st.prefix_queried_tokens = kv.stats().queried_tokens;
    st.prefix_hit_tokens = kv.stats().hit_tokens;
    st.num_preemptions = scheduler.stats().num_preemptions;
    st.num_steps = launched_steps;  // model steps run (not the scheduler's passes that planned nothing)
    st.num_steps_launched_ahead = launched_ahead;
    st.num_generated_tokens = generated_tokens;
    st.max_step_tokens = max_step_tokens;
    if (config.max_loras > 0) {
        scheduler.lora_ids(/*running=*/true, st.running_lora_ids);
        scheduler.lora_ids(/*running=*/false, st.waiting_lora_ids);
    }
    return st;
}

// ---- any thread ---------------------------------------------------------------------------------------------------

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& c, ModelRunner& runner, StepObserver* observer) {
    if (c.block_size <= 0) return Status::error("block_size must be positive");
    if (c.max_model_len <= 1) return Status::error("max_model_len must be at least 2");
    if (c.max_num_seqs <= 0) return Status::error("max_num_seqs must be positive");
    if (c.max_num_batched_tokens <= 0) return Status::error("max_num_batched_tokens must be positive");
    if (c.max_waiting_requests <= 0) return Status::error("max_waiting_requests must be positive");
    if (static_cast<int64_t>(c.num_kv_blocks) * c.block_size < c.max_model_len)
        return Status::error("the KV cache (" + std::to_string(c.num_kv_blocks) + " blocks of " +
                             std::to_string(c.block_size) + " tokens) cannot hold one sequence of max_model_len " +
                             std::to_string(c.max_model_len) + "; lower --max-model-len or give the cache more memory");
    if (c.num_state_slots > 0 && c.num_state_slots < c.max_num_seqs)
        return Status::error("num_state_slots (" + std::to_string(c.num_state_slots) +
                             ") must be at least max_num_seqs (" + std::to_string(c.max_num_seqs) + ")");
    if (runner.vocab_size() <= 0) return Status::error("the model runner reports no vocabulary");
    for (int32_t id : c.eos_token_ids)
        if (id < 0 || id >= runner.vocab_size())
            return Status::error("eos token id " + std::to_string(id) + " is outside the vocabulary");
    auto impl = std::make_unique<Impl>(c, runner, observer);
    Impl* raw = impl.get();
    raw->publish_stats();
    raw->thread = std::thread([raw] { raw->run(); });
    return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Engine::~Engine() {
    shutdown();
}

Result<std::shared_ptr<RequestStream>> Engine::submit(Request request) {
    Impl& e = *impl_;
    const int32_t prompt_len = static_cast<int32_t>(request.prompt_tokens.size());
    if (prompt_len == 0) return Status::error("the prompt is empty");
    for (int32_t t : request.prompt_tokens)
        if (t < 0 || t >= e.vocab_size)
            return Status::error("prompt token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                                 std::to_string(e.vocab_size) + ")");
    const bool pooling = request.pooling != PoolingTask::kNone;
    if (prompt_len > e.config.max_model_len || (!pooling && prompt_len == e.config.max_model_len))
        return Status::error("the prompt has " + std::to_string(prompt_len) +
                             " tokens; this model's maximum context length is " +
                             std::to_string(e.config.max_model_len) + " tokens, which leaves no room for output");
    if (request.lora_id < 0 || (request.lora_id != 0 && e.config.max_loras == 0))
        return Status::error("LoRA adapter " + std::to_string(request.lora_id) +
                             " requested but this engine runs no adapters");
    SamplingParams& p = request.params;
    if (pooling) {
        if (p.n != 1 || p.prompt_logprobs || p.grammar)
            return Status::error(
                "a pooling request runs its prompt once: n must be 1, without prompt logprobs or a "
                "grammar");
        if (request.pooling == PoolingTask::kTokenLogits && request.pooling_token_ids.empty())
            return Status::error("a token-logits pooling request names no tokens");
        for (int32_t id : request.pooling_token_ids)
            if (id < 0 || id >= e.vocab_size)
                return Status::error("pooling token id " + std::to_string(id) + " is outside the vocabulary");
    }
    apply_generation_config(p, e.config.generation_config);
    PAGODA_RETURN_IF_ERROR(validate(p, e.vocab_size));
    if (p.max_tokens && static_cast<int64_t>(prompt_len) + *p.max_tokens > e.config.max_model_len)
        return Status::error("the prompt has " + std::to_string(prompt_len) + " tokens and max_tokens is " +
                             std::to_string(*p.max_tokens) +
                             "; together they exceed this model's maximum context length of " +
                             std::to_string(e.config.max_model_len) + " tokens");

    auto r = std::make_unique<RequestState>();
    r->id = e.next_id.fetch_add(1);
    r->stream = std::make_shared<RequestStream>(r->id, p.n);
    r->max_tokens = pooling ? 0 : p.max_tokens.value_or(e.config.max_model_len - prompt_len);
    r->n = p.n;
    r->priority = request.priority;
    r->salt = block_hash_salt(request.lora_id, request.cache_salt);
    r->lora_id = request.lora_id;
    r->pooling = pooling;
    // Cached prompt tokens produce no logits, so a request for prompt logprobs computes its whole prompt.
    r->use_prefix_cache = !p.prompt_logprobs.has_value();
    r->usage.prompt_tokens = prompt_len;
    r->unfinished = p.n;
    r->seqs.resize(p.n);
    if (p.grammar) {
        if (p.grammar->vocab().size() > e.vocab_size)
            return Status::error("the structured-output grammar's vocabulary is larger than the model's");
        r->matchers.reserve(p.n);
        for (int32_t i = 0; i < p.n; ++i)
            r->matchers.emplace_back(p.grammar);
        r->grammar_waiting.assign(static_cast<size_t>(p.n), p.grammar_after_token.has_value());
    }
    for (int32_t i = 0; i < p.n; ++i) {
        Sequence& s = r->seqs[i];
        s.group = r.get();
        s.index = i;
        s.prompt_len = prompt_len;
        s.tokens.reserve(prompt_len + std::min(r->max_tokens, 1024));
        s.tokens = request.prompt_tokens;
    }
    r->request = std::move(request);
    std::shared_ptr<RequestStream> stream = r->stream;

    Message m(Message::Kind::kSubmit);
    m.request = std::move(r);
    {
        std::lock_guard lock(e.mu);
        if (e.closed) return Status::error("the engine is shut down");
        e.inbox.push_back(std::move(m));
    }
    e.cv.notify_one();
    return stream;
}

void Engine::cancel(RequestId id) {
    Impl& e = *impl_;
    Message m(Message::Kind::kCancel);
    m.id = id;
    {
        std::lock_guard lock(e.mu);
        if (e.closed) return;
        e.inbox.push_back(std::move(m));
    }
    e.cv.notify_one();
}

std::future<void> Engine::drain() {
    Impl& e = *impl_;
    Message m(Message::Kind::kDrain);
    std::future<void> f = m.drained.get_future();
    {
        std::lock_guard lock(e.mu);
        if (e.closed) {
            m.drained.set_value();
            return f;
        }
        e.inbox.push_back(std::move(m));
    }
    e.cv.notify_one();
    return f;
}

EngineStats Engine::stats() {
    Impl& e = *impl_;
    Message m(Message::Kind::kStats);
    std::future<EngineStats> f = m.stats.get_future();
    {
        std::lock_guard lock(e.mu);
        if (e.closed) return e.collect_stats();  // the engine thread is gone: its state is ours to read
        e.inbox.push_back(std::move(m));
    }
    e.cv.notify_one();
    return f.get();
}

EngineStats Engine::latest_stats() {
    std::lock_guard lock(impl_->published_mu);
    return impl_->published;
}

namespace {
void post(Engine::Impl& e, Message m) {
    {
        std::lock_guard lock(e.mu);
        if (e.closed) return;
        e.inbox.push_back(std::move(m));
    }
    e.cv.notify_one();
}
}  // namespace

void Engine::pause() {
    post(*impl_, Message(Message::Kind::kPause));
}
void Engine::resume() {
    post(*impl_, Message(Message::Kind::kResume));
}

void Engine::begin_shutdown() {
    Impl& e = *impl_;
    {
        std::lock_guard lock(e.mu);
        if (!e.closed) e.inbox.emplace_back(Message::Kind::kShutdown);
    }
    e.cv.notify_one();
}

void Engine::shutdown() {
    begin_shutdown();
    if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace pagoda::engine
