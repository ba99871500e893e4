// The engine end to end with the deterministic fake model: outputs against an engine-free reference, the randomised
// property test (thousands of requests, tiny pools, cancellations), prefix-cache and batch invariance, stop
// conditions, rejections, drain and shutdown.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <thread>

#include "engine/sampler.h"
#include "fake_model_runner.h"

namespace pagoda::engine {
namespace {

using testing::FakeModelRunner;
using testing::reference_logits;

constexpr int32_t kVocab = 64;
constexpr int32_t kEos = 0;

EngineConfig small_config(bool hybrid) {
    EngineConfig c;
    c.block_size = 4;
    c.num_kv_blocks = 40;  // 160 tokens: a handful of sequences at once
    c.max_model_len = 96;
    c.max_num_seqs = 12;
    c.max_num_batched_tokens = 40;
    c.max_waiting_requests = 300;
    c.eos_token_ids = {kEos};
    c.seed = 99;
    if (hybrid) {
        c.num_state_slots = 2 * c.max_num_seqs + 8;
        c.max_state_snapshots = 8;
    }
    return c;
}

struct Expected {
    std::vector<int32_t> tokens;
    FinishReason reason = FinishReason::kNone;
    int32_t stop_token_id = -1;
};

// What a choice must produce, computed without the engine: logits straight from the token list, the same sampler.
Expected reference(const Request& req, int32_t choice, const EngineConfig& config) {
    SamplingParams p = req.params;
    apply_generation_config(p, config.generation_config);
    const int32_t prompt_len = static_cast<int32_t>(req.prompt_tokens.size());
    const int32_t max_tokens = p.max_tokens.value_or(config.max_model_len - prompt_len);
    std::vector<int32_t> tokens = req.prompt_tokens;
    std::vector<float> logits(kVocab);
    Sampler sampler(kVocab);
    Expected e;
    while (true) {
        reference_logits(tokens, logits);
        SamplingContext ctx;
        ctx.params = &p;
        ctx.prompt_tokens = std::span<const int32_t>(tokens).first(prompt_len);
        ctx.output_tokens = std::span<const int32_t>(tokens).subspan(prompt_len);
        ctx.eos_token_ids = config.eos_token_ids;
        ctx.seed = *p.seed + static_cast<uint64_t>(choice);
        const int32_t t = sampler.sample(logits, ctx).token;
        tokens.push_back(t);
        e.tokens.push_back(t);
        const auto& stops = p.stop_token_ids;
        if (std::find(stops.begin(), stops.end(), t) != stops.end() || (!p.ignore_eos && t == kEos)) {
            e.reason = FinishReason::kStop;
            e.stop_token_id = t;
            return e;
        }
        if (static_cast<int32_t>(e.tokens.size()) >= max_tokens ||
            static_cast<int32_t>(tokens.size()) >= config.max_model_len) {
            e.reason = FinishReason::kLength;
            return e;
        }
    }
}

struct Outcome {
    std::vector<std::vector<int32_t>> tokens;
    std::vector<FinishReason> reasons;
    std::vector<std::string> messages;
    std::vector<int32_t> stop_ids;
    std::vector<size_t> logprob_counts;
    std::vector<TokenLogprobs> prompt_logprobs;
    Usage usage;
    RequestTimes times;
    double last_token_time = 0.0;
    bool done = false;

