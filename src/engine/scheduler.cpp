// The step scheduler.
//
// Admission. Admitting whatever first chunk fits now (vLLM V1's rule, AdmissionPolicy::kPromptOnly) overcommits the
// pool: 1,024 requests of 1,000 prompt and 1,000 output tokens want 2.05 M tokens of KV where a 0.78 M-token pool
// holds every prompt, and each sequence admitted beyond what the pool holds at full length is later preempted and
// recomputed (546 preemptions and 7% less throughput than 256 at a time on an H200). Reserving every request's whole
// max_tokens (TGI, kReserveMaxTokens) never preempts but starves the batch when outputs end early, as most do long
// before their max_tokens. SGLang reserves new_token_ratio x the remaining max_new_tokens (clipped at 4,096), the
// ratio decaying each step from 0.7 towards a floor and raised again when a decode runs out of memory and retracts
// requests: a controller that learns by preempting, so a load whose outputs all run to max_tokens is preempted anew
// each time the ratio has decayed.
//
// Ours (kReserveExpected) admits a sequence while the free blocks carry every running sequence and the new one up to
// the output each is still expected to produce: E[min(L, max_tokens) - k | L > k] for a sequence k tokens into its
// output, read off an output-length survival curve (OutputLengthEstimator) learned from how earlier sequences ended.
// The model's stops are samples of L; sequences cut short and those still running count as "at least this long", so
// the curve is not fooled by the short outputs that finish first, and a length nobody has reached is assumed to run
// on to the limit. With nothing learned yet, or a load whose outputs all run to max_tokens, this is TGI's full
// reservation and nothing is preempted; when outputs stop early it is what they are seen to use, conditioned on how
// far each sequence already is. "Carry" is a projection over the coming steps (KvProjection), not a sum: each
// sequence grows a token a step until its expected end, when its unshared blocks return, and the peak of that must
// fit, so a new sequence can start while older ones are about to finish. Expectations over hundreds of sequences are
// close to what they will hold; when they fall short, preemption by recompute in the running pass stays the
// fallback. The reservation per sequence is clipped (max_reserved_output_tokens) so that a cold start with max_tokens
// near max_model_len does not shrink the batch to a few sequences. A sequence that arrives when nothing runs always
// starts (Engine::create makes the pool hold one max_model_len sequence), so admission never stalls. State slots of
// hybrid models are taken at admission as before.
#include "engine/scheduler.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace pagoda::engine {

void StepPlan::clear() {
    chunks.clear();
    preempted.clear();
    state_restores.clear();
    state_saves.clear();
    num_tokens = 0;
}

bool Scheduler::Before::operator()(const Sequence* a, const Sequence* b) const {
    if (by_priority && a->group->priority != b->group->priority) return a->group->priority < b->group->priority;
    if (a->group->arrival != b->group->arrival) return a->group->arrival < b->group->arrival;
    return a->index < b->index;
}

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager& kv, StateCache* state)
    : config_(config),
      kv_(kv),
      state_(state),
      waiting_(Before{config.priority_scheduling}),
      projection_(kv.block_size()) {
    PAGODA_CHECK(config.max_num_seqs > 0 && config.max_num_batched_tokens > 0);
    PAGODA_CHECK(!config.hybrid || state != nullptr);
    running_.reserve(config.max_num_seqs);
}

void Scheduler::add(Sequence* seq) {
    PAGODA_CHECK(!seq->running && !seq->in_waiting);
    seq->in_waiting = true;
    waiting_.insert(seq);
}

void Scheduler::insert_running(Sequence* s) {
    auto it = std::upper_bound(running_.begin(), running_.end(), s, Before{config_.priority_scheduling});
    running_.insert(it, s);
    s->running = true;
}

void Scheduler::ensure_hashes(Sequence* s, int32_t num_blocks) {
    const int32_t b = kv_.block_size();
    PAGODA_CHECK(num_blocks * b <= static_cast<int32_t>(s->tokens.size()));
    while (static_cast<int32_t>(s->hashes.size()) < num_blocks) {
        const size_t i = s->hashes.size();
        const BlockHash& parent = i == 0 ? s->group->salt : s->hashes[i - 1];
        s->hashes.push_back(hash_block(parent, std::span<const int32_t>(s->tokens).subspan(i * b, b)));
    }
}

