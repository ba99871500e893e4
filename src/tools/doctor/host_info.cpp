// Reads /proc/modules, /proc/driver/nvidia/version and /sys PCI and NUMA files.
#include "tools/doctor/host_info.h"

#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pagoda::doctor {
namespace {

std::optional<std::string> slurp(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in) return std::nullopt;
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string trim(std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
        s.pop_back();
    size_t start = 0;
    while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start])))
        ++start;
    return s.substr(start);
}

std::filesystem::path under(const std::string& root, const std::string& path) {
    return std::filesystem::path(root) / path.substr(1);  // path is absolute; drop its leading '/'
}

}  // namespace

HostInfo read_host_info(const std::string& root) {
    HostInfo info;
    if (auto modules = slurp(under(root, "/proc/modules"))) {
        info.nouveau_loaded = false;
        info.nvidia_loaded = false;
        std::istringstream lines(*modules);
        std::string line;
        while (std::getline(lines, line)) {
            std::string name = line.substr(0, line.find(' '));
            if (name == "nouveau") info.nouveau_loaded = true;
            if (name == "nvidia") info.nvidia_loaded = true;
        }
    }
    if (auto version = slurp(under(root, "/proc/driver/nvidia/version")))
        info.kernel_driver_line = trim(version->substr(0, version->find('\n')));
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(under(root, "/sys/devices/system/node"), ec)) {
        const std::string name = entry.path().filename().string();
        if (name.size() > 4 && name.rfind("node", 0) == 0 && std::isdigit(static_cast<unsigned char>(name[4])))
            ++info.numa_nodes;
    }
    return info;
}

std::string sysfs_bus_id(const std::string& nvml_bus_id) {
    // NVML pads the PCI domain to 8 hex digits and uses upper case; sysfs uses 4 and lower case.
    std::string id = nvml_bus_id;
    if (id.size() > 12) id = id.substr(id.size() - 12);
    for (char& c : id)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return id;
}

GpuHostInfo read_gpu_host_info(const std::string& root, const std::string& nvml_bus_id) {
    GpuHostInfo info;
    if (nvml_bus_id.empty()) return info;
    const auto dir = under(root, "/sys/bus/pci/devices/" + sysfs_bus_id(nvml_bus_id));
    if (auto node = slurp(dir / "numa_node")) {
        std::string s = trim(*node);
        int value = 0;
        auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
        if (ec == std::errc() && ptr == s.data() + s.size()) info.numa_node = value;
    }
    if (auto cpus = slurp(dir / "local_cpulist")) info.local_cpulist = trim(*cpus);
    return info;
}

}  // namespace pagoda::doctor