    void absorb(const StreamChunk& chunk) {
        // Timestamps: ordered milestones; each token stamped, in order, within [first_token, last_token].
        times = chunk.times;
        EXPECT_GT(times.arrival, 0.0);
        if (times.scheduled > 0.0) {
            EXPECT_GE(times.scheduled, times.arrival);
        }
        if (times.first_token > 0.0) {
            EXPECT_GE(times.first_token, times.scheduled);
            EXPECT_GE(times.last_token, times.first_token);
        }
        if (tokens.size() < chunk.choices.size()) {
            tokens.resize(chunk.choices.size());
            reasons.resize(chunk.choices.size(), FinishReason::kNone);
            messages.resize(chunk.choices.size());
            stop_ids.resize(chunk.choices.size(), -1);
            logprob_counts.resize(chunk.choices.size(), 0);
        }
        for (size_t i = 0; i < chunk.choices.size(); ++i) {
            const ChoiceDelta& d = chunk.choices[i];
            tokens[i].insert(tokens[i].end(), d.token_ids.begin(), d.token_ids.end());
            logprob_counts[i] += d.logprobs.size();
            EXPECT_EQ(d.token_times.size(), d.token_ids.size());
            for (double t : d.token_times) {
                EXPECT_GE(t, times.first_token);
                EXPECT_LE(t, times.last_token);
                EXPECT_GE(t, i == 0 ? last_token_time : 0.0);
                if (i == 0) last_token_time = t;
            }
            if (d.finish_reason != FinishReason::kNone) {
                EXPECT_EQ(reasons[i], FinishReason::kNone) << "a choice finished twice";
                reasons[i] = d.finish_reason;
                messages[i] = d.finish_message;
                stop_ids[i] = d.stop_token_id;
            }
        }
        prompt_logprobs.insert(prompt_logprobs.end(), chunk.prompt_logprobs.begin(), chunk.prompt_logprobs.end());
        usage = chunk.usage;
        done = chunk.done;
    }
};

Outcome collect(RequestStream& stream) {
    Outcome o;
    StreamChunk chunk;
    while (stream.read(chunk))
        o.absorb(chunk);
    EXPECT_TRUE(o.done);
    return o;
}

void expect_matches(const Outcome& o, const Request& req, const EngineConfig& config, const std::string& what) {
    ASSERT_EQ(o.tokens.size(), static_cast<size_t>(req.params.n)) << what;
    for (int32_t i = 0; i < req.params.n; ++i) {
        const Expected e = reference(req, i, config);
        EXPECT_EQ(o.tokens[i], e.tokens) << what << " choice " << i;
        EXPECT_EQ(o.reasons[i], e.reason) << what << " choice " << i;
        EXPECT_EQ(o.stop_ids[i], e.stop_token_id) << what << " choice " << i;
    }
}

// Prompt logprobs computed straight from the token list.
void expect_prompt_logprobs(const Outcome& o, const Request& req, const std::string& what) {
    const int32_t k = *req.params.prompt_logprobs;
    const auto& prompt = req.prompt_tokens;
    ASSERT_EQ(o.prompt_logprobs.size(), prompt.size() - 1) << what;
    std::vector<float> logits(kVocab);
    std::array<TokenLogprob, kMaxTopLogprobs> top;
    for (size_t i = 1; i < prompt.size(); ++i) {
        reference_logits(std::span<const int32_t>(prompt).first(i), logits);
        const TokenLogprobs& got = o.prompt_logprobs[i - 1];
        EXPECT_NEAR(got.logprob, log_softmax_at(logits, prompt[i]), 1e-5) << what << " token " << i;
        // Rank by sorting the whole row (ties: lower id first, as top_logprobs orders them).
        std::vector<int32_t> order(logits.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
        const auto at = std::find(order.begin(), order.end(), prompt[i]) - order.begin();
        EXPECT_EQ(got.rank, static_cast<int32_t>(at) + 1) << what << " token " << i;
        const int32_t n = top_logprobs(logits, k, top);
        ASSERT_EQ(got.num_top, n) << what;
        for (int32_t j = 0; j < n; ++j) {
            EXPECT_EQ(got.top[j].token, top[j].token) << what << " token " << i;
            EXPECT_NEAR(got.top[j].logprob, top[j].logprob, 1e-5);
        }
    }
}

// Per-step invariants, checked on the engine thread.
class BudgetObserver : public StepObserver {
  public:
    explicit BudgetObserver(const EngineConfig& c) : config_(c) {}
    void on_step(const StepInput& in, const EngineStats&) override {
        if (in.batch.num_tokens > config_.max_num_batched_tokens) ++violations;
        if (in.batch.num_seqs > config_.max_num_seqs) ++violations;
        ++steps;
        max_tokens = std::max<int64_t>(max_tokens, in.batch.num_tokens);
    }
    const EngineConfig& config_;
    std::atomic<int64_t> violations{0}, steps{0}, max_tokens{0};
};

void expect_no_leaks(Engine& engine, const EngineConfig& c, FakeModelRunner& runner) {
    const EngineStats st = engine.stats();
    EXPECT_EQ(st.num_running, 0);
    EXPECT_EQ(st.num_waiting, 0);
    EXPECT_EQ(st.num_requests, 0);
    EXPECT_EQ(st.num_free_kv_blocks, c.num_kv_blocks) << "KV blocks leaked";
    EXPECT_EQ(st.num_free_state_slots, c.num_state_slots) << "state slots leaked";
    EXPECT_LE(st.max_step_tokens, c.max_num_batched_tokens);
    EXPECT_EQ(runner.error(), "");
    EXPECT_EQ(runner.state_mismatches(), 0);
}

Request make_request(std::vector<int32_t> prompt, std::optional<float> temperature, uint64_t seed, int32_t max_tokens) {
    Request r;
    r.prompt_tokens = std::move(prompt);
    r.params.temperature = temperature;
    r.params.seed = seed;
    r.params.max_tokens = max_tokens;
    return r;
}

std::vector<int32_t> tokens_from(uint32_t seed, int32_t n) {
    std::mt19937 rng(seed);
    std::vector<int32_t> v(n);
    for (auto& t : v)
        t = 1 + static_cast<int32_t>(rng() % (kVocab - 1));
    return v;
}

// ---- the randomised property test --------------------------------------------------------------------------------

struct Tracked {
    Request request;
    std::shared_ptr<RequestStream> stream;
    Outcome outcome;
    bool cancel_after_first = false;
    bool cancelled = false;
    bool checkable = false;  // greedy or seeded: the reference knows its tokens
};

void property_test(bool hybrid, bool priority, uint32_t seed, int num_requests, bool samples_on_runner = false) {
    EngineConfig config = small_config(hybrid);
    config.priority_scheduling = priority;
    config.max_waiting_requests = 40;  // below what the producer keeps in flight: some requests meet a full queue
    FakeModelRunner runner(kVocab, config.num_kv_blocks, config.block_size, config.num_state_slots);
    runner.samples_on_runner = samples_on_runner;
    BudgetObserver observer(config);
    auto created = Engine::create(config, engine_runner(runner), &observer);
    ASSERT_TRUE(created.ok()) << created.message();
    Engine& engine = **created;

    std::mt19937 rng(seed);
    auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
    auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
    auto chance = [&](double p) { return uni(0, 1) < p; };
    std::vector<std::vector<int32_t>> prefixes;
    for (int i = 0; i < 6; ++i)
        prefixes.push_back(tokens_from(seed * 31 + i, pick(0, 40)));

    std::deque<Tracked> tracked;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<size_t> ready;
    std::atomic<int> in_flight{0};
    std::atomic<int> finished{0};
    int sync_rejected = 0, async_rejected = 0, aborted = 0;

    // A chat's next turn: a finished choice's prompt and output as a new prompt, submitted as soon as the first turn
    // ends, so that it finds the blocks and (hybrid models) the state snapshot the first turn left in the caches. The
    // fake model counts any restored state that disagrees with the tokens it stands for (expect_no_leaks).
    std::vector<std::pair<Request, std::shared_ptr<RequestStream>>> next_turns;  // the consumer's until it ends
    auto submit_next_turn = [&](const Tracked& t) {
        const Outcome& o = t.outcome;
        if (o.reasons.empty() || (o.reasons[0] != FinishReason::kStop && o.reasons[0] != FinishReason::kLength)) return;
        Request r = make_request(t.request.prompt_tokens, 0.0f, 0, 3);
        r.prompt_tokens.insert(r.prompt_tokens.end(), o.tokens[0].begin(), o.tokens[0].end());
        r.params.ignore_eos = true;
        r.cache_salt = t.request.cache_salt;
        // Short ones, now and then: the small pool must keep serving the first turns.
        if (r.prompt_tokens.size() > 40 || t.stream->id() % 8 != 0 || next_turns.size() >= 200) return;
        auto stream = engine.submit(r);
        if (stream.ok()) next_turns.emplace_back(std::move(r), *stream);
    };
    // The consumer: reads whatever a notifier announced; cancels some requests from this thread.
    std::atomic<int> total{-1};
    std::thread consumer([&] {
        StreamChunk chunk;
        int done = 0;
        while (true) {
            std::deque<size_t> batch;
            {
                std::unique_lock lock(mu);
                cv.wait(lock, [&] { return !ready.empty() || (total >= 0 && done == total); });
                if (ready.empty()) break;
                std::swap(batch, ready);
            }
            for (size_t i : batch) {
                Tracked* t;
                {
                    std::lock_guard lock(mu);
                    t = &tracked[i];
                }
                if (t->outcome.done) continue;
                while (t->stream->try_read(chunk))
                    t->outcome.absorb(chunk);
                if (t->cancel_after_first && !t->cancelled && !t->outcome.done) {
                    t->cancelled = true;
                    engine.cancel(t->stream->id());
                }
                if (t->outcome.done) {
                    ++done;
                    --in_flight;
                    ++finished;
                    submit_next_turn(*t);
                }
            }
            std::lock_guard lock(mu);
            if (total >= 0 && done == total && ready.empty()) break;
        }
    });

    int submitted = 0;
    for (int i = 0; i < num_requests; ++i) {
        Request r;
        const auto& prefix = prefixes[pick(0, 5)];
        r.prompt_tokens = prefix;
        auto tail = tokens_from(seed + 1000 + i, chance(0.04) ? pick(90, 120) : pick(1, 30));
        r.prompt_tokens.insert(r.prompt_tokens.end(), tail.begin(), tail.end());
        SamplingParams& p = r.params;
        p.n = chance(0.85) ? 1 : pick(2, 3);
        p.temperature = chance(0.3) ? 0.0f : static_cast<float>(uni(0.3, 1.5));
        if (chance(0.3)) p.top_k = pick(1, 20);
        if (chance(0.3)) p.top_p = static_cast<float>(uni(0.3, 1.0));
        if (chance(0.2)) p.min_p = static_cast<float>(uni(0.0, 0.3));
        if (chance(0.2)) p.repetition_penalty = static_cast<float>(uni(0.8, 1.5));
        if (chance(0.2)) p.presence_penalty = static_cast<float>(uni(-1, 1));
        if (chance(0.2)) p.frequency_penalty = static_cast<float>(uni(-1, 1));
        if (chance(0.2)) p.logit_bias = {{pick(0, kVocab - 1), static_cast<float>(uni(-5, 5))}};
        if (chance(0.85)) p.seed = rng();
        for (int k = pick(0, 2); k > 0; --k)
            p.stop_token_ids.push_back(pick(0, kVocab - 1));
        p.ignore_eos = chance(0.1);
        if (chance(0.85)) p.max_tokens = pick(1, 40);
        if (p.max_tokens) p.min_tokens = pick(0, std::min(5, *p.max_tokens));
        if (chance(0.2)) {
            p.logprobs = true;
            p.top_logprobs = pick(0, 5);
        }
        if (chance(0.05)) p.prompt_logprobs = pick(0, 3);
        r.priority = pick(0, 3);
        if (chance(0.1)) r.cache_salt = "tenant-" + std::to_string(pick(0, 1));

        // Pace the producer so that the waiting queue is busy but mostly not full.
        while (in_flight > 32)
            std::this_thread::yield();
        auto result = engine.submit(r);
        if (!result.ok()) {
            // Only too-long requests are refused up front here, and the reason says so.
            EXPECT_NE(result.message().find("maximum context length"), std::string::npos) << result.message();
            const int32_t len = static_cast<int32_t>(r.prompt_tokens.size());
            EXPECT_TRUE(len >= config.max_model_len || len + p.max_tokens.value_or(0) > config.max_model_len);
            ++sync_rejected;
            continue;
        }
        ++in_flight;
        size_t index;
        {
            std::lock_guard lock(mu);
            tracked.push_back({});
            index = tracked.size() - 1;
            Tracked& t = tracked.back();
            t.request = r;
            t.stream = *result;
            t.checkable = p.seed.has_value() || (p.temperature && *p.temperature == 0.0f);
            t.cancel_after_first = chance(0.05);
            t.cancelled = chance(0.05);  // cancelled right away, from this thread
        }
        (*result)->set_notifier([&, index] {
            std::lock_guard lock(mu);
            ready.push_back(index);
            cv.notify_one();
        });
        {
            std::lock_guard lock(mu);
            ready.push_back(index);  // in case output came before the notifier was set
            if (tracked[index].cancelled) engine.cancel(tracked[index].stream->id());
        }
        cv.notify_one();
        ++submitted;
    }
    {
        std::lock_guard lock(mu);
        total = submitted;
    }
    cv.notify_all();
    consumer.join();

    int checked = 0, with_prompt_logprobs = 0;
    for (Tracked& t : tracked) {
        const Outcome& o = t.outcome;
        ASSERT_TRUE(o.done);
        for (size_t i = 0; i < o.reasons.size(); ++i) {
            const FinishReason reason = o.reasons[i];
            ASSERT_NE(reason, FinishReason::kNone);
            if (reason == FinishReason::kAbort || reason == FinishReason::kRejected) {
                EXPECT_FALSE(o.messages[i].empty()) << "no reason given";
            }
            if (reason == FinishReason::kAbort) {
                EXPECT_TRUE(t.cancelled) << o.messages[i];
                ++aborted;
            }
            if (reason == FinishReason::kRejected) {
                EXPECT_NE(o.messages[i].find("queue is full"), std::string::npos) << o.messages[i];
                ++async_rejected;
            }
            if (t.request.params.logprobs) {
                EXPECT_EQ(o.logprob_counts[i], o.tokens[i].size());
            }
            if (!t.checkable || reason == FinishReason::kRejected) continue;
            SamplingParams p = t.request.params;
            if (!p.seed) p.seed = 0;  // greedy: any seed
            Request r = t.request;
            r.params = p;
            const Expected e = reference(r, static_cast<int32_t>(i), config);
            if (reason == FinishReason::kAbort) {
                ASSERT_LE(o.tokens[i].size(), e.tokens.size());
                EXPECT_TRUE(std::equal(o.tokens[i].begin(), o.tokens[i].end(), e.tokens.begin()))
                    << "a cancelled choice must be a prefix of its full output";
            } else {
                EXPECT_EQ(o.tokens[i], e.tokens);
                EXPECT_EQ(reason, e.reason);
                EXPECT_EQ(o.stop_ids[i], e.stop_token_id);
                ++checked;
            }
        }
        EXPECT_LE(o.usage.cached_tokens, o.usage.prompt_tokens);
        if (t.request.params.prompt_logprobs && !o.reasons.empty() &&
            (o.reasons[0] == FinishReason::kStop || o.reasons[0] == FinishReason::kLength)) {
            expect_prompt_logprobs(o, t.request, "property");
            ++with_prompt_logprobs;
        }
    }
    // The next turns, submitted as their first turns ended (below).
    size_t next_checked = 0;
    for (auto& [r, stream] : next_turns) {
        const Outcome o = collect(*stream);
        if (o.reasons[0] == FinishReason::kRejected) continue;  // the waiting queue was full
        expect_matches(o, r, config, "next turn");
        ++next_checked;
    }
    EXPECT_GT(next_checked, static_cast<size_t>(num_requests / 200));

    expect_no_leaks(engine, config, runner);
    const EngineStats st = engine.stats();
    EXPECT_EQ(observer.violations, 0);
    EXPECT_GT(st.num_preemptions, 0) << "the pool was meant to force preemption";
    EXPECT_GT(st.prefix_hit_tokens, 0);
    EXPECT_GT(checked, num_requests / 3);
    EXPECT_GT(with_prompt_logprobs, 0);
    if (hybrid) {
        EXPECT_GT(st.state_snapshot_hits, 0);
    }
    // Async scheduling: most steps went out before the one ahead of them was read (penalties wait in the runner for
    // the tokens; only steps with prompt-logprobs rows are read at once).
    if (testing::testing_async_scheduling()) {
        EXPECT_GT(st.num_steps_launched_ahead, st.num_steps * 3 / 4);
    } else {
        EXPECT_EQ(st.num_steps_launched_ahead, 0);
    }
    std::printf(
        "[ property ] hybrid=%d priority=%d requests=%d checked=%d sync_rejected=%d async_rejected=%d "
        "aborted=%d steps=%lld launched_ahead=%lld preemptions=%lld prefix_hit=%lld/%lld snapshot_hits=%lld "
        "max_step_tokens=%lld\n",
        hybrid, priority, num_requests, checked, sync_rejected, async_rejected, aborted,
        static_cast<long long>(st.num_steps), static_cast<long long>(st.num_steps_launched_ahead),
        static_cast<long long>(st.num_preemptions), static_cast<long long>(st.prefix_hit_tokens),
        static_cast<long long>(st.prefix_queried_tokens), static_cast<long long>(st.state_snapshot_hits),
        static_cast<long long>(st.max_step_tokens));
}

TEST(EngineProperty, DenseFcfs) {
    property_test(false, false, 1234, 2500);
}
TEST(EngineProperty, HybridPriority) {
    property_test(true, true, 4321, 2500);
}
// The same checks when the runner samples (the device-sampler contract: only prompt-logprobs rows come back).
TEST(EngineProperty, DenseRunnerSamples) {
    property_test(false, false, 1234, 1000, true);
}

// ---- focused behaviour -------------------------------------------------------------------------------------------

std::vector<Request> crowd(uint32_t seed, int n) {
    std::mt19937 rng(seed);
    std::vector<Request> out;
    const auto shared = tokens_from(seed, 20);
    for (int i = 0; i < n; ++i) {
        auto prompt = shared;
        auto tail = tokens_from(seed + i + 1, 1 + static_cast<int32_t>(rng() % 25));
        prompt.insert(prompt.end(), tail.begin(), tail.end());
        Request r = make_request(prompt, i % 3 == 0 ? std::optional<float>(0.0f) : std::optional<float>(0.9f), rng(),
                                 10 + static_cast<int32_t>(rng() % 30));
        r.params.top_k = i % 2 ? 8 : 0;
        r.params.ignore_eos = true;
        out.push_back(r);
    }
    return out;
}

void batch_invariance(bool hybrid) {
    const auto requests = crowd(hybrid ? 77 : 78, 24);
    // Each alone, in a roomy engine without prefix caching.
    EngineConfig roomy = small_config(hybrid);
    roomy.num_kv_blocks = 200;
    roomy.enable_prefix_caching = false;
    std::vector<Outcome> alone;
    {
        FakeModelRunner runner(kVocab, roomy.num_kv_blocks, roomy.block_size, roomy.num_state_slots);
        auto engine = Engine::create(roomy, engine_runner(runner));
        ASSERT_TRUE(engine.ok()) << engine.message();
        for (const Request& r : requests)
            alone.push_back(collect(**(*engine)->submit(r)));
        expect_no_leaks(**engine, roomy, runner);
    }
    // All at once in a tight engine with prefix caching: chunking and cache hits happen, and preemption when
    // admission looks at the prompt only. Reserving the growth (every output here runs to max_tokens, so the whole
    // max_tokens) never preempts.
    for (AdmissionPolicy admission : {AdmissionPolicy::kPromptOnly, AdmissionPolicy::kReserveExpected}) {
        const bool prompt_only = admission == AdmissionPolicy::kPromptOnly;
        SCOPED_TRACE(prompt_only ? "admission by prompt" : "admission by expected growth");
        EngineConfig tight = small_config(hybrid);
        tight.admission = admission;
        FakeModelRunner runner(kVocab, tight.num_kv_blocks, tight.block_size, tight.num_state_slots);
        auto engine = Engine::create(tight, engine_runner(runner));
        ASSERT_TRUE(engine.ok());
        (*engine)->pause();  // all at once, however loaded the machine is (see PromptLogprobsOverChunksAndPreemption)
        std::vector<std::shared_ptr<RequestStream>> streams;
        for (const Request& r : requests)
            streams.push_back(*(*engine)->submit(r));
        (*engine)->resume();
        for (size_t i = 0; i < requests.size(); ++i) {
            const Outcome crowded = collect(*streams[i]);
            EXPECT_EQ(crowded.tokens, alone[i].tokens) << "request " << i;
            EXPECT_EQ(crowded.reasons, alone[i].reasons) << "request " << i;
            expect_matches(crowded, requests[i], tight, "request " + std::to_string(i));
        }
        const EngineStats st = (*engine)->stats();
        if (prompt_only) {
            EXPECT_GT(st.num_preemptions, 0);
        } else {
            EXPECT_EQ(st.num_preemptions, 0);
        }
        // Async scheduling: no request here reads its tokens in sampling, so steps go out back to back.
        if (testing::testing_async_scheduling()) {
            EXPECT_GT(st.num_steps_launched_ahead, st.num_steps * 3 / 4);
        }
        EXPECT_GT(st.prefix_hit_tokens, 0);
        expect_no_leaks(**engine, tight, runner);
    }
}

TEST(Engine, BatchInvarianceDense) {
    batch_invariance(false);
}
TEST(Engine, BatchInvarianceHybrid) {
    batch_invariance(true);
}

void prefix_hit_equals_miss(bool hybrid) {
    EngineConfig config = small_config(hybrid);
    FakeModelRunner runner(kVocab, config.num_kv_blocks, config.block_size, config.num_state_slots);
    auto engine = Engine::create(config, engine_runner(runner));
    ASSERT_TRUE(engine.ok());
    Engine& e = **engine;
    // Turn 1 of a chat, then turn 2 = turn 1 + its answer + a new question.
    Request turn1 = make_request(tokens_from(5, 23), 0.8f, 17, 12);
    turn1.params.ignore_eos = true;
    const Outcome o1 = collect(**e.submit(turn1));
    expect_matches(o1, turn1, config, "turn 1");
    EXPECT_EQ(o1.usage.cached_tokens, 0);

    Request again = turn1;  // the same request once more: its prompt's full blocks are cached
    const Outcome o1b = collect(**e.submit(again));
    EXPECT_EQ(o1b.tokens, o1.tokens);
    EXPECT_EQ(o1b.usage.cached_tokens, 20);  // (23 - 1) / 4 full blocks

    Request turn2 = turn1;
    turn2.prompt_tokens.insert(turn2.prompt_tokens.end(), o1.tokens[0].begin(), o1.tokens[0].end());
    const auto question = tokens_from(6, 7);
    turn2.prompt_tokens.insert(turn2.prompt_tokens.end(), question.begin(), question.end());
    const EngineStats before = e.stats();
    const Outcome o2 = collect(**e.submit(turn2));
    expect_matches(o2, turn2, config, "turn 2");
    const EngineStats after = e.stats();
    // The history (23 + 12 = 35 tokens: 32 in full blocks, the checkpoint saved while decoding) is reused.
    EXPECT_GE(o2.usage.cached_tokens, 32);
    EXPECT_GE(after.prefix_hit_tokens - before.prefix_hit_tokens, 32);
    if (hybrid) {
        EXPECT_GT(after.state_snapshot_hits, before.state_snapshot_hits);
    }
    expect_no_leaks(e, config, runner);

    // Another salt shares nothing.
    Request salted = turn2;
    salted.cache_salt = "other";
    const Outcome o3 = collect(**e.submit(salted));
    EXPECT_EQ(o3.tokens, o2.tokens);
    EXPECT_EQ(o3.usage.cached_tokens, 0);
}

TEST(Engine, PrefixHitEqualsMissDense) {
    prefix_hit_equals_miss(false);
}
TEST(Engine, PrefixHitEqualsMissHybrid) {
    prefix_hit_equals_miss(true);
}

// Hybrid: a sequence that stops on the token drawn just before its decode reaches a block boundary. With async
// scheduling the step that saves the state at that boundary into the sequence's checkpoint slot is already launched
// when the engine reads the stop; the slot holds the previous boundary's state until then, and must not be offered
// as that boundary's snapshot. The next turn (prompt + answer) must give the reference tokens from a consistent state.
TEST(Engine, StopBeforeABoundaryLeavesNoStaleSnapshot) {
    EngineConfig config = small_config(true);
    const int32_t b = config.block_size;
    const std::vector<int32_t> prompt = tokens_from(31, 10);
    Request free_run = make_request(prompt, 0.0f, 0, 24);
    free_run.params.ignore_eos = true;
    const Expected full = reference(free_run, 0, config);
    // The first output j >= 2b whose position p + j is one before a boundary and whose token is new.
    const int32_t p = static_cast<int32_t>(prompt.size());
    int32_t stop_at = -1;
    for (int32_t j = 2 * b; j < static_cast<int32_t>(full.tokens.size()) && stop_at < 0; ++j)
        if ((p + j + 1) % b == 0 && full.tokens[j] != kEos &&
            std::find(full.tokens.begin(), full.tokens.begin() + j, full.tokens[j]) == full.tokens.begin() + j)
            stop_at = j;
    ASSERT_GE(stop_at, 0) << "no output position fits; change the prompt";
    FakeModelRunner runner(kVocab, config.num_kv_blocks, config.block_size, config.num_state_slots);
    auto engine = Engine::create(config, engine_runner(runner));
    ASSERT_TRUE(engine.ok());
    Engine& e = **engine;
    Request turn1 = free_run;
    turn1.params.stop_token_ids = {full.tokens[stop_at]};
    const Outcome o1 = collect(**e.submit(turn1));
    ASSERT_EQ(o1.reasons[0], FinishReason::kStop);
    ASSERT_EQ(o1.tokens[0].size(), static_cast<size_t>(stop_at + 1));
    Request turn2 = make_request(prompt, 0.0f, 0, 8);
    turn2.prompt_tokens.insert(turn2.prompt_tokens.end(), o1.tokens[0].begin(), o1.tokens[0].end());
    turn2.params.ignore_eos = true;
    const Outcome o2 = collect(**e.submit(turn2));
    expect_matches(o2, turn2, config, "the next turn");
    EXPECT_GT(o2.usage.cached_tokens, 0);
    expect_no_leaks(e, config, runner);
}

TEST(Engine, NChoicesSharePromptBlocksAndDiffer) {
    EngineConfig config = small_config(false);
    FakeModelRunner runner(kVocab, config.num_kv_blocks, config.block_size, 0);
    auto engine = Engine::create(config, engine_runner(runner));
    ASSERT_TRUE(engine.ok());
    Request r = make_request(tokens_from(9, 30), 1.0f, 5, 8);
    r.params.n = 3;
    r.params.ignore_eos = true;
    const Outcome o = collect(**(*engine)->submit(r));
    expect_matches(o, r, config, "n=3");
    EXPECT_NE(o.tokens[0], o.tokens[1]);
    const EngineStats st = (*engine)->stats();
    EXPECT_GE(st.prefix_hit_tokens, 2 * 28);  // choices 1 and 2 found the prompt's 7 full blocks
    EXPECT_EQ(o.usage.completion_tokens, 24);
}

TEST(Engine, PromptLogprobsOverChunksAndPreemption) {
    for (bool hybrid : {false, true}) {
        EngineConfig config = small_config(hybrid);
        config.admission = AdmissionPolicy::kPromptOnly;  // so that the crowd below is preempted
        FakeModelRunner runner(kVocab, config.num_kv_blocks, config.block_size, config.num_state_slots);
        auto engine = Engine::create(config, engine_runner(runner));
        ASSERT_TRUE(engine.ok());
        Engine& e = **engine;
        // 70 prompt tokens over a 40-token budget: two chunks; the prefix is cached first, and must not be used.
        Request warm = make_request(tokens_from(21, 70), 0.0f, 0, 5);
        collect(**e.submit(warm));
        Request r = warm;
        r.params.prompt_logprobs = 4;
        r.params.n = 2;
        const Outcome o = collect(**e.submit(r));
        expect_matches(o, r, config, "prompt_logprobs");
        expect_prompt_logprobs(o, r, hybrid ? "hybrid" : "dense");
        EXPECT_EQ(o.usage.cached_tokens, 0);
        // In a crowd that forces preemption, each prompt position is still reported once.
        std::vector<Request> requests = crowd(31, 16);
        for (Request& q : requests)
            q.params.prompt_logprobs = 1;
        // Paused while they arrive: on a loaded machine the engine would otherwise finish the first ones before the
        // last are submitted, and the pool would never be short.
        e.pause();
        std::vector<std::shared_ptr<RequestStream>> streams;
        for (const Request& q : requests)
            streams.push_back(*e.submit(q));
        e.resume();
        for (size_t i = 0; i < requests.size(); ++i) {
            const Outcome oi = collect(*streams[i]);
            expect_matches(oi, requests[i], config, "crowd " + std::to_string(i));
            expect_prompt_logprobs(oi, requests[i], "crowd " + std::to_string(i));
        }
        EXPECT_GT(e.stats().num_preemptions, 0);
        expect_no_leaks(e, config, runner);
    }
}

TEST(Engine, StopConditions) {
    EngineConfig config = small_config(false);
    FakeModelRunner runner(kVocab, config.num_kv_blocks, config.block_size, 0);
    auto engine = Engine::create(config, engine_runner(runner));
    ASSERT_TRUE(engine.ok());
    Engine& e = **engine;
    const auto prompt = tokens_from(11, 10);
    Request base = make_request(prompt, 0.0f, 0, 30);
    base.params.ignore_eos = true;
    const Expected free_run = reference(base, 0, config);
    ASSERT_EQ(free_run.tokens.size(), 30u);

    // max_tokens: "length" with exactly that many tokens.
    Request len = base;
    len.params.max_tokens = 5;
    Outcome o = collect(**e.submit(len));
    EXPECT_EQ(o.tokens[0], std::vector<int32_t>(free_run.tokens.begin(), free_run.tokens.begin() + 5));
    EXPECT_EQ(o.reasons[0], FinishReason::kLength);

    // A stop id: ends at its first occurrence, which is included; min_tokens pushes it later.
    const int32_t stop = free_run.tokens[3];
    Request st = base;
    st.params.stop_token_ids = {stop};
    o = collect(**e.submit(st));
    const size_t first = std::find(free_run.tokens.begin(), free_run.tokens.end(), stop) - free_run.tokens.begin();
    EXPECT_EQ(o.tokens[0], std::vector<int32_t>(free_run.tokens.begin(), free_run.tokens.begin() + first + 1));
    EXPECT_EQ(o.reasons[0], FinishReason::kStop);
    EXPECT_EQ(o.stop_ids[0], stop);
    st.params.min_tokens = static_cast<int32_t>(first) + 2;
    o = collect(**e.submit(st));
    expect_matches(o, st, config, "min_tokens");
    for (size_t i = 0; i + 1 < std::min<size_t>(o.tokens[0].size(), first + 2); ++i)
        EXPECT_NE(o.tokens[0][i], stop);

    // EOS stops unless ignore_eos: bias EOS up so that greedy picks it at once.
    Request eos = base;
    eos.params.ignore_eos = false;
    eos.params.logit_bias = {{kEos, 100.0f}};
    o = collect(**e.submit(eos));
    EXPECT_EQ(o.tokens[0], std::vector<int32_t>{kEos});
    EXPECT_EQ(o.reasons[0], FinishReason::kStop);
    EXPECT_EQ(o.stop_ids[0], kEos);
    eos.params.ignore_eos = true;
    o = collect(**e.submit(eos));
    EXPECT_EQ(o.tokens[0].size(), 30u);
    EXPECT_EQ(o.reasons[0], FinishReason::kLength);

    // max_model_len: without max_tokens, a request runs up to the context length.
    Request full = base;
    full.params.max_tokens.reset();
    o = collect(**e.submit(full));
    EXPECT_EQ(o.tokens[0].size(), static_cast<size_t>(config.max_model_len) - prompt.size());
    EXPECT_EQ(o.reasons[0], FinishReason::kLength);
    expect_no_leaks(e, config, runner);
}

TEST(Engine, RejectsWithReasons) {
    EngineConfig config = small_config(false);
    config.max_waiting_requests = 2;
    FakeModelRunner runner(kVocab, config.num_kv_blocks, config.block_size, 0);
    auto engine = Engine::create(config, engine_runner(runner));
    ASSERT_TRUE(engine.ok());
    Engine& e = **engine;
    auto too_long = e.submit(make_request(tokens_from(1, 96), 0.0f, 0, 1));
    ASSERT_FALSE(too_long.ok());
    EXPECT_NE(too_long.message().find("maximum context length is 96"), std::string::npos) << too_long.message();
    auto too_long2 = e.submit(make_request(tokens_from(1, 90), 0.0f, 0, 10));
    ASSERT_FALSE(too_long2.ok());
    EXPECT_NE(too_long2.message().find("max_tokens is 10"), std::string::npos) << too_long2.message();
    Request bad = make_request(tokens_from(1, 5), -1.0f, 0, 1);
    EXPECT_FALSE(e.submit(bad).ok());
    EXPECT_FALSE(e.submit(make_request({}, 0.0f, 0, 1)).ok());
    EXPECT_FALSE(e.submit(make_request({kVocab}, 0.0f, 0, 1)).ok());

    // A full waiting queue: step 1 waits until all 40 are posted, so they reach the engine together and those
    // beyond the bound come back rejected with the reason.
    std::atomic<bool> all_posted{false};
    runner.before_step = [&](int64_t step) {
        if (step == 1)
            while (!all_posted)
                std::this_thread::yield();
    };
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (int i = 0; i < 40; ++i)
        streams.push_back(*e.submit(make_request(tokens_from(i, 8), 0.0f, 0, 20)));
    all_posted = true;
    int rejected = 0;
    for (auto& s : streams) {
        const Outcome o = collect(*s);
        if (o.reasons[0] == FinishReason::kRejected) {
            ++rejected;
            EXPECT_NE(o.messages[0].find("waiting queue is full"), std::string::npos);
            EXPECT_TRUE(o.tokens[0].empty());
        }
    }
    EXPECT_GE(rejected, 40 - config.max_num_seqs - config.max_waiting_requests);  // step 1 admits at most 12
    expect_no_leaks(e, config, runner);
}

TEST(Engine, CancelDrainShutdown) {
    EngineConfig config = small_config(true);
    FakeModelRunner runner(kVocab, config.num_kv_blocks, config.block_size, config.num_state_slots);
    auto engine = Engine::create(config, engine_runner(runner));
    ASSERT_TRUE(engine.ok());
    Engine& e = **engine;
    Request r = make_request(tokens_from(2, 10), 0.0f, 0, 80);
    r.params.ignore_eos = true;
    // The cancel arrives from another thread while step 3 runs (the hook waits for it to be posted).
    std::atomic<RequestId> id{0};
    runner.before_step = [&](int64_t step) {
        if (step != 3) return;
        while (id == 0)
            std::this_thread::yield();
        e.cancel(id);
    };
    auto s = *e.submit(r);
    id = s->id();
    const Outcome o = collect(*s);
    // With async scheduling a step launched before the cancel may still be running the hook: stats() returns once
    // the engine thread has read it.
    (void)e.stats();
    runner.before_step = nullptr;
    EXPECT_EQ(o.reasons[0], FinishReason::kAbort);
    EXPECT_EQ(o.messages[0], "cancelled");
    // Steps 1..3 ran (the prompt may take two of them: hybrid prefills end on block boundaries), then nothing more.
    // With async scheduling the cancel may come before the engine read step 2, whose token is then dropped.
    if (!testing::testing_async_scheduling()) {
        ASSERT_GE(o.tokens[0].size(), 2u);
    }
    EXPECT_LE(o.tokens[0].size(), 3u);
    const Expected full = reference(r, 0, config);
    EXPECT_TRUE(std::equal(o.tokens[0].begin(), o.tokens[0].end(), full.tokens.begin()));
    e.cancel(s->id());  // unknown now: ignored
    e.cancel(123456);

    // Drain: in-flight requests finish, new ones are rejected, the future becomes ready.
    auto running = *e.submit(make_request(tokens_from(3, 10), 0.0f, 0, 20));
    auto drained = e.drain();
    auto late = *e.submit(make_request(tokens_from(4, 10), 0.0f, 0, 20));
    const Outcome done = collect(*running);
    EXPECT_EQ(done.reasons[0], FinishReason::kLength);
    const Outcome refused = collect(*late);
    EXPECT_EQ(refused.reasons[0], FinishReason::kRejected);
    EXPECT_NE(refused.messages[0].find("draining"), std::string::npos);
    drained.get();
    expect_no_leaks(e, config, runner);

    // Shutdown aborts what is in flight and frees everything; later calls fail cleanly.
    e.shutdown();
    EXPECT_FALSE(e.submit(make_request(tokens_from(4, 10), 0.0f, 0, 20)).ok());
    e.drain().get();
    expect_no_leaks(e, config, runner);
}

TEST(Engine, LatestStatsNeverWaitsAndSettles) {
    EngineConfig config = small_config(false);
    FakeModelRunner runner(kVocab, config.num_kv_blocks, config.block_size, 0);
    // Before the first step: the pool as configured.
    auto engine = Engine::create(config, engine_runner(runner));
    ASSERT_TRUE(engine.ok());
    Engine& e = **engine;
    EXPECT_EQ(e.latest_stats().num_kv_blocks, config.num_kv_blocks);
    // While a step is held up, latest_stats() answers at once (stats() would wait for the step).
    std::atomic<bool> release{false}, in_step{false};
    runner.before_step = [&](int64_t step) {
        if (step != 2) return;
        in_step = true;
        while (!release)
            std::this_thread::yield();
    };
    Request r = make_request(tokens_from(5, 10), 0.0f, 0, 6);
    r.params.ignore_eos = true;
    auto s = *e.submit(r);
    while (!in_step)
        std::this_thread::yield();
    const EngineStats during = e.latest_stats();
    EXPECT_EQ(during.num_running, 1);
    EXPECT_EQ(during.num_requests, 1);
    release = true;
    const Outcome o = collect(*s);
    EXPECT_EQ(o.tokens[0].size(), 6u);
    EXPECT_GT(o.times.scheduled, 0.0);
    EXPECT_GT(o.times.first_token, 0.0);
    // Published before the stream heard of the step that ended the request: idle as soon as the reader saw the end.
    const EngineStats after = e.latest_stats();
    EXPECT_EQ(after.num_running, 0);
    EXPECT_EQ(after.num_requests, 0);
    EXPECT_EQ(after.num_generated_tokens, 6);
    EXPECT_EQ(after.num_free_kv_blocks, config.num_kv_blocks);
    runner.before_step = nullptr;
    expect_no_leaks(e, config, runner);
}

TEST(Engine, PauseHoldsStepsAndCancelStillWorks) {
    EngineConfig config = small_config(false);
    FakeModelRunner runner(kVocab, config.num_kv_blocks, config.block_size, 0);
    auto engine = Engine::create(config, engine_runner(runner));
    ASSERT_TRUE(engine.ok());
    Engine& e = **engine;
    e.pause();
    Request r = make_request(tokens_from(12, 10), 0.0f, 0, 20);
    auto a = *e.submit(r);
    auto b = *e.submit(r);
    EXPECT_EQ(e.stats().num_steps, 0);  // messages are handled in order: both submits, no step while paused
    EXPECT_EQ(e.stats().num_waiting, 2);
    e.cancel(b->id());
    const Outcome ob = collect(*b);
    EXPECT_EQ(ob.reasons[0], FinishReason::kAbort);
    EXPECT_TRUE(ob.tokens[0].empty());
    e.resume();
    const Outcome oa = collect(*a);
    expect_matches(oa, r, config, "after resume");
    expect_no_leaks(e, config, runner);
}

TEST(Engine, ShutdownAbortsInFlight) {
    EngineConfig config = small_config(false);
    FakeModelRunner runner(kVocab, config.num_kv_blocks, config.block_size, 0);
    auto engine = Engine::create(config, engine_runner(runner));
    ASSERT_TRUE(engine.ok());
    // The shutdown request is posted during step 5, so requests are in flight when it is handled.
    runner.before_step = [&](int64_t step) {
        if (step == 5) (*engine)->begin_shutdown();
    };
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (int i = 0; i < 30; ++i) {
        Request r = make_request(tokens_from(i, 20), 0.0f, 0, 70);
        r.params.ignore_eos = true;
        auto s = (*engine)->submit(r);
        if (!s.ok()) {  // the engine may already have shut down
            EXPECT_NE(s.message().find("shut down"), std::string::npos) << s.message();
            break;
        }
        streams.push_back(*s);
    }
    (*engine)->shutdown();
    int aborted = 0;
    for (auto& s : streams) {
        const Outcome o = collect(*s);
        if (o.reasons[0] == FinishReason::kAbort) {
            ++aborted;
            EXPECT_NE(o.messages[0].find("shutting down"), std::string::npos);
        }
    }
    EXPECT_GT(aborted, 0);
    expect_no_leaks(**engine, config, runner);
}

// A request never read until it ends (max_unread_tokens 5): its choices end when the first crosses the limit.
Outcome slow_reader_outcome(int32_t n, float presence_penalty) {
    EngineConfig config = small_config(false);
    config.max_unread_tokens = 5;
    FakeModelRunner runner(kVocab, config.num_kv_blocks, config.block_size, 0);
    auto engine = Engine::create(config, engine_runner(runner));
    EXPECT_TRUE(engine.ok());
    Request r = make_request(tokens_from(8, 10), 0.0f, 0, 50);
    r.params.ignore_eos = true;
    r.params.n = n;
    r.params.presence_penalty = presence_penalty;
    auto s = *(*engine)->submit(r);
    (*engine)->drain().get();  // never read until the request has ended
    const Outcome o = collect(*s);
    EXPECT_EQ(runner.error(), "");
    return o;
}

TEST(Engine, SlowReaderIsCancelled) {
    const Outcome o = slow_reader_outcome(1, 0.0f);
    EXPECT_EQ(o.reasons[0], FinishReason::kAbort);
    EXPECT_NE(o.messages[0].find("fell behind"), std::string::npos);
    EXPECT_EQ(o.tokens[0].size(), 6u);  // the token that crossed the limit is delivered too
}

// Two choices with a penalty: the first choice's token crosses the limit and ends the request, the second choice's
// token of that step is dropped. With async scheduling the second choice already has a row in the step launched
// before, whose sampling (a penalty reads the tokens so far) must not see its unfilled placeholder.
TEST(Engine, SlowReaderOfTwoPenalisedChoicesIsCancelled) {
    const Outcome o = slow_reader_outcome(2, 0.5f);
    EXPECT_EQ(o.reasons[0], FinishReason::kAbort);
    EXPECT_EQ(o.reasons[1], FinishReason::kAbort);
}

// A request whose step `fail_at_step` fails ends with the runner's error; nothing of that step was cached (with async
// scheduling a step is committed, its full blocks and a hybrid model's prompt snapshot offered to the caches, before
// it runs, and the step launched on it fails too): the same request again runs to the reference output.
void expect_failure_leaves_nothing_cached(bool hybrid, int64_t fail_at_step, const Request& r) {
    SCOPED_TRACE(std::string(hybrid ? "hybrid" : "dense") + ", step " + std::to_string(fail_at_step) + " fails");
    EngineConfig config = small_config(hybrid);
    FakeModelRunner runner(kVocab, config.num_kv_blocks, config.block_size, config.num_state_slots);
    runner.fail_at_step = fail_at_step;
    auto engine = Engine::create(config, engine_runner(runner));
    ASSERT_TRUE(engine.ok());
    Engine& e = **engine;
    const Outcome o = collect(**e.submit(r));
    EXPECT_EQ(o.reasons[0], FinishReason::kAbort);
    EXPECT_NE(o.messages[0].find("injected failure"), std::string::npos) << o.messages[0];
    const Outcome again = collect(**e.submit(r));
    expect_matches(again, r, config, "after the failure");
    expect_no_leaks(e, config, runner);
}

TEST(Engine, FailedStepAbortsItsRequestsOnly) {
    Request r = make_request(tokens_from(13, 30), 0.0f, 0, 20);
    r.params.ignore_eos = true;
    expect_failure_leaves_nothing_cached(true, 4, r);
}

// The failed step is the prompt's (four full blocks in one prefill step).
TEST(Engine, FailedPrefillLeavesNothingCached) {
    Request r = make_request(tokens_from(21, 17), 0.0f, 0, 6);
    r.params.ignore_eos = true;
    for (bool hybrid : {false, true})
        expect_failure_leaves_nothing_cached(hybrid, 1, r);
}

TEST(Engine, ConfigErrors) {
    FakeModelRunner runner(kVocab, 4, 4, 0);
    EngineConfig c = small_config(false);
    c.num_kv_blocks = 4;  // 16 tokens < max_model_len
    auto e = Engine::create(c, engine_runner(runner));
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.message().find("cannot hold one sequence"), std::string::npos);
    c = small_config(true);
    c.num_state_slots = 3;
    EXPECT_FALSE(Engine::create(c, engine_runner(runner)).ok());
}

}  // namespace
}  // namespace pagoda::engine