int32_t Scheduler::align_chunk(const Sequence* s, int32_t start, int32_t length) const {
    // Hybrid models can only reuse states saved exactly at block boundaries, so prefill chunks end on one when they
    // can, and the prompt's last boundary gets a chunk end of its own.
    if (!config_.hybrid || !kv_.prefix_caching() || !s->group->use_prefix_cache) return length;
    const int32_t b = kv_.block_size();
    const int32_t total = static_cast<int32_t>(s->tokens.size());
    const int32_t end = start + length;
    const int32_t boundary = (end == total) ? (total - 1) / b * b : end / b * b;
    if (boundary > start && boundary < end) return boundary - start;
    return length;
}

void Scheduler::plan_chunk(Sequence* s, int32_t length, StepPlan& plan) {
    ScheduledChunk c;
    c.seq = s;
    c.start = s->num_computed;
    c.length = length;
    c.samples = c.start + length == static_cast<int32_t>(s->tokens.size());
    const int32_t end = c.start + length;
    if (config_.hybrid && kv_.prefix_caching() && s->group->use_prefix_cache && end % kv_.block_size() == 0) {
        if (s->checkpoint_slot < 0) s->checkpoint_slot = state_->allocate_slot();
        if (s->checkpoint_slot >= 0) {
            c.checkpoint_at = end;
            plan.state_saves.push_back({s->state_slot, s->checkpoint_slot});
            s->checkpoint_save_planned = true;
        }
    }
    plan.chunks.push_back(c);
    plan.num_tokens += length;
}

int32_t Scheduler::expected_steps(const Sequence* s) const {
    const int32_t left = std::max(0, s->group->max_tokens - s->num_output());
    int32_t output = left;
    if (config_.admission == AdmissionPolicy::kReserveExpected) {
        const double expected = output_lengths_.expected_remaining(s->num_output(), s->group->max_tokens);
        output = std::min({left, config_.max_reserved_output_tokens, static_cast<int32_t>(std::ceil(expected))});
    }
    // A prompt still to run takes steps of its own before the first output token.
    const int32_t unprefilled = std::max(0, s->prompt_len - s->num_computed);
    const int32_t prefill = (unprefilled + config_.max_num_batched_tokens - 1) / config_.max_num_batched_tokens;
    return std::max(1, output + prefill) + (config_.async_scheduling ? 1 : 0);
}

void Scheduler::project_running() {
    if (config_.admission == AdmissionPolicy::kPromptOnly) return;
    if (config_.admission == AdmissionPolicy::kReserveExpected) {
        output_lengths_.begin_pass();
        for (const Sequence* s : running_)
            output_lengths_.add_running(s->num_output());
        output_lengths_.end_pass();
    }
    projection_.clear();
    for (const Sequence* s : running_) {
        const auto& table = s->blocks.table;
        KvProjection::Item item;
        item.tokens = static_cast<int32_t>(s->tokens.size());
        item.held = static_cast<int32_t>(table.size());
        // Blocks are shared through prefix hits, which are leading runs of a table: count the leading shared run.
        int32_t shared = 0;
        while (shared < item.held && kv_.ref_count(table[shared]) > 1)
            ++shared;
        item.exclusive = item.held - shared;
        item.steps = expected_steps(s);
        projection_.add(item);
    }
    projection_.build();
    free_at_schedule_ = kv_.num_free_blocks();
}

