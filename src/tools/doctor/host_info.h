// Facts the doctor reads from /proc and /sys (never written): kernel modules, NUMA layout and each
// GPU's NUMA node and local CPUs. `root` is "/" in production and a temporary tree in tests.
#pragma once

#include <optional>
#include <string>

namespace pagoda::doctor {

struct HostInfo {
    std::optional<bool> nouveau_loaded;  // nullopt when /proc/modules cannot be read
    std::optional<bool> nvidia_loaded;
    int numa_nodes = 0;              // /sys/devices/system/node/node<N> directories (0: unknown)
    std::string kernel_driver_line;  // first line of /proc/driver/nvidia/version, when present
};

struct GpuHostInfo {
    std::optional<int> numa_node;  // -1 when the firmware reports no affinity
    std::optional<std::string> local_cpulist;
};

HostInfo read_host_info(const std::string& root);
// `nvml_bus_id` is NVML's "00000000:17:00.0"; sysfs names the device "0000:17:00.0".
GpuHostInfo read_gpu_host_info(const std::string& root, const std::string& nvml_bus_id);
std::string sysfs_bus_id(const std::string& nvml_bus_id);

}  // namespace pagoda::doctor
