// Per-op GPU time, for finding where a step's time goes on a machine without nsys. With PAGODA_CUDA_PROFILE=1 each
// CudaOps op is bracketed by two CUDA events; end_step() waits for the step and adds each op's time to its name, and
// the table goes to stderr when the ops are destroyed. Step time minus the ops' time is the GPU's idle time inside a
// step (launch gaps: the CPU-bound part), inflated a little by the events themselves. Off, it costs a branch per op.
// Private to the runtime's CUDA files.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace pagoda {

class CudaOpProfiler {
  public:
    explicit CudaOpProfiler(cudaStream_t stream);
    ~CudaOpProfiler();
    CudaOpProfiler(const CudaOpProfiler&) = delete;
    CudaOpProfiler& operator=(const CudaOpProfiler&) = delete;

    bool enabled() const { return enabled_; }

    class Scope {
      public:
        Scope(CudaOpProfiler* p, const char* name) : p_(p) {
            if (p_) index_ = p_->open(name);
        }
        ~Scope() {
            if (p_) p_->close(index_);
        }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

      private:
        CudaOpProfiler* p_;
        size_t index_ = 0;
    };
    // Brackets the op that runs until the returned Scope is destroyed; `name` must be a string literal.
    Scope scope(const char* name) { return Scope(enabled_ && in_step_ ? this : nullptr, name); }

    // `kind` (a string literal) groups the steps in the table, e.g. decode-only steps apart from prefill ones.
    void begin_step(const char* kind);
    void end_step();

  private:
    struct Mark {
        const char* name;
        cudaEvent_t start, stop;
    };
    struct Stat {
        std::string name;
        double ms = 0;
        long long calls = 0;
    };
    struct Kind {
        std::string name;
        std::vector<Stat> stats;
        double step_ms = 0;
        long long steps = 0;
    };
    size_t open(const char* name);
    void close(size_t index);
    cudaEvent_t event();

    bool enabled_ = false;
    bool in_step_ = false;
    cudaStream_t stream_;
    std::vector<cudaEvent_t> pool_;
    size_t used_ = 0;
    std::vector<Mark> marks_;
    std::vector<Kind> kinds_;
    const char* kind_ = "";
    cudaEvent_t step_begin_ = nullptr, step_end_ = nullptr;
};

}  // namespace pagoda
