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
