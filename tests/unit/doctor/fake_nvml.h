// A fake NvmlSource for tests: GPUs, topology and errors set by the test, plus a healthy H100 SXM
// template so each test changes one fact and watches one rule.
#pragma once

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tools/doctor/nvml_source.h"
#include "tools/doctor/rules.h"

namespace pagoda::doctor::testing {

class FakeNvml final : public NvmlSource {
  public:
    Result<SystemInfo> system() override {
        if (!system_error.empty()) return Status::error(system_error);
        SystemInfo s = system_info;
        s.device_count = static_cast<unsigned>(gpus.size());
        return s;
    }
    Result<GpuInfo> gpu(unsigned index) override {
        if (auto it = gpu_errors.find(index); it != gpu_errors.end()) return Status::error(it->second);
        return gpus.at(index);
    }
    std::optional<TopologyLevel> topology(unsigned a, unsigned b) override {
        auto it = topology_levels.find({std::min(a, b), std::max(a, b)});
        if (it == topology_levels.end()) return std::nullopt;
        return it->second;
    }
    std::optional<bool> p2p_read_ok(unsigned a, unsigned b) override {
        auto it = p2p.find({std::min(a, b), std::max(a, b)});
        if (it == p2p.end()) return std::nullopt;
        return it->second;
    }

    SystemInfo system_info{"580.159.04", 13000, "13.580.159.04", 0};
    std::string system_error;
    std::vector<GpuInfo> gpus;
    std::map<unsigned, std::string> gpu_errors;
    std::map<std::pair<unsigned, unsigned>, TopologyLevel> topology_levels;
    std::map<std::pair<unsigned, unsigned>, bool> p2p;
};

// A healthy H100 SXM as NVML reports it at idle on a well-built server.
inline GpuInfo healthy_h100(unsigned index) {
    GpuInfo g;
    g.index = index;
    g.name = "NVIDIA H100 80GB HBM3";
    g.uuid = "GPU-0000000" + std::to_string(index);
    char bus[32];
    std::snprintf(bus, sizeof(bus), "00000000:%02X:00.0", 0x18 + 0x10 * index);
    g.bus_id = bus;
    g.memory_total = 80ull << 30;
    g.memory_free = (80ull << 30) - (500ull << 20);
    g.memory_used = 500ull << 20;
    g.cc_major = 9;
    g.cc_minor = 0;
    g.persistence_mode = true;
    g.compute_mode = 0;
    g.mig_current = 0;
    g.mig_pending = 0;
    g.virtualization_mode = 0;
    g.bar1_total = 128ull << 30;
    g.pcie_gen_current = 5;
    g.pcie_gen_max = 5;
    g.pcie_gen_gpu_max = 5;
    g.pcie_width_current = 16;
    g.pcie_width_max = 16;
    g.pcie_replay_count = 0;
    g.ecc_current = true;
    g.ecc_pending = true;
    g.ecc_corrected_volatile = 0;
    g.ecc_uncorrected_volatile = 0;
    g.ecc_corrected_aggregate = 0;
    g.ecc_uncorrected_aggregate = 0;
    g.remapped_rows = RemappedRows{};
    g.power_mw = 70000;
    g.power_limit_mw = 700000;
    g.power_default_limit_mw = 700000;
    g.temperature_c = 35;
    g.temperature_slowdown_c = 87;
    g.temperature_shutdown_c = 92;
    g.clock_event_reasons = clock_reason::kGpuIdle;
    g.sm_clock_mhz = 345;
    g.sm_clock_max_mhz = 1980;
    g.mem_clock_mhz = 2619;
    g.mem_clock_max_mhz = 2619;
    return g;
}

// 18 NVLink 4 links to NVSwitches, all up (an HGX H100 board).
inline void add_switch_links(GpuInfo& g, unsigned count = 18) {
    for (unsigned l = 0; l < count; ++l) {
        NvLinkInfo link;
        link.link = l;
        link.active = true;
        link.version = 4;
        link.remote_type = NvLinkRemote::kSwitch;
        link.remote_bus_id = "00000000:00:00.0";
        g.nvlinks.push_back(link);
    }
}

// A CUDA probe matching an sm_90a CUDA 13.0 build that sees `devices` GPUs.
inline CudaProbe cuda_13_probe(int devices) {
    CudaProbe p;
    p.built_with_cuda = true;
    p.runtime_version = 13000;
    p.driver_version = 13000;
    p.device_count = devices;
    p.archs = "90a";
    return p;
}

// Runs collect + evaluate over the fake, with /proc and /sys read from `root` (a path that does
// not exist reads as "not readable").
inline Report evaluate_fake(FakeNvml& nvml, const CudaProbe& probe, const Measurements* measurements = nullptr,
                            bool quick = true, const std::string& root = "/nonexistent-doctor-root") {
    Inventory inv = collect_inventory(&nvml, ok_status(), root);
    DoctorInput in;
    in.inventory = &inv;
    in.cuda = probe;
    in.measurements = measurements;
    in.quick = quick;
    return evaluate(in);
}

// The level of the row named `check`; nullopt when the report has no such row.
inline std::optional<Level> level_of(const Report& r, std::string_view check) {
    const CheckRow* row = r.find(check);
    if (!row) return std::nullopt;
    return row->level;
}

}  // namespace pagoda::doctor::testing
