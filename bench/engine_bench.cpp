// Scheduler + KV manager CPU time per step: 1024 running sequences decoding with a null model (issue 4 goal:
// <= 100 us per step), with and without prefix caching, and with a waiting request that does not fit (admission
// then projects the running sequences' growth every step). And the whole engine's host time per step around a
// model that takes a fixed time a step (a stand-in for the GPU), with and without async scheduling: how long the
// device would wait on the host between steps.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/engine.h"
#include "engine/kv_cache_manager.h"
#include "engine/pipelined_runner.h"
#include "engine/scheduler.h"

namespace pagoda::engine {
namespace {

void BM_SchedulerDecodeStep(benchmark::State& state) {
    const int32_t num_seqs = static_cast<int32_t>(state.range(0));
    const bool prefix = state.range(1) != 0;
    const bool blocked_waiter = state.range(2) != 0;
    const int32_t block = 16, prompt = 64, max_steps = 3000;
    KvCacheManager kv(num_seqs * ((prompt + max_steps) / block + 2), block, prefix);
    Scheduler scheduler({.max_num_seqs = num_seqs + 1, .max_num_batched_tokens = 8192}, kv, nullptr);
    std::deque<SequenceGroup> groups;
    std::deque<Sequence> seqs;
    for (int32_t i = 0; i < num_seqs; ++i) {
        SequenceGroup& g = groups.emplace_back();
        g.arrival = i;
        g.salt = block_hash_salt(0, "");
        g.max_tokens = max_steps + 8;
        Sequence& s = seqs.emplace_back();
        s.group = &g;
        for (int32_t t = 0; t < prompt; ++t)
            s.tokens.push_back(i * 131 + t);
        s.tokens.reserve(prompt + max_steps + 8);
        s.prompt_len = prompt;
        scheduler.add(&s);
    }
    StepPlan plan;
    auto step = [&] {
        scheduler.schedule(plan);
        scheduler.complete(plan);
        for (const ScheduledChunk& c : plan.chunks)
            if (c.samples) c.seq->tokens.push_back(7);
    };
    while (scheduler.num_waiting() > 0 || plan.chunks.empty() || plan.chunks[0].length > 1)
        step();  // prefill
    if (blocked_waiter) {
        // A prompt longer than the pool's slack beyond the running sequences' reserved growth, and a long output.
        SequenceGroup& g = groups.emplace_back();
        g.arrival = num_seqs;
        g.max_tokens = max_steps;
        Sequence& s = seqs.emplace_back();
        s.group = &g;
        s.tokens.assign(40'000, 3);
        s.prompt_len = static_cast<int32_t>(s.tokens.size());
        scheduler.add(&s);
    }
    int64_t steps = 0;
    for (auto _ : state) {
        if (steps++ >= max_steps) {
            state.SkipWithError("step budget of the pool exhausted");
            break;
        }
        step();
        benchmark::DoNotOptimize(plan.num_tokens);
    }
    state.counters["seqs"] = static_cast<double>(plan.chunks.size());
    if (blocked_waiter && scheduler.num_waiting() != 1) state.SkipWithError("the waiting request was admitted");
}
BENCHMARK(BM_SchedulerDecodeStep)
    ->ArgNames({"seqs", "prefix", "blocked_waiter"})
    ->Args({1024, 1, 0})
    ->Args({1024, 0, 0})
    ->Args({1024, 1, 1})
    ->Args({1024, 0, 1})
    ->Iterations(2000)
    ->Unit(benchmark::kMicrosecond);

// A model that takes `device_us` of wall time a step and samples token 1 for every row. It spins meanwhile, as the
// host thread waiting for a GPU does (CUDA's default for a synchronising thread) and as a sleep would not: a sleep
// oversleeps by tens of microseconds, the very time measured here. It records the gaps between its steps: the time
// a device would have sat idle, waiting for the host.
class TimedRunner final : public ModelRunner {
  public:
    TimedRunner(int32_t vocab, int64_t device_us) : vocab_(vocab), device_(device_us) {}
    int32_t vocab_size() const override { return vocab_; }
    StepOutput execute(const StepInput& in) override {
        const auto begin = std::chrono::steady_clock::now();
        if (last_end_) {
            gap_seconds_ += std::chrono::duration<double>(begin - *last_end_).count();
            ++gaps_;
        }
        samples_.assign(in.sampling.size(), SampleResult{.token = 1});
        while (std::chrono::steady_clock::now() < begin + device_) {
        }
        last_end_ = std::chrono::steady_clock::now();
        StepOutput out;
        out.samples = samples_;
        return out;
    }
    // Between runs (the engine idle): the next step's gap is not counted.
    void forget_last_step() { last_end_.reset(); }
    double mean_gap_us() const { return gaps_ > 0 ? 1e6 * gap_seconds_ / static_cast<double>(gaps_) : 0.0; }

  private:
    int32_t vocab_;
    std::chrono::microseconds device_;
    std::vector<SampleResult> samples_;
    std::optional<std::chrono::steady_clock::time_point> last_end_;
    double gap_seconds_ = 0;
    int64_t gaps_ = 0;
};

// `seqs` requests of 32 prompt and 256 output tokens at once, streamed to one reader thread: the mean gap between
// two model steps while they run (the engine's host time on the device's critical path).
void BM_EngineHostTimePerStep(benchmark::State& state) {
    const int32_t seqs = static_cast<int32_t>(state.range(0));
    const int64_t device_us = state.range(1);
    const bool async = state.range(2) != 0;
    EngineConfig config;
    config.max_model_len = 512;
    config.max_num_seqs = seqs;
    config.max_num_batched_tokens = 8192;
    config.num_kv_blocks = std::max(seqs * 18, 32);  // 288 tokens a sequence; one of max_model_len at least
    config.max_waiting_requests = seqs;
    TimedRunner timed(1000, device_us);
    std::optional<PipelinedRunner> pipelined;
    if (async) pipelined.emplace(timed);
    auto engine = Engine::create(config, async ? static_cast<ModelRunner&>(*pipelined) : timed);
    if (!engine.ok()) {
        state.SkipWithError(engine.message().c_str());
        return;
    }
    for (auto _ : state) {
        std::mutex mu;
        std::condition_variable cv;
        std::deque<size_t> ready;
        std::vector<std::shared_ptr<RequestStream>> streams;
        for (int32_t i = 0; i < seqs; ++i) {
            Request r;
            for (int32_t t = 0; t < 32; ++t)
                r.prompt_tokens.push_back(2 + (i * 32 + t) % 900);
            r.params.max_tokens = 256;
            r.params.ignore_eos = true;
            auto stream = (*engine)->submit(std::move(r));
            if (!stream.ok()) {
                state.SkipWithError(stream.message().c_str());
                return;
            }
            (*stream)->set_notifier([&, i] {
                std::lock_guard lock(mu);
                ready.push_back(static_cast<size_t>(i));
                cv.notify_one();
            });
            streams.push_back(*stream);
        }
        // The reader: what a server's response writers do with each step's tokens.
        int32_t done = 0;
        StreamChunk chunk;
        std::vector<uint8_t> finished(static_cast<size_t>(seqs), 0);
        while (done < seqs) {
            std::deque<size_t> batch;
            {
                std::unique_lock lock(mu);
                cv.wait_for(lock, std::chrono::milliseconds(5), [&] { return !ready.empty(); });
                std::swap(batch, ready);
            }
            if (batch.empty())  // a notification that came before its notifier was set
                for (size_t i = 0; i < streams.size(); ++i)
                    batch.push_back(i);
            for (size_t i : batch)
                while (!finished[i] && streams[i]->try_read(chunk))
                    for (const ChoiceDelta& d : chunk.choices)
                        if (d.finish_reason != FinishReason::kNone) finished[i] = 1, ++done;
        }
        (void)(*engine)->stats();  // the engine has read its last step
        timed.forget_last_step();
    }
    const EngineStats st = (*engine)->stats();
    state.counters["launched_ahead_%"] = 100.0 * static_cast<double>(st.num_steps_launched_ahead) /
                                         static_cast<double>(std::max<int64_t>(1, st.num_steps));
    state.counters["device_gap_us"] = timed.mean_gap_us();
    state.counters["device_idle_%"] = 100.0 * timed.mean_gap_us() / (timed.mean_gap_us() + device_us);
}
BENCHMARK(BM_EngineHostTimePerStep)
    ->ArgNames({"seqs", "device_us", "async"})
    ->ArgsProduct({{1, 64, 256}, {2000}, {0, 1}})
    ->Iterations(3)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pagoda::engine

BENCHMARK_MAIN();
