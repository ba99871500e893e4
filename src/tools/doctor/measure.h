// Short micro-benchmarks on the GPUs (device memory bandwidth, bf16 GEMM, pinned host<->device
// copies, peer-to-peer copies, NCCL all-reduce). Implemented in cuda/ when PAGODA_CUDA is ON; a
// stub without CUDA says so. Plain C++ here: no CUDA header leaks into the doctor.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace pagoda::doctor {

struct Measured {
    std::optional<double> value;  // the number, when it ran
    std::string note;             // why it did not run, or what failed
};

struct GpuMeasurement {
    int cuda_index = 0;
    std::string bus_id;  // sysfs form "0000:17:00.0", to match NVML's GPU
    std::string name;
    Measured copy_gbps;    // device-to-device copy kernel, bytes read + written per second
    Measured gemm_tflops;  // cuBLASLt bf16 8192^3, fp32 accumulation
    Measured h2d_gbps;     // pinned host -> device
    Measured d2h_gbps;     // device -> pinned host
};

struct PairMeasurement {
    int cuda_a = 0, cuda_b = 0;
    Measured gbps;  // a -> b, one direction
};

// What the CUDA runtime reports without running anything.
struct CudaProbe {
    bool built_with_cuda = false;
    int runtime_version = 0;  // CUDART_VERSION the doctor was built with (13000 = 13.0); 0 without CUDA
    int driver_version = 0;   // cudaDriverGetVersion (0: no driver)
    int device_count = 0;
    std::string error;  // cudaGetDeviceCount's error, when it failed
    std::string archs;  // CMAKE_CUDA_ARCHITECTURES of the build ("90a")
};

struct MeasureOptions {
    // Runs the P2P and NCCL code paths even with one GPU (copy to itself, communicator of size 1),
    // so the multi-GPU code is exercised where only one GPU is lent.
    bool loopback = false;
};

struct Measurements {
    bool ran = false;
    std::string not_run;  // reason nothing ran
    std::vector<GpuMeasurement> gpus;
    std::vector<PairMeasurement> p2p;
    Measured nccl_busbw_gbps;  // all GPUs, float32 sum, 256 MiB per GPU
    int nccl_ranks = 0;
};

CudaProbe probe_cuda();
Measurements run_measurements(const MeasureOptions& options);

}  // namespace pagoda::doctor
