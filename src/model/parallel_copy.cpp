#include "model/parallel_copy.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

namespace pagoda {

void parallel_copy(std::span<const CopyJob> jobs, unsigned max_threads) {
    size_t total = 0;
    for (const CopyJob& j : jobs)
        total += j.bytes;
    constexpr size_t kMinPerThread = size_t{64} << 20;  // below this a thread costs more than it copies
    const unsigned cores = max_threads > 0 ? max_threads : std::max(1u, std::thread::hardware_concurrency());
    const auto threads = static_cast<unsigned>(std::clamp<size_t>(total / kMinPerThread, 1, cores));
    if (threads == 1) {
        for (const CopyJob& j : jobs)
            std::memcpy(j.dst, j.src, j.bytes);
        return;
    }
    // Thread i copies bytes [i * share, (i + 1) * share) of the jobs laid end to end.
    const size_t share = (total + threads - 1) / threads;
    const auto run = [&jobs, share](size_t begin) {
        const size_t end = begin + share;
        size_t at = 0;  // where the current job starts in the concatenation
        for (const CopyJob& j : jobs) {
            const size_t lo = std::max(begin, at), hi = std::min(end, at + j.bytes);
            if (lo < hi)
                std::memcpy(static_cast<std::byte*>(j.dst) + (lo - at),
                            static_cast<const std::byte*>(j.src) + (lo - at), hi - lo);
            at += j.bytes;
            if (at >= end) break;
        }
    };
    std::vector<std::thread> pool;
    for (unsigned i = 1; i < threads; ++i)
        pool.emplace_back(run, i * share);
    run(0);
    for (std::thread& t : pool)
        t.join();
}

void parallel_for(size_t count, const std::function<void(size_t)>& fn, unsigned max_threads) {
    const unsigned cores = max_threads > 0 ? max_threads : std::max(1u, std::thread::hardware_concurrency());
    const auto threads = static_cast<unsigned>(std::clamp<size_t>(count, 1, cores));
    std::atomic<size_t> next{0};
    const auto run = [&] {
        for (size_t i = next++; i < count; i = next++)
            fn(i);
    };
    std::vector<std::thread> pool;
    for (unsigned i = 1; i < threads; ++i)
        pool.emplace_back(run);
    run();
    for (std::thread& t : pool)
        t.join();
}

}  // namespace pagoda