bool Scheduler::try_admit(Sequence* s, int32_t& budget, StepPlan& plan) {
    const int32_t b = kv_.block_size();
    const int32_t total = static_cast<int32_t>(s->tokens.size());
    std::vector<int32_t>& cached = cached_scratch_;
    cached.clear();
    int32_t hit = 0;
    int32_t snapshot = -1;
    if (kv_.prefix_caching() && s->group->use_prefix_cache) {
        const int32_t max_blocks = (total - 1) / b;  // at least one token must run to produce logits
        ensure_hashes(s, max_blocks);
        hit = kv_.find_cached_prefix(std::span<const BlockHash>(s->hashes).first(max_blocks), cached);
        if (config_.hybrid) {
            // The linear-attention state must exist at the hit boundary too.
            while (hit > 0 && !state_->has_snapshot(s->hashes[hit - 1]))
                --hit;
            cached.resize(hit);
            if (hit > 0) snapshot = state_->find_snapshot(s->hashes[hit - 1]);
        }
    }
    const int32_t computed = hit * b;
    const int32_t length = align_chunk(s, computed, std::min(total - computed, budget));
    // Would the pool carry the running sequences and this one until their expected ends? (A hit's blocks that other
    // sequences hold cost nothing; cached ones nobody holds come out of the free blocks.)
    KvProjection::Item item;
    if (config_.admission != AdmissionPolicy::kPromptOnly) {
        item.tokens = total;
        item.held = kv_.count_referenced(cached, 1);
        item.steps = expected_steps(s);
        if (!running_.empty() && projection_.peak_with(item) > free_at_schedule_) return false;
    }

    int32_t slot = -1;
    if (config_.hybrid) {
        slot = state_->allocate_slot();
        if (slot < 0) return false;
    }
    if (!kv_.allocate_for_prefill(s->blocks, cached, computed + length)) {
        if (slot >= 0) state_->free_slot(slot);
        return false;
    }
    if (kv_.prefix_caching()) kv_.record_lookup(total, computed);
    if (snapshot >= 0) plan.state_restores.push_back({snapshot, slot});
    s->state_slot = slot;
    s->num_computed = computed;
    if (s->cached_prompt_tokens < 0) s->cached_prompt_tokens = std::min(computed, s->prompt_len);
    waiting_.erase(s);
    s->in_waiting = false;
    insert_running(s);
    plan_chunk(s, length, plan);
    budget -= length;
    if (config_.admission != AdmissionPolicy::kPromptOnly) {
        projection_.add(item);
        projection_.build();
    }
    return true;
}

void Scheduler::schedule(StepPlan& plan) {
    plan.clear();
    ++stats_.num_steps;
    if (state_) state_->unpin_all();  // snapshots pinned for the previous step's restores were copied by now
    int32_t budget = config_.max_num_batched_tokens;

    // Running sequences first, most important first; the least important yield their blocks when memory runs out.
    for (size_t i = 0; i < running_.size() && budget > 0;) {
        Sequence* s = running_[i];
        const int32_t remaining = static_cast<int32_t>(s->tokens.size()) - s->num_computed;
        if (remaining == 0) {
            // Async scheduling: its last token, drawn by the step in flight, ends it (max_tokens, max_model_len), or
            // it is a pooling request whose result is in flight. It ends when the engine reads that step.
            ++i;
            continue;
        }
        PAGODA_CHECK(remaining > 0);
        const int32_t length = align_chunk(s, s->num_computed, std::min(remaining, budget));
        bool ok = false;
        while (!(ok = kv_.append_slots(s->blocks, s->num_computed + length))) {
            Sequence* victim = running_.back();
            preempt(victim, plan);
            if (victim == s) break;
        }
        if (!ok) break;  // s itself was the least important and went back to waiting
        plan_chunk(s, length, plan);
        budget -= length;
        ++i;
    }

    // Then admissions, in order, unless memory was short this step. A head that does not fit stops the admissions
    // (no overtaking by smaller requests, so nothing starves); only a request whose adapter finds no free slot
    // (--max-loras) or is still being brought to the device is passed over.
    if (!plan.preempted.empty() || waiting_.empty() || budget <= 0) return;
    if (static_cast<int32_t>(running_.size()) >= config_.max_num_seqs) return;
    project_running();
    if (config_.max_loras > 0) lora_ids(/*running=*/true, active_loras_);
    arriving_loras_.clear();
    for (auto it = waiting_.begin(); it != waiting_.end() && budget > 0;) {
        if (static_cast<int32_t>(running_.size()) >= config_.max_num_seqs) break;
        Sequence* s = *it;
        ++it;  // try_admit erases s
        // Choices after the first wait until the first has computed the prompt, then share its blocks.
        if (s->index > 0 && kv_.prefix_caching() && s->group->use_prefix_cache && !s->group->prompt_computed) continue;
        const int32_t lora = s->group->lora_id;
        // Another request's adapter found on its way this round: this one waits for it too.
        if (lora != 0 && std::find(arriving_loras_.begin(), arriving_loras_.end(), lora) != arriving_loras_.end())
            continue;
        const bool new_lora = config_.max_loras > 0 && lora != 0 &&
                              std::find(active_loras_.begin(), active_loras_.end(), lora) == active_loras_.end();
        if (new_lora && static_cast<int32_t>(active_loras_.size()) >= config_.max_loras) continue;  // no free slot
        if (new_lora && lora_ready_ && !running_.empty() && !lora_ready_(lora)) {
            // On its way: it counts against the slots, so that no more adapters are brought in than fit beside the
            // running ones (two cold adapters for one free slot would take it from each other in turn).
            active_loras_.push_back(lora);
            arriving_loras_.push_back(lora);
            continue;
        }
        if (!try_admit(s, budget, plan)) break;
        if (new_lora) active_loras_.push_back(lora);
    }
}

