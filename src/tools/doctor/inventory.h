// Everything the doctor reads before judging: NVML per GPU, pairwise topology, /proc and /sys.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "tools/doctor/host_info.h"
#include "tools/doctor/nvml_source.h"

namespace pagoda::doctor {

struct Inventory {
    Status driver;  // ok, or why NVML could not be used ("no NVIDIA driver: ...")
    SystemInfo system;
    HostInfo host;
    std::vector<GpuInfo> gpus;
    std::vector<GpuHostInfo> gpu_host;    // parallel to gpus
    std::vector<std::string> gpu_errors;  // GPUs NVML could not read at all
    // [a][b] for a != b (nullopt on the diagonal or when NVML declines).
    std::vector<std::vector<std::optional<TopologyLevel>>> topology;
    std::vector<std::vector<std::optional<bool>>> p2p_read;
};

// `nvml` is null when loading failed; `load_status` then says why. `root` prefixes /proc and /sys.
Inventory collect_inventory(NvmlSource* nvml, const Status& load_status, const std::string& root);

}  // namespace pagoda::doctor
