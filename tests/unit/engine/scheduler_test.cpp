// Scheduler: budget, chunked prefill mixed with decode, preemption order, priority, max_num_seqs, admission by
// expected growth (with preemption as its fallback) and by state slots.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <vector>

namespace pagoda::engine {
namespace {

struct Harness {
    Harness(SchedulerConfig config, int32_t num_blocks, int32_t block_size, bool prefix = true,
            StateCache* state = nullptr)
        : kv(num_blocks, block_size, prefix), scheduler(config, kv, state) {}

    Sequence* add(int32_t prompt_len, int32_t priority = 0, int32_t first_token = 1, int32_t max_tokens = 0,
                  int32_t lora_id = 0) {
        auto g = std::make_unique<SequenceGroup>();
        g->priority = priority;
        g->lora_id = lora_id;
        g->arrival = arrivals++;
        g->salt = block_hash_salt(0, "");
        g->max_tokens = max_tokens;
        auto s = std::make_unique<Sequence>();
        s->group = g.get();
        for (int32_t i = 0; i < prompt_len; ++i)
            s->tokens.push_back(first_token + i);
        s->prompt_len = prompt_len;
        Sequence* raw = s.get();
        groups.push_back(std::move(g));
        seqs.push_back(std::move(s));
        scheduler.add(raw);
        return raw;
    }

    // One step: schedule, complete, and "sample" a token for every sequence whose chunk reached its end.
    StepPlan& step() {
        scheduler.schedule(plan);
        scheduler.complete(plan);
        for (const ScheduledChunk& c : plan.chunks)
            if (c.samples) c.seq->tokens.push_back(7);
        return plan;
    }

    const ScheduledChunk* chunk_of(const Sequence* s) const {
        for (const ScheduledChunk& c : plan.chunks)
            if (c.seq == s) return &c;
        return nullptr;
    }

