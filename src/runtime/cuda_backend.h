// The CUDA backend (one GPU): device memory, one stream, cuBLASLt, and CudaOps. No CUDA header leaks from here, so
// every layer can ask for it; in a build without CUDA the functions answer "not built with CUDA".
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "runtime/backend.h"

namespace pagoda {

struct CudaBackendOptions {
    int device = 0;
};

struct CudaDeviceInfo {
    std::string name;
    int compute_major = 0, compute_minor = 0, sm_count = 0;
    size_t total_bytes = 0, free_bytes = 0;  // free memory at the time of the call
    // The architecture the kernels' code run there was compiled for (90: sm_90a code; 80: sm_80 code, or the
    // compute_80 PTX the driver compiles for a GPU the build has no code for), and whether kernel launches overlap
    // (programmatic dependent launch: sm_90 code, unless PAGODA_CUDA_PDL=0).
    int kernels_code = 0;
    bool overlapped_launches = false;
};

// True when this binary has the CUDA backend.
bool cuda_compiled();
// Number of usable GPUs: 0 when the binary has no CUDA, no driver is installed or no device is visible.
int cuda_device_count();
// Name, capability and memory of `device` (an error when there is none).
Result<CudaDeviceInfo> cuda_device_info(int device = 0);

// Whether the CUDA backend runs the op named `op` (Ops::supports of its ops, answered without a GPU); false in a
// build without CUDA. --device auto asks it before it puts a model on the GPU.
bool cuda_runs_op(std::string_view op);

// An error (never an abort) when CUDA is unavailable, the device does not exist, or its start fails.
Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaBackendOptions& options = {});

// The cudaStream_t a CUDA backend queues all its work on, as void* so that callers need no CUDA header: NCCL's
// collectives must go on the same stream to be ordered with the forward's kernels. nullptr for any other backend.
void* cuda_stream_handle(Backend& backend);

// Profiling aid for benchmarks: holds the backend's stream for `hold_ms` (a host callback), calls `enqueue` (which
// must queue work without waiting for the GPU), and reports the host time `enqueue` took and the GPU time of the
// work it queued, run back to back with no launch gaps. Together they say whether a step is CPU- or GPU-bound.
struct QueuedTiming {
    double enqueue_ms = 0;
    double gpu_ms = 0;
};
Result<QueuedTiming> cuda_time_queued(Backend& backend, const std::function<void()>& enqueue, double hold_ms = 200);

// The GPU time between an event queued just before `work` and one queued just after it (`work` may wait for the GPU,
// as a forward into host logits does): beside the host's time of the same call, how much of it the GPU spent on the
// stream (the rest: host work before the first launch or after the last), and beside cuda_time_queued's GPU time,
// whether the work ran slower or with gaps when queued as it is made.
Result<double> cuda_time_span(Backend& backend, const std::function<void()>& work);

}  // namespace pagoda
