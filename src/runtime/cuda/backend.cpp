// The CUDA backend: one device, one stream, device/pinned allocators (registered with tensor/ at start), CudaOps.
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "common/log.h"
#include "kernels/cuda/device_caps.h"
#include "runtime/cuda/internal.h"
#include "runtime/cuda_backend.h"
#include "tensor/buffer.h"

namespace pagoda {

namespace {

class DeviceAllocator final : public Allocator {
  public:
    explicit DeviceAllocator(int device) : device_(device) {}
    Device device() const override { return {DeviceKind::Cuda, device_}; }
    void* allocate(size_t bytes, size_t alignment) override {
        // cudaMalloc aligns to 256 bytes, more than any tensor needs.
        if (alignment > 256 || cudaSetDevice(device_) != cudaSuccess) return nullptr;
        void* p = nullptr;
        if (cudaMalloc(&p, bytes == 0 ? 1 : bytes) != cudaSuccess) {
            cudaGetLastError();  // clear the sticky-free out-of-memory error
            return nullptr;
        }
        return p;
    }
    void deallocate(void* ptr, size_t) override { cudaFree(ptr); }

  private:
    int device_;
};

class PinnedAllocator final : public Allocator {
  public:
    Device device() const override { return {}; }  // host memory, page-locked
    void* allocate(size_t bytes, size_t alignment) override {
        if (alignment > 4096) return nullptr;
        void* p = nullptr;
        if (cudaMallocHost(&p, bytes == 0 ? 1 : bytes) != cudaSuccess) {
            cudaGetLastError();
            return nullptr;
        }
        return p;
    }
    void deallocate(void* ptr, size_t) override { cudaFreeHost(ptr); }
};

constexpr int kMaxDevices = 16;

Allocator* device_allocator_for(int index) {
    static DeviceAllocator* allocators[kMaxDevices] = {};
    static std::once_flag once;
    std::call_once(once, [] {
        for (int i = 0; i < kMaxDevices; ++i)
            allocators[i] = new DeviceAllocator(i);  // process lifetime
    });
    return index >= 0 && index < kMaxDevices ? allocators[index] : nullptr;
}

void register_allocators() {
    static std::once_flag once;
    std::call_once(once, [] {
        static PinnedAllocator pinned;
        set_cuda_allocators(&pinned, &device_allocator_for);
    });
}

// A copy on the backend's side stream, behind an event of its compute stream.
class SideStreamCopy final : public PendingCopy {
  public:
    explicit SideStreamCopy(cudaEvent_t done) : done_(done) {}
    ~SideStreamCopy() override {
        wait();
        cudaEventDestroy(done_);
    }
    bool arrived() override {
        const cudaError_t e = cudaEventQuery(done_);
        if (e == cudaErrorNotReady) return false;
        PAGODA_CUDA_OK(e);
        return true;
    }
    void wait() override { PAGODA_CUDA_OK(cudaEventSynchronize(done_)); }

  private:
    cudaEvent_t done_;
};

class CudaBackend final : public Backend {
  public:
    CudaBackend(int device, const cudaDeviceProp& props, cudaStream_t stream)
        : device_(device), props_(props), stream_(stream), allocator_(device) {
        ops_ = make_cuda_ops({device, props.multiProcessorCount, stream, props.major * 10 + props.minor});
    }
    ~CudaBackend() override {
        ops_.reset();
        cudaStreamSynchronize(stream_);
        cudaStreamDestroy(stream_);
        if (side_stream_) {
            cudaStreamSynchronize(side_stream_);
            cudaStreamDestroy(side_stream_);
        }
        if (queued_) cudaEventDestroy(queued_);
    }
    Device device() const override { return {DeviceKind::Cuda, device_}; }
    std::string name() const override { return "cuda:" + std::to_string(device_) + " (" + props_.name + ")"; }
    Ops& ops() override { return *ops_; }
    Allocator& allocator() override { return allocator_; }