    KvCacheManager kv;
    Scheduler scheduler;
    StepPlan plan;
    int64_t arrivals = 0;
    std::deque<std::unique_ptr<SequenceGroup>> groups;
    std::deque<std::unique_ptr<Sequence>> seqs;
};

TEST(Scheduler, ChunkedPrefillMixesWithDecodeUnderTheBudget) {
    Harness h({.max_num_seqs = 4, .max_num_batched_tokens = 8}, 64, 4);
    Sequence* a = h.add(20);
    EXPECT_EQ(h.step().num_tokens, 8);
    EXPECT_FALSE(h.chunk_of(a)->samples);
    EXPECT_EQ(h.step().num_tokens, 8);
    auto& p3 = h.step();
    EXPECT_EQ(p3.num_tokens, 4);
    EXPECT_TRUE(h.chunk_of(a)->samples);
    EXPECT_EQ(a->num_computed, 20);
    Sequence* b = h.add(10, 0, 100);
    auto& p4 = h.step();  // a decodes one token, b prefills 7 of its 10
    EXPECT_EQ(p4.num_tokens, 8);
    EXPECT_EQ(h.chunk_of(a)->length, 1);
    EXPECT_EQ(h.chunk_of(b)->length, 7);
    EXPECT_FALSE(h.chunk_of(b)->samples);
    h.step();
    EXPECT_EQ(h.chunk_of(b)->length, 3);
    EXPECT_TRUE(h.chunk_of(b)->samples);
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOut) {
    Harness h({.max_num_seqs = 4, .max_num_batched_tokens = 64}, 4, 4, /*prefix*/ false);
    Sequence* a = h.add(6);
    Sequence* b = h.add(6, 0, 50);
    auto& p1 = h.step();
    EXPECT_EQ(p1.chunks.size(), 2u);
    EXPECT_EQ(h.kv.num_free_blocks(), 0);
    // Both hold 7 tokens in 2 blocks; the KV of tokens 7 and 8 fits, token 9 needs a third block for a.
    h.step();
    h.step();
    auto& p3 = h.step();
    ASSERT_EQ(p3.preempted.size(), 1u);
    EXPECT_EQ(p3.preempted[0], b);
    EXPECT_TRUE(h.chunk_of(a) != nullptr);
    EXPECT_EQ(h.chunk_of(b), nullptr);
    EXPECT_TRUE(b->in_waiting);
    EXPECT_EQ(b->num_computed, 0);
    EXPECT_TRUE(b->blocks.table.empty());
    EXPECT_EQ(h.scheduler.stats().num_preemptions, 1);
    // Once a is gone, b is recomputed from scratch (prompt plus its generated tokens).
    h.scheduler.remove(a);
    const int32_t b_tokens = static_cast<int32_t>(b->tokens.size());
    h.step();
    ASSERT_NE(h.chunk_of(b), nullptr);
    EXPECT_EQ(h.chunk_of(b)->start, 0);
    EXPECT_EQ(h.chunk_of(b)->length, b_tokens);
    h.scheduler.remove(b);
    EXPECT_EQ(h.kv.num_free_blocks(), 4);
}

TEST(Scheduler, NewerWaitsWhileOlderGrowsThenResumes) {
    // The older sequence keeps growing: the newer one is preempted and comes back once the older is done.
    Harness h({.max_num_seqs = 4, .max_num_batched_tokens = 64}, 4, 4, false);
    Sequence* a = h.add(5);
    Sequence* b = h.add(5, 0, 30);
    h.step();
    for (int i = 0; i < 10 && !b->in_waiting; ++i)
        h.step();
    EXPECT_TRUE(b->in_waiting);
    EXPECT_TRUE(a->running);
    h.scheduler.remove(a);
    h.step();
    EXPECT_TRUE(b->running);
}

TEST(Scheduler, PriorityOrdersAdmissionAndPreemption) {
    Harness h({.max_num_seqs = 2, .max_num_batched_tokens = 64, .priority_scheduling = true}, 6, 4, false);
    Sequence* low = h.add(4, /*priority*/ 5);
    Sequence* high = h.add(4, /*priority*/ 0, 20);
    Sequence* mid = h.add(4, /*priority*/ 2, 40);
    h.step();  // max_num_seqs = 2: the two most important
    EXPECT_TRUE(high->running);
    EXPECT_TRUE(mid->running);
    EXPECT_TRUE(low->in_waiting);
    // Grow until blocks run short: the less important (mid) yields, though it is not the newest.
    for (int i = 0; i < 20 && mid->running; ++i)
        h.step();
    EXPECT_TRUE(high->running);
    EXPECT_FALSE(mid->running);
}

TEST(Scheduler, RespectsMaxNumSeqsAndFcfs) {
    Harness h({.max_num_seqs = 3, .max_num_batched_tokens = 1000}, 100, 4);
    std::vector<Sequence*> s;
    for (int i = 0; i < 6; ++i)
        s.push_back(h.add(3, 0, 10 * i + 1));
    h.step();
    EXPECT_EQ(h.scheduler.num_running(), 3);
    for (int i = 0; i < 3; ++i)
        EXPECT_TRUE(s[i]->running) << i;
    h.scheduler.remove(s[1]);
    h.step();
    EXPECT_TRUE(s[3]->running);
    EXPECT_FALSE(s[4]->running);
}

TEST(Scheduler, PrefixHitSkipsCachedBlocks) {
    Harness h({.max_num_seqs = 4, .max_num_batched_tokens = 64}, 32, 4);
    Sequence* a = h.add(10);
    h.step();
    Sequence* b = h.add(10);  // same tokens 1..10
    h.step();
    ASSERT_NE(h.chunk_of(b), nullptr);
    EXPECT_EQ(h.chunk_of(b)->start, 8);  // two full blocks cached
    EXPECT_EQ(b->cached_prompt_tokens, 8);
    EXPECT_EQ(b->blocks.table[0], a->blocks.table[0]);
    EXPECT_EQ(h.kv.stats().hit_tokens, 8);
}

// Steps until `s` has produced `n` output tokens, then takes it out as the model's stop.
void run_until_output(Harness& h, Sequence* s, int32_t n, SequenceEnd end) {
    for (int i = 0; i < 1000 && s->num_output() < n; ++i)
        h.step();
    ASSERT_EQ(s->num_output(), n);
    h.scheduler.remove(s, end);
}

TEST(Scheduler, AdmissionWaitsUntilTheRunningCanGrow) {
    // 8 blocks of 4 tokens. Each request: 8 prompt tokens and up to 16 output tokens, 23 KV tokens = 6 blocks at its
    // end. Nothing is known of output lengths yet, so each is expected to use all of it: the second waits.
    for (AdmissionPolicy admission : {AdmissionPolicy::kPromptOnly, AdmissionPolicy::kReserveExpected}) {
        Harness h({.max_num_seqs = 4, .max_num_batched_tokens = 64, .admission = admission}, 8, 4, false);
        Sequence* a = h.add(8, 0, 1, 16);
        Sequence* b = h.add(8, 0, 50, 16);
        h.step();
        if (admission == AdmissionPolicy::kPromptOnly) {
            EXPECT_TRUE(b->running);  // both prompts fit now; their growth does not
            run_until_output(h, a, 16, SequenceEnd::kCut);
            EXPECT_GT(h.scheduler.stats().num_preemptions, 0);
            continue;
        }
        EXPECT_TRUE(a->running);
        EXPECT_TRUE(b->in_waiting);
        run_until_output(h, a, 16, SequenceEnd::kCut);
        h.step();
        EXPECT_TRUE(b->running);
        run_until_output(h, b, 16, SequenceEnd::kCut);
        EXPECT_EQ(h.scheduler.stats().num_preemptions, 0);
        EXPECT_EQ(h.kv.num_free_blocks(), 8);
    }
}

TEST(Scheduler, LearnedShortOutputsAdmitMoreAndPreemptionCatchesTheLongOnes) {
    // 24 blocks of 4 tokens; requests of 4 prompt and up to 60 output tokens (16 blocks at full length).
    Harness h({.max_num_seqs = 8, .max_num_batched_tokens = 64}, 24, 4, false);
    // Teach the scheduler that outputs end after 2 tokens.
    for (int i = 0; i < 64; ++i)
        run_until_output(h, h.add(4, 0, 1000 + 10 * i, 60), 2, SequenceEnd::kModelStop);
    EXPECT_LE(h.scheduler.output_lengths().expected_remaining(0, 60), 4.0);  // bins are 8 tokens wide
    // Now three requests whose outputs run on: all three start, which only pays off for short outputs...
    std::vector<Sequence*> s;
    for (int i = 0; i < 3; ++i)
        s.push_back(h.add(4, 0, 5000 + 10 * i, 60));
    h.step();
    for (Sequence* q : s)
        EXPECT_TRUE(q->running);
    // ...so growth runs out of blocks and the newest is preempted, and every one still completes.
    for (Sequence* q : s)
        run_until_output(h, q, 60, SequenceEnd::kCut);
    EXPECT_GT(h.scheduler.stats().num_preemptions, 0);
    EXPECT_EQ(h.kv.num_free_blocks(), 24);
}

TEST(Scheduler, HybridAdmissionIsBoundedByStateSlots) {
    // Plenty of KV, three state slots: a fourth sequence waits for a slot, whatever the policy.
    StateCache state(3, 0);
    Harness h({.max_num_seqs = 8, .max_num_batched_tokens = 64, .hybrid = true}, 100, 4, false, &state);
    std::vector<Sequence*> s;
    for (int i = 0; i < 4; ++i)
        s.push_back(h.add(4, 0, 100 * i + 1, 8));
    h.step();
    EXPECT_EQ(h.scheduler.num_running(), 3);
    EXPECT_TRUE(s[3]->in_waiting);
    run_until_output(h, s[0], 8, SequenceEnd::kModelStop);
    h.step();
    EXPECT_TRUE(s[3]->running);
}

TEST(Scheduler, AdmitsAtMostMaxLorasAdaptersAtOnce) {
    // Adapter slots for two: a request for a third adapter waits (later ones with a running adapter or none go
    // first, as vLLM's scheduler lets them) until a running adapter's requests end.
    Harness h({.max_num_seqs = 8, .max_num_batched_tokens = 64, .max_loras = 2}, 64, 4);
    Sequence* a = h.add(4, 0, 1, 0, /*lora_id=*/1);
    Sequence* b = h.add(4, 0, 1, 0, 2);
    Sequence* c = h.add(4, 0, 1, 0, 3);
    Sequence* d = h.add(4, 0, 1, 0, 1);
    Sequence* base = h.add(4, 0, 1, 0, 0);
    h.step();
    EXPECT_TRUE(a->running && b->running && d->running && base->running);
    EXPECT_FALSE(c->running);
    std::vector<int32_t> ids;
    h.scheduler.lora_ids(/*running=*/true, ids);
    EXPECT_EQ(ids, (std::vector<int32_t>{1, 2}));
    h.scheduler.lora_ids(/*running=*/false, ids);
    EXPECT_EQ(ids, (std::vector<int32_t>{3}));
    h.step();
    EXPECT_FALSE(c->running);
    h.scheduler.remove(b);  // adapter 2's only request ends: its slot frees
    h.step();
    EXPECT_TRUE(c->running);
}

// The runner's answer to lora_ready: whether the adapter is in `on_device`; every id asked about is recorded in
// `asked`.
void ready_when_on_device(Harness& h, const std::vector<int32_t>& on_device, std::vector<int32_t>& asked) {
    h.scheduler.set_lora_ready([&on_device, &asked](int32_t id) {
        asked.push_back(id);
        return std::find(on_device.begin(), on_device.end(), id) != on_device.end();
    });
}

TEST(Scheduler, WaitsForAnAdapterOnItsWayWhileOthersRun) {
    // The runner brings adapters to the device beside the steps (ModelRunner::lora_ready): a request whose adapter is
    // not there yet waits while other sequences run, and later requests go first; with nothing running it is admitted
    // at once (its step installs the adapter, stalling no one), without asking.
    Harness h({.max_num_seqs = 8, .max_num_batched_tokens = 64, .max_loras = 4}, 64, 4);
    std::vector<int32_t> on_device = {1}, asked;
    ready_when_on_device(h, on_device, asked);
    Sequence* first = h.add(4, 0, 1, 0, /*lora_id=*/2);  // nothing runs: admitted, adapter 2 not asked about
    h.step();
    EXPECT_TRUE(first->running);
    EXPECT_TRUE(asked.empty());
    Sequence* cold = h.add(4, 0, 1, 0, 3);
    Sequence* warm = h.add(4, 0, 1, 0, 1);
    Sequence* same = h.add(4, 0, 1, 0, 2);  // the running sequences' adapter: there, not asked about
    Sequence* base = h.add(4, 0, 1, 0, 0);
    h.step();
    EXPECT_FALSE(cold->running);
    EXPECT_TRUE(warm->running && same->running && base->running);
    EXPECT_EQ(asked, (std::vector<int32_t>{3, 1}));
    h.step();
    EXPECT_FALSE(cold->running);
    on_device.push_back(3);  // it arrived
    h.step();
    EXPECT_TRUE(cold->running);
}

TEST(Scheduler, AdaptersOnTheirWayCountAgainstTheSlots) {
    // Two slots, one taken by the running adapter: of two cold adapters only the first is asked for (brought in), the
    // second waits without being asked, so the two never take the free slot from each other.
    Harness h({.max_num_seqs = 8, .max_num_batched_tokens = 64, .max_loras = 2}, 64, 4);
    std::vector<int32_t> asked;
    h.scheduler.set_lora_ready([&](int32_t id) {
        asked.push_back(id);
        return false;
    });
    Sequence* running = h.add(4, 0, 1, 0, /*lora_id=*/1);
    h.step();
    ASSERT_TRUE(running->running);
    Sequence* first = h.add(4, 0, 1, 0, 3);
    Sequence* second = h.add(4, 0, 1, 0, 4);
    for (int i = 0; i < 3; ++i)
        h.step();
    EXPECT_FALSE(first->running || second->running);
    EXPECT_EQ(asked, (std::vector<int32_t>{3, 3, 3}));
}

TEST(Scheduler, EveryRequestOfAnAdapterOnItsWayWaits) {
    // Two requests for one cold adapter: the first finds it on its way, and the second waits for it too (admitted, it
    // would make its step install the adapter and stall the running sequences, what the paging is there to avoid).
    Harness h({.max_num_seqs = 8, .max_num_batched_tokens = 64, .max_loras = 4}, 64, 4);
    std::vector<int32_t> on_device = {1}, asked;
    ready_when_on_device(h, on_device, asked);
    Sequence* running = h.add(4, 0, 1, 0, /*lora_id=*/1);
    h.step();
    ASSERT_TRUE(running->running);
    Sequence* first = h.add(4, 0, 1, 0, 3);
    Sequence* second = h.add(4, 0, 1, 0, 3);
    h.step();
    EXPECT_FALSE(first->running || second->running);
    EXPECT_EQ(asked, (std::vector<int32_t>{3}));
    on_device.push_back(3);  // it arrived: both run
    h.step();
    EXPECT_TRUE(first->running && second->running);
}

}  // namespace
}  // namespace pagoda::engine
