// Private to the runtime's CUDA files: the error check for runtime/cuBLAS calls and the CudaOps factory.
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

// Grow-only device memory for per-step scratch; growing waits for `stream` first (the old memory may be in use).
class DeviceScratch {
  public:
    DeviceScratch() = default;
    DeviceScratch(const DeviceScratch&) = delete;
    DeviceScratch& operator=(const DeviceScratch&) = delete;
    ~DeviceScratch() {
        if (ptr_) cudaFree(ptr_);
    }
    // Growing while `stream` is captured into a CUDA graph throws std::runtime_error instead: the graph would keep
    // the old address, and the capture's caller drops the recording and runs eagerly.
    void* get(size_t bytes, cudaStream_t stream) {
        if (bytes > size_) {
            cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
            PAGODA_CUDA_OK(cudaStreamIsCapturing(stream, &capture));
            if (capture != cudaStreamCaptureStatusNone)
                throw std::runtime_error("scratch memory would grow while a CUDA graph is recorded");
            if (ptr_) {
                PAGODA_CUDA_OK(cudaStreamSynchronize(stream));
                PAGODA_CUDA_OK(cudaFree(ptr_));
                ptr_ = nullptr;
            }
            const size_t want = bytes + bytes / 4 + 256;
            PAGODA_CUDA_OK(cudaMalloc(&ptr_, want));
            size_ = want;
            ++reallocations_;
        }
        return ptr_;
    }
    // How often the memory moved: a recorded CUDA graph that points into it is stale once this changes.
    uint64_t reallocations() const { return reallocations_; }

  private:
    void* ptr_ = nullptr;
    size_t size_ = 0;
    uint64_t reallocations_ = 0;
};

// Grow-only page-locked host memory (staging for uploads and downloads).
class PinnedScratch {
  public:
    PinnedScratch() = default;
    PinnedScratch(const PinnedScratch&) = delete;
    PinnedScratch& operator=(const PinnedScratch&) = delete;
    ~PinnedScratch() {
        if (ptr_) cudaFreeHost(ptr_);
    }
    // The caller makes sure no copy from the old memory is still in flight.
    void* get(size_t bytes) {
        if (bytes > size_) {
            if (ptr_) PAGODA_CUDA_OK(cudaFreeHost(ptr_));
            const size_t want = bytes + bytes / 4 + 256;
            PAGODA_CUDA_OK(cudaMallocHost(&ptr_, want));
            size_ = want;
            ++reallocations_;
        }
        return ptr_;
    }
    uint64_t reallocations() const { return reallocations_; }

  private:
    void* ptr_ = nullptr;
    size_t size_ = 0;
    uint64_t reallocations_ = 0;
};

}  // namespace pagoda