    void copy(const Tensor& dst, const Tensor& src) override {
        PAGODA_CHECK_MSG(dst.dtype() == src.dtype() && dst.shape() == src.shape(), "copy: dtype/shape differ");
        PAGODA_CHECK_MSG(dst.is_contiguous() && src.is_contiguous(), "copy: contiguous tensors only");
        if (src.nbytes() == 0) return;
        PAGODA_CUDA_OK(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDefault, stream_));
        // A host destination is read by the caller right after; a host source may be freed or reused.
        if (dst.is_host() || src.is_host()) PAGODA_CUDA_OK(cudaStreamSynchronize(stream_));
        if (!dst.is_host()) ops_->invalidate_caches();
    }
    // The copy engine moves the bytes on a second stream while the compute stream runs on; the side stream waits for
    // an event of the compute stream recorded now, so every kernel queued before has read `dst` first.
    std::unique_ptr<PendingCopy> copy_behind(const Tensor& dst, const Tensor& src) override {
        PAGODA_CHECK_MSG(!dst.is_host() && src.is_host() && dst.nbytes() == src.nbytes() && dst.is_contiguous() &&
                             src.is_contiguous(),
                         "copy_behind: a contiguous host tensor into device memory of its size");
        if (!side_stream_) {
            PAGODA_CUDA_OK(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking));
            PAGODA_CUDA_OK(cudaEventCreateWithFlags(&queued_, cudaEventDisableTiming));
        }
        cudaEvent_t done = nullptr;
        PAGODA_CUDA_OK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
        PAGODA_CUDA_OK(cudaEventRecord(queued_, stream_));
        PAGODA_CUDA_OK(cudaStreamWaitEvent(side_stream_, queued_, 0));
        PAGODA_CUDA_OK(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyHostToDevice, side_stream_));
        PAGODA_CUDA_OK(cudaEventRecord(done, side_stream_));
        return std::make_unique<SideStreamCopy>(done);
    }
    void synchronize() override { PAGODA_CUDA_OK(cudaStreamSynchronize(stream_)); }
    // CUDA's current device is a per-thread setting, and a kernel, a cuBLASLt call or a scratch cudaMalloc goes to
    // the current device: every thread that runs this backend's ops (the engine thread, a tensor-parallel rank's
    // thread) must select this GPU first, or it would launch onto another GPU's stream.
    void bind_thread() override { PAGODA_CUDA_OK(cudaSetDevice(device_)); }
    cudaStream_t stream() const { return stream_; }

  private:
    int device_;
    cudaDeviceProp props_;
    cudaStream_t stream_;
    cudaStream_t side_stream_ = nullptr;  // copy_behind's, made on its first use
    cudaEvent_t queued_ = nullptr;        // the compute stream's place, for the side stream to wait on
    DeviceAllocator allocator_;
    std::unique_ptr<CudaOpsBase> ops_;
};

Status cuda_status(cudaError_t e, const std::string& what) {
    cudaGetLastError();
    return Status::error(what + ": " + cudaGetErrorString(e));
}

}  // namespace

bool cuda_compiled() {
    return true;
}

int cuda_device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

