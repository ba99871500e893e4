#include "runtime/cuda_op_profiler.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "runtime/cuda_internal.h"

namespace pagoda {

CudaOpProfiler::CudaOpProfiler(cudaStream_t stream) : stream_(stream) {
    const char* env = std::getenv("PAGODA_CUDA_PROFILE");
    enabled_ = env != nullptr && std::strcmp(env, "1") == 0;
    if (!enabled_) return;
    PAGODA_CUDA_OK(cudaEventCreate(&step_begin_));
    PAGODA_CUDA_OK(cudaEventCreate(&step_end_));
}

CudaOpProfiler::~CudaOpProfiler() {
    if (!enabled_) return;
    if (steps_ > 0) {
        std::sort(stats_.begin(), stats_.end(), [](const Stat& a, const Stat& b) { return a.ms > b.ms; });
        double ops_ms = 0;
        for (const Stat& s : stats_)
            ops_ms += s.ms;
        std::fprintf(stderr,
                     "[cuda profile] %lld steps: GPU %.3f ms/step, ops %.3f ms/step, idle inside steps %.1f%%\n",
                     steps_, step_ms_ / steps_, ops_ms / steps_, 100.0 * (1.0 - ops_ms / std::max(step_ms_, 1e-9)));
        std::fprintf(stderr, "[cuda profile] %-22s %10s %10s %7s\n", "op", "calls/step", "ms/step", "share");
        for (const Stat& s : stats_)
            std::fprintf(stderr, "[cuda profile] %-22s %10.1f %10.4f %6.1f%%\n", s.name.c_str(),
                         static_cast<double>(s.calls) / steps_, s.ms / steps_, 100.0 * s.ms / std::max(ops_ms, 1e-9));
    }
    for (cudaEvent_t e : pool_)
        cudaEventDestroy(e);
    cudaEventDestroy(step_begin_);
    cudaEventDestroy(step_end_);
}

cudaEvent_t CudaOpProfiler::event() {
    if (used_ == pool_.size()) {
        cudaEvent_t e = nullptr;
        PAGODA_CUDA_OK(cudaEventCreate(&e));
        pool_.push_back(e);
    }
    return pool_[used_++];
}

void CudaOpProfiler::begin_step() {
    if (!enabled_) return;
    in_step_ = true;
    used_ = 0;
    marks_.clear();
    PAGODA_CUDA_OK(cudaEventRecord(step_begin_, stream_));
}

size_t CudaOpProfiler::open(const char* name) {
    Mark m{name, event(), event()};
    PAGODA_CUDA_OK(cudaEventRecord(m.start, stream_));
    marks_.push_back(m);
    return marks_.size() - 1;
}

void CudaOpProfiler::close(size_t index) {
    PAGODA_CUDA_OK(cudaEventRecord(marks_[index].stop, stream_));
}

void CudaOpProfiler::end_step() {
    if (!enabled_ || !in_step_) return;
    in_step_ = false;
    PAGODA_CUDA_OK(cudaEventRecord(step_end_, stream_));
    PAGODA_CUDA_OK(cudaEventSynchronize(step_end_));
    float ms = 0;
    PAGODA_CUDA_OK(cudaEventElapsedTime(&ms, step_begin_, step_end_));
    step_ms_ += ms;
    ++steps_;
    for (const Mark& m : marks_) {
        PAGODA_CUDA_OK(cudaEventElapsedTime(&ms, m.start, m.stop));
        auto it = std::find_if(stats_.begin(), stats_.end(), [&](const Stat& s) { return s.name == m.name; });
        if (it == stats_.end()) it = stats_.insert(stats_.end(), Stat{m.name});
        it->ms += ms;
        ++it->calls;
    }
}

}  // namespace pagoda
