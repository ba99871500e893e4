// Private to the runtime's CUDA files: the error check for runtime/cuBLAS calls, the CudaOps factory and the
// grow-only scratch memory.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <memory>
#include <stdexcept>

#include "common/check.h"
#include "runtime/ops.h"

#define PAGODA_CUDA_OK(expr)                                                                          \
    do {                                                                                              \
        const cudaError_t pagoda_e_ = (expr);                                                         \
        if (pagoda_e_ != cudaSuccess) [[unlikely]]                                                    \
            ::pagoda::detail::check_failed(__FILE__, __LINE__, #expr, cudaGetErrorString(pagoda_e_)); \
    } while (0)

#define PAGODA_CUBLAS_OK(expr)                                                                             \
    do {                                                                                                   \
        const cublasStatus_t pagoda_s_ = (expr);                                                           \
        if (pagoda_s_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                                               \
            ::pagoda::detail::check_failed(__FILE__, __LINE__, #expr, cublasLtGetStatusString(pagoda_s_)); \
    } while (0)

namespace pagoda {

struct CudaOpsConfig {
    int device = 0;
    int sm_count = 0;
    cudaStream_t stream = nullptr;
    int compute_capability = 0;  // major * 10 + minor (90: Hopper)
};
// Ops plus what the backend needs to tell them.
class CudaOpsBase : public Ops {
  public:
    // Device memory was written behind the ops' back (Backend::copy): drop anything cached about its contents.
    virtual void invalidate_caches() = 0;
};
std::unique_ptr<CudaOpsBase> make_cuda_ops(const CudaOpsConfig& config);
class Backend;
// The stream of a CUDA backend; nullptr for any other backend.
cudaStream_t cuda_stream_of(Backend& backend);

// Where a GrowOnlyScratch takes its memory from. Device memory is read and written by kernels on a stream, so it
// grows only once that stream is done with it; pinned host memory is staging the caller copies in and out of.
struct DeviceMemory {
    static constexpr bool kUsedOnStream = true;
    static cudaError_t allocate(void** ptr, size_t bytes) { return cudaMalloc(ptr, bytes); }
    static cudaError_t release(void* ptr) { return cudaFree(ptr); }
};
struct PinnedMemory {
    static constexpr bool kUsedOnStream = false;
    static cudaError_t allocate(void** ptr, size_t bytes) { return cudaMallocHost(ptr, bytes); }
    static cudaError_t release(void* ptr) { return cudaFreeHost(ptr); }
};

// Grow-only memory for per-step scratch: it grows to a quarter more than asked (plus 256 bytes), so that a size that
// creeps up step by step does not reallocate every step, and never shrinks.
template <class Memory>
class GrowOnlyScratch {
  public:
    GrowOnlyScratch() = default;
    GrowOnlyScratch(const GrowOnlyScratch&) = delete;
    GrowOnlyScratch& operator=(const GrowOnlyScratch&) = delete;
    ~GrowOnlyScratch() {
        if (ptr_) Memory::release(ptr_);
    }

    // Device memory used on `stream`: growing waits for `stream` first (the old memory may be in use). Growing while
    // `stream` is captured into a CUDA graph throws std::runtime_error instead: the graph would keep the old address,
    // and the capture's caller drops the recording and runs eagerly.
    void* get(size_t bytes, cudaStream_t stream) requires Memory::kUsedOnStream {
        if (bytes > size_) {
            cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
            PAGODA_CUDA_OK(cudaStreamIsCapturing(stream, &capture));
            if (capture != cudaStreamCaptureStatusNone)
                throw std::runtime_error("scratch memory would grow while a CUDA graph is recorded");
            if (ptr_) PAGODA_CUDA_OK(cudaStreamSynchronize(stream));
        }
        return grow_to(bytes);
    }
    // Host staging: the caller makes sure no copy from the old memory is still in flight.
    void* get(size_t bytes) requires(!Memory::kUsedOnStream) { return grow_to(bytes); }
    // How often the memory moved: a recorded CUDA graph that points into it is stale once this changes.
    uint64_t reallocations() const { return reallocations_; }

  private:
    void* grow_to(size_t bytes) {
        if (bytes > size_) {
            if (ptr_) {
                PAGODA_CUDA_OK(Memory::release(ptr_));
                ptr_ = nullptr;
            }
            const size_t want = bytes + bytes / 4 + 256;
            PAGODA_CUDA_OK(Memory::allocate(&ptr_, want));
            size_ = want;
            ++reallocations_;
        }
        return ptr_;
    }

    void* ptr_ = nullptr;
    size_t size_ = 0;
    uint64_t reallocations_ = 0;
};

using DeviceScratch = GrowOnlyScratch<DeviceMemory>;
using PinnedScratch = GrowOnlyScratch<PinnedMemory>;

}  // namespace pagoda
