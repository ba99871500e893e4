// Scheduler + KV manager CPU time per step: 1024 running sequences decoding with a null model (issue 4 goal:
// <= 100 us per step), with and without prefix caching, and with a waiting request that does not fit (admission
// then projects the running sequences' growth every step).
#include <benchmark/benchmark.h>

#include <deque>
#include <memory>

#include "engine/kv_cache_manager.h"
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

}  // namespace
}  // namespace pagoda::engine

BENCHMARK_MAIN();
