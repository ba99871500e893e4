#include "dist/rank_threads.h"

#include <omp.h>

#include "common/check.h"

namespace pagoda {

RankThreads::RankThreads(const RankThreadsOptions& options)
    : size_(options.size), cpu_threads_(options.cpu_threads_per_rank) {
    PAGODA_CHECK_MSG(size_ >= 1, "RankThreads: size must be at least 1");
    for (int r = 1; r < size_; ++r)
        threads_.emplace_back([this, r] { worker(r); });
}

RankThreads::~RankThreads() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    start_.notify_all();
    for (std::thread& t : threads_)
        t.join();
}

void RankThreads::prepare_this_thread() const {
    if (cpu_threads_ > 0) omp_set_num_threads(cpu_threads_);
}

void RankThreads::run_job(Job job, void* context) {
    if (prepared_caller_ != std::this_thread::get_id()) {
        prepare_this_thread();
        prepared_caller_ = std::this_thread::get_id();
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        PAGODA_CHECK_MSG(pending_ == 0, "RankThreads::run is not reentrant");
        job_ = job;
        context_ = context;
        pending_ = size_ - 1;
        ++generation_;
    }
    start_.notify_all();
    job(context, 0);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
}

void RankThreads::worker(int rank) {
    prepare_this_thread();
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        start_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        const Job job = job_;
        void* const context = context_;
        lock.unlock();
        job(context, rank);
        lock.lock();
        if (--pending_ == 0) done_.notify_one();
    }
}

}  // namespace pagoda