void Scheduler::lora_ids(bool running, std::vector<int32_t>& out) const {
    out.clear();
    const auto add = [&out](const Sequence* s) {
        const int32_t id = s->group->lora_id;
        if (id != 0 && std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
    };
    if (running) {
        for (const Sequence* s : running_)
            add(s);
    } else {
        for (const Sequence* s : waiting_)
            add(s);
    }
}

void Scheduler::publish_checkpoint(Sequence* s) {
    if (s->checkpoint_slot < 0) return;
    if (s->checkpoint_tokens > 0 && s->checkpoint_tokens <= s->num_computed && !s->checkpoint_save_planned) {
        const int32_t blocks = s->checkpoint_tokens / kv_.block_size();
        ensure_hashes(s, blocks);
        state_->publish_snapshot(s->hashes[blocks - 1], s->checkpoint_slot);
    } else {
        state_->free_slot(s->checkpoint_slot);
    }
    s->checkpoint_slot = -1;
    s->checkpoint_tokens = 0;
    s->checkpoint_save_planned = false;
}

void Scheduler::release(Sequence* s) {
    kv_.free(s->blocks);
    if (state_) {
        publish_checkpoint(s);
        if (s->state_slot >= 0) state_->free_slot(s->state_slot);
        s->state_slot = -1;
    }
    s->num_computed = 0;
}

void Scheduler::preempt(Sequence* s, StepPlan& plan) {
    PAGODA_CHECK(s->running);
    auto it = std::find(running_.begin(), running_.end(), s);
    PAGODA_CHECK(it != running_.end());
    running_.erase(it);
    s->running = false;
    release(s);  // recompute later; its checkpoint and full blocks stay cached, so the recompute may be short
    add(s);
    plan.preempted.push_back(s);
    ++stats_.num_preemptions;
}

void Scheduler::remove(Sequence* s, SequenceEnd end) {
    // A placeholder for a token still being drawn (async scheduling) is not output yet.
    const int32_t output = s->num_output() - (s->pending_sample >= 0 ? 1 : 0);
    if (!s->group->pooling && (s->running || output > 0))
        output_lengths_.record(output, end == SequenceEnd::kModelStop);
    if (s->running) {
        auto it = std::find(running_.begin(), running_.end(), s);
        PAGODA_CHECK(it != running_.end());
        running_.erase(it);
        s->running = false;
        release(s);
    } else if (s->in_waiting) {
        waiting_.erase(s);
        s->in_waiting = false;
    }
}

void Scheduler::discard_checkpoints(const StepPlan& plan) {
    for (const ScheduledChunk& c : plan.chunks) {
        Sequence* s = c.seq;
        if (c.checkpoint_at == 0 || s->checkpoint_slot < 0) continue;
        state_->free_slot(s->checkpoint_slot);
        s->checkpoint_slot = -1;
        s->checkpoint_tokens = 0;
        s->checkpoint_save_planned = false;
    }
}

void Scheduler::complete(const StepPlan& plan) {
    const int32_t b = kv_.block_size();
    for (const ScheduledChunk& c : plan.chunks) {
        Sequence* s = c.seq;
        if (!s->running) continue;  // removed meanwhile
        const bool prompt_was_done = s->num_computed >= s->prompt_len;
        s->num_computed = c.start + c.length;
        if (c.checkpoint_at > 0) {
            s->checkpoint_tokens = c.checkpoint_at;
            s->checkpoint_save_planned = false;
            // The prompt's last reusable boundary (a hit keeps one token to run) is what the other choices and a
            // retry look for; later checkpoints overwrite each other until the sequence ends or is preempted.
            if (c.checkpoint_at == (s->prompt_len - 1) / b * b) publish_checkpoint(s);
        }
        const int32_t full = s->num_computed / b;
        if (kv_.prefix_caching() && full > s->blocks.num_published) {
            ensure_hashes(s, full);
            kv_.publish_full_blocks(s->blocks, std::span<const BlockHash>(s->hashes).first(full));
        }
        if (!prompt_was_done && s->num_computed >= s->prompt_len && s->index == 0) s->group->prompt_computed = true;
    }
}

}  // namespace pagoda::engine
