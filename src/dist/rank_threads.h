// RankThreads: the ranks of a tensor-parallel model inside one process, one thread per rank. run(fn) calls fn(rank)
// for every rank at once — rank 0 on the calling thread (the engine thread), ranks 1..N-1 on threads of their own —
// and returns when all have finished, so one step is the unit of synchronisation. The collectives the ranks run
// inside fn meet through their Communicators.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace pagoda {

struct RankThreadsOptions {
    int size = 1;
    // OpenMP threads for the CPU ops of each rank (0: leave OpenMP's default). OpenMP's thread count is a per-thread
    // setting, so it is set on each rank's thread (rank 0: on the first run() from each new calling thread).
    int cpu_threads_per_rank = 0;
};

class RankThreads {
  public:
    explicit RankThreads(const RankThreadsOptions& options);
    ~RankThreads();  // joins the threads; no run() may be in progress
    RankThreads(const RankThreads&) = delete;
    RankThreads& operator=(const RankThreads&) = delete;

    int size() const { return size_; }

    // Calls fn(rank) for rank 0..size-1 concurrently and waits for all. One run at a time (one calling thread).
    template <typename F>
    void run(F&& fn) {
        using Fn = std::remove_reference_t<F>;  // may be const
        run_job([](void* f, int rank) { (*static_cast<Fn*>(f))(rank); },
                const_cast<void*>(static_cast<const void*>(&fn)));
    }

  private:
    using Job = void (*)(void* context, int rank);
    void run_job(Job job, void* context);
    void worker(int rank);
    void prepare_this_thread() const;

    int size_ = 1;
    int cpu_threads_ = 0;
    std::vector<std::thread> threads_;
    std::thread::id prepared_caller_;  // the last thread that ran rank 0 (prepared for it)

    std::mutex mutex_;
    std::condition_variable start_;  // a new job (generation_ changed) or stop_
    std::condition_variable done_;   // pending_ reached 0
    uint64_t generation_ = 0;
    int pending_ = 0;
    bool stop_ = false;
    Job job_ = nullptr;
    void* context_ = nullptr;
};

}  // namespace pagoda
