// Backend: one device (CPU now, CUDA later) with its allocator and its Ops. The model and the engine hold a
// Backend& and never know which one it is.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "tensor/buffer.h"
#include "tensor/tensor.h"

namespace pagoda {

class Ops;

// A copy that runs beside a backend's queued work (Backend::copy_behind).
class PendingCopy {
  public:
    virtual ~PendingCopy() = default;  // (an implementation's waits for the copy to arrive)
    // Whether the copy has arrived: work queued after this returned true reads the new bytes.
    virtual bool arrived() = 0;
    virtual void wait() = 0;
};

class Backend {
  public:
    virtual ~Backend() = default;
    virtual Device device() const = 0;
    virtual std::string name() const = 0;  // "cpu (2 threads)"
    virtual Ops& ops() = 0;
    // Memory for activations, KV blocks and states on this backend's device.
    virtual Allocator& allocator() = 0;
    // Copies between host and this device (or within either); same shape and dtype, contiguous.
    virtual void copy(const Tensor& dst, const Tensor& src) = 0;
    // Copies host memory into this device's memory beside the queued work, and returns at once: the copy starts once
    // the work queued so far is done (so what that work reads of `dst` is read before it is overwritten) and overlaps
    // the work queued after it, which must not read `dst` before arrived() has said true. `src` must stay unchanged
    // until then (page-locked memory, pinned_allocator(), for a GPU to copy it while the host goes on). Default: a
    // copy() now, arrived at once.
    virtual std::unique_ptr<PendingCopy> copy_behind(const Tensor& dst, const Tensor& src);
    // Waits for queued work (no-op on CPU).
    virtual void synchronize() = 0;
    // Called by a thread before it runs ops on this backend, e.g. the engine thread before each step: some settings
    // are per thread (OpenMP's thread count on the CPU), so the thread that created the backend is not enough.
    virtual void bind_thread() {}
};

struct CpuBackendOptions {
    int num_threads = 0;  // 0: OpenMP's default (all cores, or OMP_NUM_THREADS)
};

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options = {});

}  // namespace pagoda
