#include "runtime/cuda/op_profiler.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "runtime/cuda/internal.h"

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
    for (Kind& k : kinds_) {
        std::sort(k.stats.begin(), k.stats.end(), [](const Stat& a, const Stat& b) { return a.ms > b.ms; });
        double ops_ms = 0;
        for (const Stat& st : k.stats)
            ops_ms += st.ms;
        const double n = static_cast<double>(k.steps);
        std::fprintf(
            stderr, "[cuda profile] %s: %lld steps: GPU %.3f ms/step, ops %.3f ms/step, idle inside steps %.1f%%\n",
            k.name.c_str(), k.steps, k.step_ms / n, ops_ms / n, 100.0 * (1.0 - ops_ms / std::max(k.step_ms, 1e-9)));
        std::fprintf(stderr, "[cuda profile] %-22s %10s %10s %7s\n", "op", "calls/step", "ms/step", "share");
        for (const Stat& st : k.stats)
            std::fprintf(stderr, "[cuda profile] %-22s %10.1f %10.4f %6.1f%%\n", st.name.c_str(),
                         static_cast<double>(st.calls) / n, st.ms / n, 100.0 * st.ms / std::max(ops_ms, 1e-9));
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

void CudaOpProfiler::begin_step(const char* kind) {
    if (!enabled_) return;
    in_step_ = true;
    kind_ = kind;
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
    auto kind = std::find_if(kinds_.begin(), kinds_.end(), [&](const Kind& k) { return k.name == kind_; });
    if (kind == kinds_.end()) kind = kinds_.insert(kinds_.end(), Kind{kind_, {}, 0, 0});
    float ms = 0;
    PAGODA_CUDA_OK(cudaEventElapsedTime(&ms, step_begin_, step_end_));
    kind->step_ms += ms;
    ++kind->steps;
    for (const Mark& m : marks_) {
        PAGODA_CUDA_OK(cudaEventElapsedTime(&ms, m.start, m.stop));
        auto it =
            std::find_if(kind->stats.begin(), kind->stats.end(), [&](const Stat& st) { return st.name == m.name; });
        if (it == kind->stats.end()) it = kind->stats.insert(kind->stats.end(), Stat{m.name});
        it->ms += ms;
        ++it->calls;
    }
}

}  // namespace pagoda
