#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/device_caps.h"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kA100Smem = 163 * 1024;  // sm_80 and sm_87

// A kernel compiled as every kernel is, whose attributes say which code the driver loaded for the device.
__global__ void code_version_probe() {
    PAGODA_KERNEL_PROLOGUE();
}

// The cap PAGODA_CUDA_KERNELS asks for (0: none), read once.
int forced_cap() {
    static const int cap = [] {
        const char* f = forced_kernel_family();
        if (!f) return 0;
        return std::strcmp(f, "sm80") == 0 ? kA100Smem : kLeastBlockSmem;
    }();
    return cap;
}

}  // namespace

const char* forced_kernel_family() {
    static const char* family = []() -> const char* {
        const char* env = std::getenv("PAGODA_CUDA_KERNELS");
        if (!env) return nullptr;
        if (std::strcmp(env, "sm80") == 0) return "sm80";
        if (std::strcmp(env, "sm86") == 0) return "sm86";
        return nullptr;  // anything else: the real device's limit (the backend's start-up line shows which)
    }();
    return family;
}

int max_block_smem() {
    static std::atomic<int> known[64] = {};  // per device; 0 = not asked yet
    int device = 0;
    PAGODA_CUDA_CHECK(cudaGetDevice(&device));
    std::atomic<int>* slot = device < 64 ? &known[device] : nullptr;
    if (slot)
        if (const int v = slot->load(std::memory_order_relaxed); v > 0) return v;
    int bytes = 0;
    PAGODA_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (const int cap = forced_cap(); cap > 0 && cap < bytes) bytes = cap;
    if (slot) slot->store(bytes, std::memory_order_relaxed);
    return bytes;
}

int loaded_code_version() {
    cudaFuncAttributes attr{};
    PAGODA_CUDA_CHECK(cudaFuncGetAttributes(&attr, code_version_probe));
    return code_version(attr);
}

bool pdl_in_use() {
    return pdl_allowed(loaded_code_version(), reinterpret_cast<const void*>(code_version_probe));
}

bool pdl_allowed(int code_version, const void* kernel) {
    static const bool off = [] {
        const char* env = std::getenv("PAGODA_CUDA_PDL");
        return env && std::strcmp(env, "0") == 0;
    }();
    if (code_version < 90 || off) return false;
    const char* names = std::getenv("PAGODA_CUDA_PDL_OFF");
    if (!names || !*names) return true;
    const char* name = nullptr;
    if (cudaFuncGetName(&name, kernel) != cudaSuccess || !name) return true;
    const std::string_view kernel_name(name), list(names);
    for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        const std::string_view part = list.substr(at, comma - at);
        if (!part.empty() && kernel_name.find(part) != std::string_view::npos) return false;
        at = comma + 1;
    }
    return true;
}

}  // namespace pagoda::kernels::cuda