Result<CudaDeviceInfo> cuda_device_info(int device) {
    const int n = cuda_device_count();
    if (device < 0 || device >= n)
        return Status::error("no CUDA device " + std::to_string(device) + " (" + std::to_string(n) + " visible)");
    cudaDeviceProp props{};
    if (cudaError_t e = cudaGetDeviceProperties(&props, device); e != cudaSuccess)
        return cuda_status(e, "cudaGetDeviceProperties");
    if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return cuda_status(e, "cudaSetDevice");
    CudaDeviceInfo info;
    info.name = props.name;
    info.compute_major = props.major;
    info.compute_minor = props.minor;
    info.sm_count = props.multiProcessorCount;
    if (cudaError_t e = cudaMemGetInfo(&info.free_bytes, &info.total_bytes); e != cudaSuccess)
        return cuda_status(e, "cudaMemGetInfo");
    if (info.compute_major >= 8) {  // (older GPUs are refused, and have no code of the build to load)
        info.kernels_code = kernels::cuda::loaded_code_version();
        info.overlapped_launches = kernels::cuda::pdl_in_use();
    }
    return info;
}

Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaBackendOptions& options) {
    PAGODA_ASSIGN_OR_RETURN(CudaDeviceInfo info, cuda_device_info(options.device));
    // bf16 tensor cores (mma.sync m16n8k16), cp.async and ldmatrix: the kernels need sm_80 or newer.
    if (info.compute_major < 8)
        return Status::error(
            "GPU " + info.name + " has compute capability " + std::to_string(info.compute_major) + "." +
            std::to_string(info.compute_minor) +
            "; pagoda's GPU kernels need 8.0 or newer (A100, L40S, H100 ...): serve with --device cpu");
    cudaDeviceProp props{};
    if (cudaError_t e = cudaGetDeviceProperties(&props, options.device); e != cudaSuccess)
        return cuda_status(e, "cudaGetDeviceProperties");
    static std::once_flag said;  // tensor-parallel ranks make one backend each; one line says it for all
    std::call_once(said, [&] {
        namespace kcu = kernels::cuda;
        const char* forced = kcu::forced_kernel_family();
        PAGODA_LOG_INFO("CUDA: " + info.name + " (sm_" + std::to_string(info.compute_major * 10 + info.compute_minor) +
                        "); kernels compiled for sm_" + std::to_string(info.kernels_code) + ", launches " +
                        (info.overlapped_launches ? "overlapped" : "one after another") + ", tiled for " +
                        std::to_string(kcu::max_block_smem() >> 10) + " KB of shared memory a block" +
                        (forced ? std::string(" (PAGODA_CUDA_KERNELS=") + forced + "; the GPU allows " +
                                      std::to_string(props.sharedMemPerBlockOptin >> 10) + " KB)"
                                : std::string()));
    });
    cudaStream_t stream = nullptr;
    if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess)
        return cuda_status(e, "cudaStreamCreate");
    register_allocators();
    return std::unique_ptr<Backend>(new CudaBackend(options.device, props, stream));
}

cudaStream_t cuda_stream_of(Backend& backend) {
    auto* cuda = dynamic_cast<CudaBackend*>(&backend);
    return cuda ? cuda->stream() : nullptr;
}

void* cuda_stream_handle(Backend& backend) {
    return cuda_stream_of(backend);
}

Result<double> cuda_time_span(Backend& backend, const std::function<void()>& work) {
    auto* cuda = dynamic_cast<CudaBackend*>(&backend);
    if (cuda == nullptr) return Status::error("timing GPU work needs a CUDA backend");
    cudaStream_t s = cuda->stream();
    cudaEvent_t begin = nullptr, end = nullptr;
    PAGODA_CUDA_OK(cudaEventCreate(&begin));
    PAGODA_CUDA_OK(cudaEventCreate(&end));
    PAGODA_CUDA_OK(cudaEventRecord(begin, s));
    work();
    PAGODA_CUDA_OK(cudaEventRecord(end, s));
    PAGODA_CUDA_OK(cudaEventSynchronize(end));
    float ms = 0;
    PAGODA_CUDA_OK(cudaEventElapsedTime(&ms, begin, end));
    cudaEventDestroy(begin);
    cudaEventDestroy(end);
    return static_cast<double>(ms);
}

Result<QueuedTiming> cuda_time_queued(Backend& backend, const std::function<void()>& enqueue, double hold_ms) {
    auto* cuda = dynamic_cast<CudaBackend*>(&backend);
    if (cuda == nullptr) return Status::error("cuda_time_queued needs a CUDA backend");
    backend.synchronize();
    static double hold;  // read by the callback, which gets no captures
    hold = hold_ms;
    PAGODA_CUDA_OK(cudaLaunchHostFunc(
        cuda->stream(), [](void*) { std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(hold)); },
        nullptr));
    QueuedTiming t;
    PAGODA_ASSIGN_OR_RETURN(
        t.gpu_ms, cuda_time_span(backend, [&] {
            const auto t0 = std::chrono::steady_clock::now();
            enqueue();
            t.enqueue_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        }));
    if (t.enqueue_ms >= hold_ms) return Status::error("enqueue outlasted the hold: the GPU time includes launch gaps");
    return t;
}

}  // namespace pagoda
