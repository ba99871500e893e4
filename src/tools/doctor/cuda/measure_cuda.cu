// The doctor's micro-benchmarks. Every CUDA, cuBLASLt and NCCL call is checked; a failure becomes a
// note on that measurement and never aborts the doctor. Timings use CUDA events after warm-up.
//
// Linking: the CUDA runtime and cuBLASLt are linked dynamically (the rest of pagoda needs them in a
// CUDA build anyway); the driver itself (libcuda) is loaded lazily by the runtime, so on a machine
// without a driver cudaGetDeviceCount just returns an error, which we report. NCCL is opened with
// dlopen because it is needed only with two or more GPUs and many single-GPU hosts lack it.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "tools/doctor/measure.h"

#if __has_include(<nccl.h>)
#include <nccl.h>
#define PAGODA_DOCTOR_HAVE_NCCL_H 1
#endif

#ifndef PAGODA_CUDA_ARCHS
#define PAGODA_CUDA_ARCHS ""
#endif

namespace pagoda::doctor {
namespace {

#define DOCTOR_CUDA(expr)                                                                                \
    do {                                                                                                 \
        cudaError_t e_ = (expr);                                                                         \
        if (e_ != cudaSuccess) return Status::error(std::string(#expr) + ": " + cudaGetErrorString(e_)); \
    } while (0)

#define DOCTOR_CUBLAS(expr)                                                                \
    do {                                                                                   \
        cublasStatus_t s_ = (expr);                                                        \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                   \
            return Status::error(std::string(#expr) + ": " + cublasLtGetStatusString(s_)); \
    } while (0)

struct DeviceFree {
    void operator()(void* p) const { cudaFree(p); }
};
struct HostFree {
    void operator()(void* p) const { cudaFreeHost(p); }
};
using DeviceBuffer = std::unique_ptr<void, DeviceFree>;
using PinnedBuffer = std::unique_ptr<void, HostFree>;

struct EventPair {
    cudaEvent_t start = nullptr, stop = nullptr;
    ~EventPair() {
        if (start) cudaEventDestroy(start);
        if (stop) cudaEventDestroy(stop);
    }
};

Result<DeviceBuffer> device_alloc(size_t bytes) {
    void* p = nullptr;
    DOCTOR_CUDA(cudaMalloc(&p, bytes));
    return DeviceBuffer(p);
}

Status make_events(EventPair& ev) {
    DOCTOR_CUDA(cudaEventCreate(&ev.start));
    DOCTOR_CUDA(cudaEventCreate(&ev.stop));
    return ok_status();
}

Result<float> elapsed_ms(EventPair& ev) {
    DOCTOR_CUDA(cudaEventSynchronize(ev.stop));
    float ms = 0;
    DOCTOR_CUDA(cudaEventElapsedTime(&ms, ev.start, ev.stop));
    if (ms <= 0) return Status::error("timer returned no time");
    return ms;
}

// A cheap hash so every element differs and nothing compresses or short-cuts.
__device__ __host__ inline uint32_t mix(uint64_t i, uint32_t seed) {
    uint64_t x = i * 0x9E3779B97F4A7C15ull + seed;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return static_cast<uint32_t>(x);
}

__global__ void fill_floats(float* p, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        p[i] = static_cast<float>(mix(i, seed) & 0xFFFF);
}

__global__ void fill_bf16(__nv_bfloat16* p, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        p[i] = __float2bfloat16(static_cast<float>(mix(i, seed) & 0xFFFF) / 32768.0f - 1.0f);
}

__global__ void copy_kernel(const float4* __restrict__ src, float4* __restrict__ dst, size_t n) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        dst[i] = src[i];
}

int fill_blocks() {
    return 1024;
}

Result<double> measure_copy(size_t bytes) {
    const size_t n4 = bytes / sizeof(float4);
    PAGODA_ASSIGN_OR_RETURN(DeviceBuffer src, device_alloc(bytes));
    PAGODA_ASSIGN_OR_RETURN(DeviceBuffer dst, device_alloc(bytes));
    fill_floats<<<fill_blocks(), 256>>>(static_cast<float*>(src.get()), bytes / sizeof(float), 1);
    DOCTOR_CUDA(cudaGetLastError());
    DOCTOR_CUDA(cudaMemset(dst.get(), 0xFF, bytes));  // poison: a copy that did nothing is caught below
    int sms = 0, device = 0;
    DOCTOR_CUDA(cudaGetDevice(&device));
    DOCTOR_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const int threads = 512;
    const int blocks = sms * 8;  // a few resident blocks per SM, grid-stride for the rest
    auto launch = [&] {
        copy_kernel<<<blocks, threads>>>(static_cast<const float4*>(src.get()), static_cast<float4*>(dst.get()), n4);
    };
    for (int i = 0; i < 3; ++i)
        launch();
    DOCTOR_CUDA(cudaGetLastError());
    EventPair ev;
    PAGODA_RETURN_IF_ERROR(make_events(ev));
    constexpr int kIters = 20;
    DOCTOR_CUDA(cudaEventRecord(ev.start));
    for (int i = 0; i < kIters; ++i)
        launch();
    DOCTOR_CUDA(cudaEventRecord(ev.stop));
    DOCTOR_CUDA(cudaGetLastError());
    PAGODA_ASSIGN_OR_RETURN(float ms, elapsed_ms(ev));
    // Check a sample of the copy against the source.
    std::vector<float> a(1 << 16), b(1 << 16);
    const size_t offset = (bytes / sizeof(float)) / 2;
    DOCTOR_CUDA(cudaMemcpy(a.data(), static_cast<float*>(src.get()) + offset, a.size() * 4, cudaMemcpyDeviceToHost));
    DOCTOR_CUDA(cudaMemcpy(b.data(), static_cast<float*>(dst.get()) + offset, b.size() * 4, cudaMemcpyDeviceToHost));
    if (a != b) return Status::error("copy kernel produced wrong data");
    return 2.0 * double(bytes) * kIters / (ms * 1e-3) / 1e9;
}

struct LtHandle {
    cublasLtHandle_t h = nullptr;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    ~LtHandle() {
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        if (c) cublasLtMatrixLayoutDestroy(c);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (op) cublasLtMatmulDescDestroy(op);
        if (h) cublasLtDestroy(h);
    }
};

float bf16_to_float(__nv_bfloat16 v) {
    uint16_t bits;
    static_assert(sizeof(bits) == sizeof(v));
    std::memcpy(&bits, &v, sizeof(bits));
    uint32_t f = uint32_t(bits) << 16;
    float out;
    std::memcpy(&out, &f, sizeof(out));
    return out;
}

Result<double> measure_gemm(int size) {
    const int64_t m = size, n = size, k = size;
    const size_t elems = size_t(size) * size;
    PAGODA_ASSIGN_OR_RETURN(DeviceBuffer a, device_alloc(elems * 2));
    PAGODA_ASSIGN_OR_RETURN(DeviceBuffer b, device_alloc(elems * 2));
    PAGODA_ASSIGN_OR_RETURN(DeviceBuffer c, device_alloc(elems * 2));
    constexpr size_t kWorkspace = 64ull << 20;
    PAGODA_ASSIGN_OR_RETURN(DeviceBuffer ws, device_alloc(kWorkspace));
    fill_bf16<<<fill_blocks(), 256>>>(static_cast<__nv_bfloat16*>(a.get()), elems, 2);
    fill_bf16<<<fill_blocks(), 256>>>(static_cast<__nv_bfloat16*>(b.get()), elems, 3);
    DOCTOR_CUDA(cudaGetLastError());
    DOCTOR_CUDA(cudaMemset(c.get(), 0xFF, elems * 2));  // NaN poison

    LtHandle lt;
    DOCTOR_CUBLAS(cublasLtCreate(&lt.h));
    DOCTOR_CUBLAS(cublasLtMatmulDescCreate(&lt.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    // "TN": A stored k×m column-major and transposed, B k×n, C m×n; the layout GEMM libraries favour.
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    DOCTOR_CUBLAS(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    DOCTOR_CUBLAS(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    DOCTOR_CUBLAS(cublasLtMatrixLayoutCreate(&lt.a, CUDA_R_16BF, k, m, k));
    DOCTOR_CUBLAS(cublasLtMatrixLayoutCreate(&lt.b, CUDA_R_16BF, k, n, k));
    DOCTOR_CUBLAS(cublasLtMatrixLayoutCreate(&lt.c, CUDA_R_16BF, m, n, m));
    DOCTOR_CUBLAS(cublasLtMatmulPreferenceCreate(&lt.pref));
    const uint64_t ws_bytes = kWorkspace;
    DOCTOR_CUBLAS(cublasLtMatmulPreferenceSetAttribute(lt.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                       sizeof(ws_bytes)));
    cublasLtMatmulHeuristicResult_t heuristic{};
    int found = 0;
    DOCTOR_CUBLAS(cublasLtMatmulAlgoGetHeuristic(lt.h, lt.op, lt.a, lt.b, lt.c, lt.c, lt.pref, 1, &heuristic, &found));
    if (found == 0) return Status::error("cuBLASLt found no bf16 GEMM algorithm");
    const float alpha = 1.0f, beta = 0.0f;
    auto run = [&]() -> Status {
        DOCTOR_CUBLAS(cublasLtMatmul(lt.h, lt.op, &alpha, a.get(), lt.a, b.get(), lt.b, &beta, c.get(), lt.c, c.get(),
                                     lt.c, &heuristic.algo, ws.get(), kWorkspace, nullptr));
        return ok_status();
    };
    for (int i = 0; i < 3; ++i)
        PAGODA_RETURN_IF_ERROR(run());
    EventPair ev;
    PAGODA_RETURN_IF_ERROR(make_events(ev));
    constexpr int kIters = 20;
    DOCTOR_CUDA(cudaEventRecord(ev.start));
    for (int i = 0; i < kIters; ++i)
        PAGODA_RETURN_IF_ERROR(run());
    DOCTOR_CUDA(cudaEventRecord(ev.stop));
    PAGODA_ASSIGN_OR_RETURN(float ms, elapsed_ms(ev));

    // Spot-check a few outputs against a double-precision dot product of the same bf16 inputs.
    std::vector<__nv_bfloat16> ha(elems), hb(elems), hc(elems);
    DOCTOR_CUDA(cudaMemcpy(ha.data(), a.get(), elems * 2, cudaMemcpyDeviceToHost));
    DOCTOR_CUDA(cudaMemcpy(hb.data(), b.get(), elems * 2, cudaMemcpyDeviceToHost));
    DOCTOR_CUDA(cudaMemcpy(hc.data(), c.get(), elems * 2, cudaMemcpyDeviceToHost));
    for (int s = 0; s < 16; ++s) {
        const int64_t i = mix(s, 7) % m, j = mix(s, 8) % n;
        double ref = 0, scale = 0;
        for (int64_t p = 0; p < k; ++p) {
            const double x = bf16_to_float(ha[size_t(i) * k + p]) * double(bf16_to_float(hb[size_t(j) * k + p]));
            ref += x;
            scale += std::fabs(x);
        }
        const double got = bf16_to_float(hc[size_t(j) * m + i]);
        if (!std::isfinite(got) || std::fabs(got - ref) > 1e-2 * std::fabs(ref) + 1e-3 * scale)
            return Status::error("GEMM result wrong at (" + std::to_string(i) + "," + std::to_string(j) +
                                 "): " + std::to_string(got) + " vs " + std::to_string(ref));
    }
    return 2.0 * double(m) * n * k * kIters / (ms * 1e-3) / 1e12;
}

struct HostDevice {
    double h2d = 0, d2h = 0;
};

Result<HostDevice> measure_pinned(size_t bytes) {
    void* host = nullptr;
    DOCTOR_CUDA(cudaHostAlloc(&host, bytes, cudaHostAllocDefault));
    PinnedBuffer pinned(host);
    std::memset(host, 0x5A, bytes);
    PAGODA_ASSIGN_OR_RETURN(DeviceBuffer dev, device_alloc(bytes));
    HostDevice out;
    for (int dir = 0; dir < 2; ++dir) {
        auto copy = [&]() -> Status {
            if (dir == 0)
                DOCTOR_CUDA(cudaMemcpyAsync(dev.get(), host, bytes, cudaMemcpyHostToDevice));
            else
                DOCTOR_CUDA(cudaMemcpyAsync(host, dev.get(), bytes, cudaMemcpyDeviceToHost));
            return ok_status();
        };
        PAGODA_RETURN_IF_ERROR(copy());
        EventPair ev;
        PAGODA_RETURN_IF_ERROR(make_events(ev));
        constexpr int kIters = 10;
        DOCTOR_CUDA(cudaEventRecord(ev.start));
        for (int i = 0; i < kIters; ++i)
            PAGODA_RETURN_IF_ERROR(copy());
        DOCTOR_CUDA(cudaEventRecord(ev.stop));
        PAGODA_ASSIGN_OR_RETURN(float ms, elapsed_ms(ev));
        (dir == 0 ? out.h2d : out.d2h) = double(bytes) * kIters / (ms * 1e-3) / 1e9;
    }
    return out;
}

Result<double> measure_p2p(int a, int b, size_t bytes) {
    int can = 0;
    if (a != b) {
        DOCTOR_CUDA(cudaDeviceCanAccessPeer(&can, a, b));
        if (!can) return Status::error("peer access not supported between these GPUs (copies go through the host)");
    }
    DOCTOR_CUDA(cudaSetDevice(b));
    PAGODA_ASSIGN_OR_RETURN(DeviceBuffer dst, device_alloc(bytes));
    DOCTOR_CUDA(cudaSetDevice(a));
    PAGODA_ASSIGN_OR_RETURN(DeviceBuffer src, device_alloc(bytes));
    // Peer access is a property of this process's contexts, not a GPU setting; undone below.
    bool enabled = false;
    if (a != b) {
        cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
        if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
            return Status::error(std::string("cudaDeviceEnablePeerAccess: ") + cudaGetErrorString(e));
        cudaGetLastError();
        enabled = e == cudaSuccess;
    }
    auto copy = [&]() -> Status {
        DOCTOR_CUDA(cudaMemcpyPeerAsync(dst.get(), b, src.get(), a, bytes));
        return ok_status();
    };
    auto timed = [&]() -> Result<double> {
        EventPair ev;
        PAGODA_RETURN_IF_ERROR(make_events(ev));
        for (int i = 0; i < 2; ++i)
            PAGODA_RETURN_IF_ERROR(copy());
        constexpr int kIters = 10;
        DOCTOR_CUDA(cudaEventRecord(ev.start));
        for (int i = 0; i < kIters; ++i)
            PAGODA_RETURN_IF_ERROR(copy());
        DOCTOR_CUDA(cudaEventRecord(ev.stop));
        PAGODA_ASSIGN_OR_RETURN(float ms, elapsed_ms(ev));
        return double(bytes) * kIters / (ms * 1e-3) / 1e9;
    };
    Result<double> result = timed();
    if (enabled) cudaDeviceDisablePeerAccess(b);
    return result;
}

#ifdef PAGODA_DOCTOR_HAVE_NCCL_H
struct NcclApi {
    void* lib = nullptr;
    decltype(&ncclCommInitAll) init_all = nullptr;
    decltype(&ncclCommDestroy) destroy = nullptr;
    decltype(&ncclAllReduce) all_reduce = nullptr;
    decltype(&ncclGroupStart) group_start = nullptr;
    decltype(&ncclGroupEnd) group_end = nullptr;
    decltype(&ncclGetErrorString) error_string = nullptr;
    ~NcclApi() {
        if (lib) dlclose(lib);
    }
};

#define DOCTOR_NCCL(api, expr)                                                                           \
    do {                                                                                                 \
        ncclResult_t r_ = (expr);                                                                        \
        if (r_ != ncclSuccess) return Status::error(std::string(#expr) + ": " + (api).error_string(r_)); \
    } while (0)

Result<double> measure_nccl(int ranks) {
    NcclApi api;
    api.lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!api.lib) return Status::error("libnccl.so.2 not found (install NCCL to measure all-reduce)");
    api.init_all = reinterpret_cast<decltype(api.init_all)>(dlsym(api.lib, "ncclCommInitAll"));
    api.destroy = reinterpret_cast<decltype(api.destroy)>(dlsym(api.lib, "ncclCommDestroy"));
    api.all_reduce = reinterpret_cast<decltype(api.all_reduce)>(dlsym(api.lib, "ncclAllReduce"));
    api.group_start = reinterpret_cast<decltype(api.group_start)>(dlsym(api.lib, "ncclGroupStart"));
    api.group_end = reinterpret_cast<decltype(api.group_end)>(dlsym(api.lib, "ncclGroupEnd"));
    api.error_string = reinterpret_cast<decltype(api.error_string)>(dlsym(api.lib, "ncclGetErrorString"));
    if (!api.init_all || !api.destroy || !api.all_reduce || !api.group_start || !api.group_end || !api.error_string)
        return Status::error("libnccl.so.2 lacks a needed symbol");
    // NVLink multicast (NVLS) stays off unless the operator asked for it: it is not needed for a
    // bandwidth check and has taken shared hosts out of service.
    setenv("NCCL_NVLS_ENABLE", "0", 0);

    constexpr size_t kCount = 64ull << 20;  // floats: 256 MiB per GPU
    std::vector<int> devs(ranks);
    for (int i = 0; i < ranks; ++i)
        devs[i] = i;
    std::vector<ncclComm_t> comms(ranks);
    DOCTOR_NCCL(api, api.init_all(comms.data(), ranks, devs.data()));
    struct CommsGuard {
        NcclApi& api;
        std::vector<ncclComm_t>& comms;
        ~CommsGuard() {
            for (auto c : comms)
                api.destroy(c);
        }
    } guard{api, comms};
    std::vector<DeviceBuffer> bufs;
    std::vector<cudaStream_t> streams(ranks, nullptr);
    struct StreamsGuard {
        std::vector<cudaStream_t>& s;
        ~StreamsGuard() {
            for (auto st : s)
                if (st) cudaStreamDestroy(st);
        }
    } sguard{streams};
    for (int r = 0; r < ranks; ++r) {
        DOCTOR_CUDA(cudaSetDevice(r));
        PAGODA_ASSIGN_OR_RETURN(DeviceBuffer buf, device_alloc(kCount * sizeof(float)));
        std::vector<float> init(1024, float(r + 1));
        for (size_t off = 0; off < kCount; off += init.size())
            DOCTOR_CUDA(
                cudaMemcpy(static_cast<float*>(buf.get()) + off, init.data(), init.size() * 4, cudaMemcpyHostToDevice));
        bufs.push_back(std::move(buf));
        DOCTOR_CUDA(cudaStreamCreate(&streams[r]));
    }
    auto all_reduce = [&]() -> Status {
        DOCTOR_NCCL(api, api.group_start());
        for (int r = 0; r < ranks; ++r)
            DOCTOR_NCCL(
                api, api.all_reduce(bufs[r].get(), bufs[r].get(), kCount, ncclFloat32, ncclSum, comms[r], streams[r]));
        DOCTOR_NCCL(api, api.group_end());
        return ok_status();
    };
    auto sync_all = [&]() -> Status {
        for (int r = 0; r < ranks; ++r)
            DOCTOR_CUDA(cudaStreamSynchronize(streams[r]));
        return ok_status();
    };
    // One reduction, then check: every element must be 1 + 2 + ... + ranks.
    PAGODA_RETURN_IF_ERROR(all_reduce());
    PAGODA_RETURN_IF_ERROR(sync_all());
    const float expect = float(ranks) * float(ranks + 1) / 2;
    for (int r = 0; r < ranks; ++r) {
        float got = 0;
        DOCTOR_CUDA(cudaSetDevice(r));
        DOCTOR_CUDA(cudaMemcpy(&got, static_cast<float*>(bufs[r].get()) + kCount / 3, 4, cudaMemcpyDeviceToHost));
        if (got != expect)
            return Status::error("all-reduce gave " + std::to_string(got) + ", expected " + std::to_string(expect));
    }
    PAGODA_RETURN_IF_ERROR(all_reduce());  // warm-up
    PAGODA_RETURN_IF_ERROR(sync_all());
    // Values grow each iteration; with floats and a few iterations this stays finite.
    constexpr int kIters = 5;
    DOCTOR_CUDA(cudaSetDevice(0));
    EventPair ev;
    PAGODA_RETURN_IF_ERROR(make_events(ev));
    DOCTOR_CUDA(cudaEventRecord(ev.start, streams[0]));
    for (int i = 0; i < kIters; ++i)
        PAGODA_RETURN_IF_ERROR(all_reduce());
    DOCTOR_CUDA(cudaSetDevice(0));
    DOCTOR_CUDA(cudaEventRecord(ev.stop, streams[0]));
    PAGODA_RETURN_IF_ERROR(sync_all());
    PAGODA_ASSIGN_OR_RETURN(float ms, elapsed_ms(ev));
    const double algbw = double(kCount * sizeof(float)) * kIters / (ms * 1e-3) / 1e9;
    // nccl-tests' bus bandwidth for all-reduce: algbw × 2(n-1)/n (0 for a single rank).
    return algbw * 2.0 * (ranks - 1) / ranks;
}
#else
Result<double> measure_nccl(int) {
    return Status::error("built without nccl.h");
}
#endif

Measured to_measured(const Result<double>& r) {
    Measured m;
    if (r.ok())
        m.value = *r;
    else
        m.note = r.message();
    return m;
}

}  // namespace

CudaProbe probe_cuda() {
    CudaProbe probe;
    probe.built_with_cuda = true;
    probe.runtime_version = CUDART_VERSION;
    probe.archs = PAGODA_CUDA_ARCHS;
    if (cudaDriverGetVersion(&probe.driver_version) != cudaSuccess) probe.driver_version = 0;
    cudaError_t e = cudaGetDeviceCount(&probe.device_count);
    if (e != cudaSuccess) {
        probe.device_count = 0;
        probe.error = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
    }
    return probe;
}

Measurements run_measurements(const MeasureOptions& options) {
    Measurements out;
    const CudaProbe probe = probe_cuda();
    if (probe.device_count == 0) {
        out.not_run = probe.error.empty() ? "no CUDA device" : probe.error;
        return out;
    }
    out.ran = true;
    for (int d = 0; d < probe.device_count; ++d) {
        GpuMeasurement g;
        g.cuda_index = d;
        char bus[32] = {};
        if (cudaDeviceGetPCIBusId(bus, sizeof(bus), d) == cudaSuccess) g.bus_id = bus;
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, d) == cudaSuccess) g.name = prop.name;
        if (cudaSetDevice(d) != cudaSuccess) {
            g.copy_gbps.note = g.gemm_tflops.note = g.h2d_gbps.note = g.d2h_gbps.note = "cudaSetDevice failed";
            out.gpus.push_back(std::move(g));
            continue;
        }
        size_t free_bytes = 0, total_bytes = 0;
        cudaMemGetInfo(&free_bytes, &total_bytes);
        // 2 GiB per buffer is many times any L2; smaller when the GPU is mostly taken.
        size_t copy_bytes = size_t(2) << 30;
        while (copy_bytes > (size_t(64) << 20) && copy_bytes * 2 > free_bytes / 2)
            copy_bytes /= 2;
        g.copy_gbps = to_measured(measure_copy(copy_bytes));
        g.gemm_tflops = to_measured(measure_gemm(8192));
        auto pinned = measure_pinned(size_t(512) << 20);
        if (pinned.ok()) {
            g.h2d_gbps.value = pinned->h2d;
            g.d2h_gbps.value = pinned->d2h;
        } else {
            g.h2d_gbps.note = g.d2h_gbps.note = pinned.message();
        }
        cudaGetLastError();  // a failed measurement must not poison the next one
        out.gpus.push_back(std::move(g));
    }
    const int n = probe.device_count;
    if (n >= 2 || options.loopback) {
        for (int a = 0; a < n; ++a)
            for (int b = 0; b < n; ++b) {
                if (a == b && !(n == 1 && options.loopback)) continue;
                PairMeasurement p;
                p.cuda_a = a;
                p.cuda_b = b;
                p.gbps = to_measured(measure_p2p(a, b, size_t(256) << 20));
                cudaGetLastError();
                out.p2p.push_back(std::move(p));
            }
        out.nccl_ranks = n;
        out.nccl_busbw_gbps = to_measured(measure_nccl(n));
    }
    cudaSetDevice(0);
    return out;
}

}  // namespace pagoda::doctor
