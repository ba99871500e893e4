// The doctor's rules. Each rule states what it read, judges it, and names the command a person
// could run next; the doctor itself never changes a setting.
#include "tools/doctor/rules.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>

#include "tools/doctor/datasheet.h"

namespace pagoda::doctor {
namespace {

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), f, v);
    return buf;
}

std::string cuda_version_string(int v) {
    if (v <= 0) return "none";
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string gpu_prefix(const GpuInfo& g) {
    return "gpu" + std::to_string(g.index);
}
std::string idx(const GpuInfo& g) {
    return std::to_string(g.index);
}

std::string percent_of(double value, double reference) {
    return fmt("%.0f%%", 100.0 * value / reference);
}

std::string lower_bus(const std::string& bus) {
    return sysfs_bus_id(bus);
}

}  // namespace

std::string format_bytes_gib(uint64_t bytes) {
    return fmt("%.1f GiB", double(bytes) / double(1ull << 30));
}

std::string topology_name(TopologyLevel level) {
    switch (level) {
        case TopologyLevel::kInternal:
            return "same board";
        case TopologyLevel::kSingle:
            return "PIX (one PCIe switch)";
        case TopologyLevel::kMultiple:
            return "PXB (several PCIe switches)";
        case TopologyLevel::kHostBridge:
            return "PHB (one CPU host bridge)";
        case TopologyLevel::kNode:
            return "NODE (same NUMA node, different host bridges)";
        case TopologyLevel::kSystem:
            return "SYS (across CPU sockets)";
    }
    return "unknown";
}

std::optional<std::string> code_for(const std::string& archs, int major, int minor) {
    if (archs.empty()) return "the build's own code";
    const int cc = major * 10 + minor;
    int sass = -1, ptx = -1;  // the best machine code and PTX for the part
    bool specific = false;    // sass is an architecture-specific build (sm_90a)
    size_t start = 0;
    while (start <= archs.size()) {
        size_t end = archs.find_first_of(";, ", start);
        if (end == std::string::npos) end = archs.size();
        const std::string item = archs.substr(start, end - start);
        start = end + 1;
        if (item.empty()) continue;
        size_t digits = 0;
        while (digits < item.size() && std::isdigit(static_cast<unsigned char>(item[digits])))
            ++digits;
        if (digits == 0) return "the build's own code";  // "native", "all", "all-major": trust the build
        const int arch = std::stoi(item.substr(0, digits));
        const std::string suffix = item.substr(digits);
        if (suffix == "a" || suffix == "a-real" || suffix == "f" || suffix == "f-real") {
            // Architecture-specific code (sm_90a) runs only on that exact part.
            if (arch == cc) sass = arch, specific = true;
            continue;
        }
        // Machine code runs on the parts of its major version from its minor up; the driver picks the newest.
        const bool real = suffix.empty() || suffix == "-real";
        if (real && arch / 10 == major && arch % 10 <= minor && arch > sass && !specific) sass = arch;
        // Plain "NN" and "NN-virtual" embed PTX, which the driver compiles for any newer part.
        if ((suffix.empty() || suffix == "-virtual") && arch <= cc && arch > ptx) ptx = arch;
    }
    if (sass >= 0) return "sm_" + std::to_string(sass) + (specific ? "a" : "") + " code";
    if (ptx >= 0) return "compute_" + std::to_string(ptx) + " PTX, compiled by the driver at the first start";
    return std::nullopt;
}

bool archs_cover(const std::string& archs, int major, int minor) {
    return code_for(archs, major, minor).has_value();
}

namespace {

std::string kernel_tiles(int major, int minor) {
    // cudaDevAttrMaxSharedMemoryPerBlockOptin by part (the CUDA programming guide's table); the kernels pick their
    // tiles by it (kernels/cuda/device_caps.h).
    const int cc = major * 10 + minor;
    const int kb = cc == 90 || cc == 100 || cc == 103 ? 227 : cc == 80 || cc == 87 ? 163 : 99;
    return std::to_string(kb) + " KB shared-memory tiles";
}

// The attention kernels the code takes: sm_90a code the Hopper prefill attention on wgmma
// (kernels/cuda/attention/prefill_attention_wgmma.cu), any other (sm_80-sm_89, compute_80 PTX) the mma.sync ones.
std::string attention_family(const std::string& code) {
    return code == "sm_90a code" ? "wgmma prefill attention" : "mma.sync attention";
}

}  // namespace

void check_driver(const DoctorInput& in, Report& r) {
    const Inventory& inv = *in.inventory;
    if (!inv.driver.ok()) {
        r.add("driver", inv.driver.message(), Level::kFail,
              "install the NVIDIA driver (then `nvidia-smi` lists the GPUs); check `lsmod | grep nvidia`");
        r.add("gpu.serving", "no NVIDIA driver: GPU serving is not possible on this machine", Level::kFail,
              "serve on the CPU instead: pagoda serve --device cpu --model DIR");
    } else {
        std::string value = inv.system.driver_version.empty() ? "unknown" : inv.system.driver_version;
        if (!inv.system.nvml_version.empty()) value += " (NVML " + inv.system.nvml_version + ")";
        r.add("driver", value, Level::kPass);
        const int driver_cuda = inv.system.cuda_driver_version.value_or(in.cuda.driver_version);
        if (!in.cuda.built_with_cuda) {
            r.add("driver.cuda",
                  "driver supports CUDA " + cuda_version_string(driver_cuda) + "; this pagoda has no CUDA",
                  Level::kWarn, "this build cannot use the GPU: rebuild with cmake -DPAGODA_CUDA=ON");
        } else if (driver_cuda > 0 && driver_cuda < in.cuda.runtime_version) {
            r.add("driver.cuda",
                  "driver supports CUDA " + cuda_version_string(driver_cuda) + " < built with CUDA " +
                      cuda_version_string(in.cuda.runtime_version),
                  Level::kFail,
                  "install a driver that supports CUDA " + cuda_version_string(in.cuda.runtime_version) +
                      " (the CUDA version is in the `nvidia-smi` header)");
        } else {
            r.add("driver.cuda",
                  "driver supports CUDA " + cuda_version_string(driver_cuda) + ", built with CUDA " +
                      cuda_version_string(in.cuda.runtime_version),
                  Level::kPass);
        }
    }
    if (!inv.host.nouveau_loaded.has_value()) {
        r.add("driver.nouveau", "/proc/modules not readable", Level::kInfo, "check by hand: lsmod | grep nouveau");
    } else if (*inv.host.nouveau_loaded) {
        r.add("driver.nouveau", "nouveau is loaded", Level::kFail,
              "blacklist it: echo 'blacklist nouveau' > /etc/modprobe.d/blacklist-nouveau.conf; update-initramfs -u; "
              "reboot");
    } else {
        r.add("driver.nouveau", "not loaded", Level::kPass);
    }
    if (!inv.driver.ok()) return;

    const size_t n = inv.gpus.size();
    if (n == 0 && inv.gpu_errors.empty()) {
        r.add("gpu.count", "the driver sees no GPU", Level::kFail,
              "check the hardware: lspci | grep -i nvidia; dmesg | grep -i nvrm");
        r.add("gpu.serving", "no GPU: GPU serving is not possible on this machine", Level::kFail,
              "serve on the CPU instead: pagoda serve --device cpu --model DIR");
    } else {
        r.add("gpu.count", std::to_string(n) + " GPU" + (n == 1 ? "" : "s"), Level::kPass);
    }
    for (const auto& e : inv.gpu_errors)
        r.add("gpu.unreadable", e, Level::kFail,
              "nvidia-smi -q; dmesg | grep -i xid (a lost GPU needs a reset or reboot)");
    if (in.cuda.built_with_cuda && n > 0) {
        if (in.cuda.device_count == 0) {
            r.add("cuda.devices", in.cuda.error.empty() ? "CUDA sees no device" : in.cuda.error, Level::kFail,
                  "check CUDA_VISIBLE_DEVICES and that /dev/nvidia* exist; nvidia-smi");
        } else if (static_cast<size_t>(in.cuda.device_count) != n) {
            r.add("cuda.devices",
                  "CUDA sees " + std::to_string(in.cuda.device_count) + " of " + std::to_string(n) + " GPUs",
                  Level::kWarn, "check CUDA_VISIBLE_DEVICES (echo $CUDA_VISIBLE_DEVICES)");
        } else {
            r.add("cuda.devices", "CUDA sees " + std::to_string(in.cuda.device_count), Level::kPass);
        }
    }
}

void check_gpu(const DoctorInput& in, size_t i, Report& r) {
    const Inventory& inv = *in.inventory;
    const GpuInfo& g = inv.gpus[i];
    const GpuHostInfo& h = inv.gpu_host[i];
    const std::string p = gpu_prefix(g);
    const std::string ix = idx(g);

    r.add(p, g.name + ", " + g.uuid + ", bus " + g.bus_id, Level::kInfo);

    // Memory.
    if (g.memory_total && g.memory_free) {
        const double used_fraction = 1.0 - double(*g.memory_free) / double(*g.memory_total);
        std::string value = format_bytes_gib(*g.memory_total) + " total, " + format_bytes_gib(*g.memory_free) + " free";
        if (used_fraction > kMemoryInUseWarn)
            r.add(p + ".memory", value, Level::kWarn,
                  "other processes hold GPU memory: nvidia-smi --query-compute-apps=pid,process_name,used_memory "
                  "--format=csv -i " +
                      ix);
        else
            r.add(p + ".memory", value, Level::kPass);
    } else {
        r.add(p + ".memory", "not readable", Level::kWarn, "nvidia-smi -q -d MEMORY -i " + ix);
    }

    // Compute capability and the build's kernels.
    if (g.cc_major && g.cc_minor) {
        const std::string cc = std::to_string(*g.cc_major) + "." + std::to_string(*g.cc_minor);
        const int sm = *g.cc_major * 10 + *g.cc_minor;
        if (*g.cc_major < 8) {
            r.add(p + ".compute_capability", cc, Level::kFail,
                  "pagoda's GPU kernels need compute capability 8.0 or newer (bf16); serve with --device cpu");
        } else if (!in.cuda.built_with_cuda) {
            r.add(p + ".compute_capability", cc, Level::kPass);
        } else if (const auto code = code_for(in.cuda.archs, *g.cc_major, *g.cc_minor)) {
            r.add(p + ".compute_capability",
                  cc + ": " + *code + ", " + kernel_tiles(*g.cc_major, *g.cc_minor) + ", " + attention_family(*code),
                  Level::kPass);
        } else {
            r.add(
                p + ".compute_capability", cc + " (this build has code for " + in.cuda.archs + " only)", Level::kFail,
                "rebuild for this GPU: cmake -DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(sm) + (sm == 90 ? "a" : ""));
        }
    } else {
        r.add(p + ".compute_capability", "not readable", Level::kInfo);
    }

    // Persistence and compute mode.
    if (!g.persistence_mode) {
        r.add(p + ".persistence", "not supported", Level::kInfo);
    } else if (*g.persistence_mode) {
        r.add(p + ".persistence", "on", Level::kPass);
    } else {
        r.add(p + ".persistence", "off: the driver unloads when idle and each start pays the init", Level::kWarn,
              "systemctl enable --now nvidia-persistenced (or nvidia-smi -i " + ix + " -pm 1)");
    }
    if (g.compute_mode) {
        switch (*g.compute_mode) {
            case 0:
                r.add(p + ".compute_mode", "default", Level::kPass);
                break;
            case 3:
                r.add(p + ".compute_mode", "exclusive process (pagoda alone may use it)", Level::kPass);
                break;
            case 2:
                r.add(p + ".compute_mode", "prohibited: no process may use this GPU", Level::kFail,
                      "nvidia-smi -i " + ix + " -c DEFAULT");
                break;
            default:
                r.add(p + ".compute_mode", "exclusive thread (deprecated mode)", Level::kWarn,
                      "nvidia-smi -i " + ix + " -c DEFAULT");
        }
    }

    // MIG and virtualisation.
    if (g.mig_current) {
        if (*g.mig_current == 1)
            r.add(p + ".mig", "enabled: pagoda sees only the MIG instance named in CUDA_VISIBLE_DEVICES", Level::kWarn,
                  "list instances: nvidia-smi -L; to serve on the whole GPU, disable MIG (nvidia-smi -i " + ix +
                      " -mig 0) after draining");
        else
            r.add(p + ".mig", "disabled", Level::kPass);
        if (g.mig_pending && *g.mig_pending != *g.mig_current)
            r.add(p + ".mig.pending", "a MIG mode change waits for a GPU reset", Level::kWarn,
                  "drain the GPU, then nvidia-smi -r -i " + ix + " (or reboot)");
    } else {
        r.add(p + ".mig", "not supported", Level::kInfo);
    }
    if (g.virtualization_mode) {
        switch (*g.virtualization_mode) {
            case 0:
                r.add(p + ".virtualization", "none (bare metal)", Level::kPass);
                break;
            case 1:
                r.add(p + ".virtualization", "pass-through to a VM", Level::kPass);
                break;
            case 2:
                r.add(p + ".virtualization", "vGPU guest: P2P, profiling and some NVML queries are limited",
                      Level::kWarn, "prefer pass-through or bare metal for serving; nvidia-smi -q -d VIRTUALIZATION");
                break;
            default:
                r.add(p + ".virtualization", "hypervisor host (mode " + std::to_string(*g.virtualization_mode) + ")",
                      Level::kInfo);
        }
    }

    // BAR1.
    if (g.bar1_total) {
        if (*g.bar1_total >= kMinLargeBar1Bytes)
            r.add(p + ".bar1", format_bytes_gib(*g.bar1_total) + " (large BAR)", Level::kPass);
        else
            r.add(p + ".bar1", fmt("%.0f MiB", double(*g.bar1_total) / double(1 << 20)) + " (small BAR window)",
                  Level::kWarn, "enable Above 4G Decoding and Resizable BAR in the BIOS");
    }

    // PCIe link.
    if (g.pcie_gen_current && g.pcie_gen_max && g.pcie_width_current && g.pcie_width_max) {
        std::string value = "gen" + std::to_string(*g.pcie_gen_current) + " x" + std::to_string(*g.pcie_width_current) +
                            " (max gen" + std::to_string(*g.pcie_gen_max) + " x" + std::to_string(*g.pcie_width_max) +
                            ")";
        const bool idle = g.clock_event_reasons && (*g.clock_event_reasons & clock_reason::kGpuIdle);
        if (*g.pcie_width_current < *g.pcie_width_max) {
            r.add(p + ".pcie.link", value + ": trained at fewer lanes than the slot has", Level::kWarn,
                  "reseat the GPU or its riser; nvidia-smi -q -d PCIE -i " + ix + "; lspci -vv -s " +
                      lower_bus(g.bus_id) + " | grep LnkSta");
        } else if (*g.pcie_gen_current < *g.pcie_gen_max) {
            if (idle)
                r.add(p + ".pcie.link", value + ": below max while idle (the link slows down to save power)",
                      Level::kInfo, "re-check under load: nvidia-smi -q -d PCIE -i " + ix + " while a benchmark runs");
            else
                r.add(p + ".pcie.link", value + ": trained below its maximum generation under load", Level::kWarn,
                      "check the BIOS PCIe speed setting and reseat; nvidia-smi -q -d PCIE -i " + ix);
        } else {
            r.add(p + ".pcie.link", value, Level::kPass);
        }
        if (g.pcie_gen_gpu_max && *g.pcie_gen_gpu_max > *g.pcie_gen_max)
            r.add(p + ".pcie.slot",
                  "the GPU supports gen" + std::to_string(*g.pcie_gen_gpu_max) + ", the slot gen" +
                      std::to_string(*g.pcie_gen_max),
                  Level::kInfo, "a faster slot would raise host<->device bandwidth");
    } else {
        r.add(p + ".pcie.link", "not readable", Level::kInfo);
    }
    if (g.pcie_replay_count) {
        if (*g.pcie_replay_count >= kPcieReplayWarn)
            r.add(p + ".pcie.replays", std::to_string(*g.pcie_replay_count) + " since driver load", Level::kWarn,
                  "signal integrity problem: reseat the GPU and riser; watch nvidia-smi -q -d PCIE -i " + ix);
        else
            r.add(p + ".pcie.replays", std::to_string(*g.pcie_replay_count), Level::kPass);
    }

    // Memory health.
    if (!g.ecc_current) {
        r.add(p + ".ecc", "not supported", Level::kInfo);
    } else {
        if (*g.ecc_current)
            r.add(p + ".ecc", "on", Level::kPass);
        else
            r.add(p + ".ecc", "off: memory errors are neither detected nor corrected", Level::kWarn,
                  "nvidia-smi -q -d ECC -i " + ix + " (enabling takes nvidia-smi -i " + ix + " -e 1 and a reboot)");
        if (g.ecc_pending && *g.ecc_pending != *g.ecc_current)
            r.add(p + ".ecc.pending",
                  std::string("ECC turns ") + (*g.ecc_pending ? "on" : "off") + " at the next reboot", Level::kWarn,
                  "nvidia-smi -q -d ECC -i " + ix);
    }
    if (g.ecc_uncorrected_volatile || g.ecc_corrected_volatile) {
        const uint64_t cv = g.ecc_corrected_volatile.value_or(0), uv = g.ecc_uncorrected_volatile.value_or(0);
        const uint64_t ca = g.ecc_corrected_aggregate.value_or(0), ua = g.ecc_uncorrected_aggregate.value_or(0);
        std::string value = "since driver load " + std::to_string(cv) + " corrected, " + std::to_string(uv) +
                            " uncorrected; lifetime " + std::to_string(ca) + " corrected, " + std::to_string(ua) +
                            " uncorrected";
        if (uv > 0)
            r.add(p + ".ecc.errors", value, Level::kFail,
                  "drain this GPU; nvidia-smi -q -d ECC,ROW_REMAPPER -i " + ix + "; reset it (nvidia-smi -r -i " + ix +
                      ") and contact the vendor if errors return");
        else if (ua > 0 || cv >= kEccCorrectedVolatileWarn)
            r.add(p + ".ecc.errors", value, Level::kWarn, "watch the counters: nvidia-smi -q -d ECC -i " + ix);
        else
            r.add(p + ".ecc.errors", value, Level::kPass);
    }
    if (g.remapped_rows) {
        const RemappedRows& rr = *g.remapped_rows;
        std::string value = std::to_string(rr.corrected) + " for correctable, " + std::to_string(rr.uncorrected) +
                            " for uncorrectable errors";
        if (rr.failure)
            r.add(p + ".remapped_rows", value + "; a remap FAILED", Level::kFail,
                  "the GPU's memory cannot be repaired in the field: take it out of service and contact the vendor");
        else if (rr.pending)
            r.add(p + ".remapped_rows", value + "; a remap is pending", Level::kWarn,
                  "the remap applies at the next GPU reset: drain, then nvidia-smi -r -i " + ix + " (or reboot)");
        else
            r.add(p + ".remapped_rows", value, Level::kPass);
    } else if (g.retired_pages_pending) {
        if (*g.retired_pages_pending)
            r.add(p + ".retired_pages", "a page retirement is pending", Level::kWarn,
                  "applies at the next driver reload: drain, then nvidia-smi -r -i " + ix + " (or reboot)");
        else
            r.add(p + ".retired_pages", "none pending", Level::kPass);
    }

    // Power.
    if (g.power_mw && g.power_limit_mw) {
        std::string value =
            fmt("%.0f W", *g.power_mw / 1000.0) + " of " + fmt("%.0f W", *g.power_limit_mw / 1000.0) + " limit";
        if (g.power_default_limit_mw) value += " (default " + fmt("%.0f W", *g.power_default_limit_mw / 1000.0) + ")";
        if (g.power_default_limit_mw && *g.power_limit_mw < *g.power_default_limit_mw)
            r.add(p + ".power", value + ": the limit is below the default", Level::kWarn,
                  "nvidia-smi -q -d POWER -i " + ix + "; the default is restored with nvidia-smi -i " + ix + " -pl " +
                      fmt("%.0f", *g.power_default_limit_mw / 1000.0));
        else
            r.add(p + ".power", value, Level::kPass);
    }

    // Temperature.
    if (g.temperature_c) {
        const unsigned t = *g.temperature_c;
        std::string value = std::to_string(t) + " C";
        if (g.temperature_slowdown_c) value += " (slowdown " + std::to_string(*g.temperature_slowdown_c) + " C";
        if (g.temperature_shutdown_c)
            value += std::string(g.temperature_slowdown_c ? ", " : " (") + "shutdown " +
                     std::to_string(*g.temperature_shutdown_c) + " C";
        if (g.temperature_slowdown_c || g.temperature_shutdown_c) value += ")";
        const bool at_slowdown = g.temperature_slowdown_c && t >= *g.temperature_slowdown_c;
        const bool near_shutdown = g.temperature_shutdown_c && t + kTempShutdownMarginC >= *g.temperature_shutdown_c;
        const bool near_slowdown = g.temperature_slowdown_c && t + kTempWarnMarginC >= *g.temperature_slowdown_c;
        const std::string action =
            "check cooling (fans, airflow, inlet temperature): nvidia-smi -q -d TEMPERATURE -i " + ix;
        if (at_slowdown || near_shutdown)
            r.add(p + ".temperature", value, Level::kFail, action);
        else if (near_slowdown)
            r.add(p + ".temperature", value + ": near the slowdown threshold", Level::kWarn, action);
        else
            r.add(p + ".temperature", value, Level::kPass);
    }

    // Clock event (throttle) reasons.
    if (g.clock_event_reasons) {
        const uint64_t bits = *g.clock_event_reasons;
        std::vector<std::string> names;
        Level level = Level::kPass;
        auto note = [&](uint64_t bit, const char* name, Level l) {
            if (!(bits & bit)) return;
            names.push_back(name);
            level = std::max(level, l);
        };
        const bool idle = bits & clock_reason::kGpuIdle;
        note(clock_reason::kGpuIdle, "idle", Level::kPass);
        note(clock_reason::kApplicationsClocksSetting, "applications clocks setting", Level::kInfo);
        note(clock_reason::kSwPowerCap, "software power cap", idle ? Level::kInfo : Level::kWarn);
        note(clock_reason::kSyncBoost, "sync boost", Level::kInfo);
        note(clock_reason::kDisplayClockSetting, "display clock setting", Level::kInfo);
        note(clock_reason::kSwThermalSlowdown, "software thermal slowdown", Level::kWarn);
        note(clock_reason::kHwSlowdown, "HARDWARE slowdown", Level::kFail);
        note(clock_reason::kHwThermalSlowdown, "HARDWARE thermal slowdown", Level::kFail);
        note(clock_reason::kHwPowerBrakeSlowdown, "HARDWARE power brake", Level::kFail);
        std::string value;
        for (const auto& n : names)
            value += (value.empty() ? "" : ", ") + n;
        if (value.empty()) value = "none (clocks as high as allowed)";
        std::string action;
        if (level == Level::kFail)
            action = "the GPU protects itself: check cooling and power supply; nvidia-smi -q -d PERFORMANCE -i " + ix;
        else if (level == Level::kWarn)
            action = "nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE -i " + ix;
        r.add(p + ".clocks.events", value, level, action);
    }
    if (g.sm_clock_mhz && g.sm_clock_max_mhz) {
        std::string value =
            "SM " + std::to_string(*g.sm_clock_mhz) + "/" + std::to_string(*g.sm_clock_max_mhz) + " MHz";
        if (g.mem_clock_mhz && g.mem_clock_max_mhz)
            value +=
                ", memory " + std::to_string(*g.mem_clock_mhz) + "/" + std::to_string(*g.mem_clock_max_mhz) + " MHz";
        r.add(p + ".clocks", value, Level::kInfo);
    }

    // NUMA affinity.
    if (h.numa_node) {
        std::string value = "NUMA node " + std::to_string(*h.numa_node);
        if (h.local_cpulist) value += ", CPUs " + *h.local_cpulist;
        if (*h.numa_node < 0 && inv.host.numa_nodes > 1)
            r.add(p + ".numa",
                  value + ": the firmware reports no NUMA node on a " + std::to_string(inv.host.numa_nodes) +
                      "-node machine",
                  Level::kWarn, "check the BIOS NUMA/ACPI SRAT settings; `nvidia-smi topo -m` shows the affinity");
        else
            r.add(p + ".numa", value, Level::kPass);
    } else {
        r.add(p + ".numa", "not readable from /sys/bus/pci/devices", Level::kInfo, "nvidia-smi topo -m");
    }
}

void check_nvlink(const Inventory& inv, Report& r) {
    // The expected link count of a part is the most active links any GPU of that name shows.
    std::map<std::string, size_t> best_active;
    for (const auto& g : inv.gpus) {
        size_t active = std::count_if(g.nvlinks.begin(), g.nvlinks.end(), [](const NvLinkInfo& l) { return l.active; });
        best_active[g.name] = std::max(best_active[g.name], active);
    }
    for (const auto& g : inv.gpus) {
        const std::string p = gpu_prefix(g) + ".nvlink";
        const std::string ix = idx(g);
        if (g.nvlinks.empty()) {
            r.add(p, "not supported or not present", Level::kInfo);
            continue;
        }
        std::vector<unsigned> down;
        std::set<unsigned> versions;
        size_t to_switch = 0, to_gpu = 0;
        for (const auto& l : g.nvlinks) {
            if (!l.active) {
                down.push_back(l.link);
                continue;
            }
            if (l.version) versions.insert(*l.version);
            if (l.remote_type == NvLinkRemote::kSwitch) ++to_switch;
            if (l.remote_type == NvLinkRemote::kGpu) ++to_gpu;
        }
        const size_t active = g.nvlinks.size() - down.size();
        std::string value = std::to_string(active) + "/" + std::to_string(g.nvlinks.size()) + " links up";
        if (!versions.empty()) {
            value += ", version ";
            bool first = true;
            for (unsigned v : versions) {
                value += (first ? "" : "/") + std::to_string(v);
                first = false;
            }
        }
        if (to_switch) value += ", " + std::to_string(to_switch) + " to NVSwitch";
        if (to_gpu) value += ", " + std::to_string(to_gpu) + " to GPUs";
        const std::string action =
            "nvidia-smi nvlink -s -i " + ix + "; error counters: nvidia-smi nvlink -e -i " + ix +
            "; reseat the link or check the NVSwitch fabric (systemctl status nvidia-fabricmanager)";
        if (active > 0 && !down.empty()) {
            std::string list;
            for (unsigned l : down)
                list += (list.empty() ? "" : ",") + std::to_string(l);
            r.add(p, value + "; down: " + list, Level::kFail, action);
        } else if (active == 0 && best_active[g.name] > 0) {
            r.add(p, value + "; other " + g.name + " GPUs have " + std::to_string(best_active[g.name]) + " up",
                  Level::kFail, action);
        } else if (active == 0 && inv.gpus.size() >= 2) {
            r.add(p, value + ": NVLink present but no link is up", Level::kWarn, action);
        } else if (active == 0) {
            r.add(p, value, Level::kInfo);
        } else if (active < best_active[g.name]) {
            r.add(p, value + "; other " + g.name + " GPUs have " + std::to_string(best_active[g.name]) + " up",
                  Level::kFail, action);
        } else if (versions.size() > 1) {
            r.add(p, value + ": links run at different versions", Level::kWarn, action);
        } else {
            r.add(p, value, Level::kPass);
        }
    }
}

namespace {

// Active NVLinks from a to b: direct links whose remote is b, or, through NVSwitches, the smaller
// of the two GPUs' switch link counts.
size_t nvlinks_between(const GpuInfo& a, const GpuInfo& b) {
    size_t direct = 0, a_switch = 0, b_switch = 0;
    for (const auto& l : a.nvlinks) {
        if (!l.active) continue;
        if (l.remote_type == NvLinkRemote::kSwitch)
            ++a_switch;
        else if (l.remote_bus_id && sysfs_bus_id(*l.remote_bus_id) == sysfs_bus_id(b.bus_id))
            ++direct;
    }
    for (const auto& l : b.nvlinks)
        if (l.active && l.remote_type == NvLinkRemote::kSwitch) ++b_switch;
    return direct + std::min(a_switch, b_switch);
}

}  // namespace

void check_topology(const Inventory& inv, Report& r) {
    const size_t n = inv.gpus.size();
    if (n < 2) {
        if (n == 1) r.add("topology", "one GPU: no GPU-to-GPU links to check", Level::kInfo);
        return;
    }
    for (size_t a = 0; a < n; ++a)
        for (size_t b = a + 1; b < n; ++b) {
            const GpuInfo& ga = inv.gpus[a];
            const GpuInfo& gb = inv.gpus[b];
            const std::string name = "topology.gpu" + idx(ga) + "-gpu" + idx(gb);
            const size_t links = nvlinks_between(ga, gb);
            const auto level = inv.topology[a][b];
            const auto p2p = inv.p2p_read[a][b];
            std::string pcie = level ? topology_name(*level) : "PCIe path unknown";
            if (links > 0) {
                r.add(name, "NVLink (" + std::to_string(links) + " links); PCIe " + pcie, Level::kPass);
                continue;
            }
            if (p2p && !*p2p) {
                r.add(name, pcie + "; no peer-to-peer: copies go through host memory", Level::kWarn,
                      "nvidia-smi topo -p2p r; check that ACS / IOMMU settings allow P2P on this PCIe path");
            } else if (level == TopologyLevel::kSystem) {
                r.add(name, pcie + ": tensor-parallel traffic would cross the CPU interconnect", Level::kWarn,
                      "keep one TP group on GPUs of one NUMA node (CUDA_VISIBLE_DEVICES); nvidia-smi topo -m");
            } else {
                r.add(name, pcie, Level::kPass);
            }
        }
}

namespace {

const GpuInfo* gpu_by_bus(const Inventory& inv, const std::string& bus) {
    for (const auto& g : inv.gpus)
        if (!bus.empty() && sysfs_bus_id(g.bus_id) == sysfs_bus_id(bus)) return &g;
    return nullptr;
}

void add_ratio(Report& r, const std::string& check, const Measured& m, const char* unit, double reference,
               const std::string& reference_name, double warn_fraction, const std::string& action) {
    if (!m.value) {
        r.add(check, "failed: " + m.note, Level::kWarn,
              "rerun `pagoda doctor`; if it persists, check nvidia-smi and dmesg");
        return;
    }
    std::string value = fmt("%.1f ", *m.value) + unit;
    if (reference <= 0) {
        r.add(check, value + " (no datasheet figure for this part)", Level::kInfo);
        return;
    }
    value += " = " + percent_of(*m.value, reference) + " of " + reference_name + " " + fmt("%.0f ", reference) + unit;
    if (*m.value < warn_fraction * reference)
        r.add(check, value, Level::kWarn, action);
    else
        r.add(check, value, Level::kPass);
}

}  // namespace

void check_measurements(const DoctorInput& in, Report& r) {
    if (in.quick) {
        r.add("measured", "skipped (--quick)", Level::kInfo);
        return;
    }
    const Measurements* m = in.measurements;
    if (!m || !m->ran) {
        r.add("measured", "not run: " + (m ? m->not_run : std::string("no measurements")), Level::kInfo);
        return;
    }
    const Inventory& inv = *in.inventory;
    for (const auto& gm : m->gpus) {
        const GpuInfo* g = gpu_by_bus(inv, gm.bus_id);
        const std::string p = g ? gpu_prefix(*g) : "cuda" + std::to_string(gm.cuda_index);
        const std::string ix = g ? idx(*g) : std::to_string(gm.cuda_index);
        const auto part = find_part(g ? g->name : gm.name);
        const std::string part_name = part ? std::string(part->part) : "";
        add_ratio(
            r, p + ".measured.memory_bw", gm.copy_gbps, "GB/s", part ? part->memory_gbps : 0, part_name + " datasheet",
            kMemoryBwWarnFraction,
            "low device bandwidth: check clocks and throttling (nvidia-smi -q -d CLOCK,PERFORMANCE -i " + ix + ")");
        add_ratio(r, p + ".measured.gemm_bf16", gm.gemm_tflops, "TFLOP/s", part ? part->bf16_dense_tflops : 0,
                  part_name + " dense bf16", kGemmWarnFraction,
                  "low GEMM rate: check power cap and clocks (nvidia-smi -q -d POWER,CLOCK,PERFORMANCE -i " + ix + ")");
        double link = 0;
        std::string link_name;
        if (g && g->pcie_gen_max && g->pcie_width_max) {
            link = pcie_link_gbps(*g->pcie_gen_max, *g->pcie_width_max);
            link_name = "PCIe gen" + std::to_string(*g->pcie_gen_max) + " x" + std::to_string(*g->pcie_width_max);
        }
        const std::string pcie_action =
            "check the link (nvidia-smi -q -d PCIE -i " + ix + ") and that the CPU is on the GPU's NUMA node";
        add_ratio(r, p + ".measured.h2d_pinned", gm.h2d_gbps, "GB/s", link, link_name, kPcieCopyWarnFraction,
                  pcie_action);
        add_ratio(r, p + ".measured.d2h_pinned", gm.d2h_gbps, "GB/s", link, link_name, kPcieCopyWarnFraction,
                  pcie_action);
    }
    if (m->gpus.size() < 2 && m->p2p.empty()) {
        r.add("measured.p2p", "not run: needs 2 or more GPUs", Level::kInfo);
        r.add("measured.nccl_allreduce", "not run: needs 2 or more GPUs", Level::kInfo);
        return;
    }
    auto cuda_gpu = [&](int cuda_index) -> const GpuInfo* {
        for (const auto& gm : m->gpus)
            if (gm.cuda_index == cuda_index) return gpu_by_bus(inv, gm.bus_id);
        return nullptr;
    };
    const bool loopback = m->gpus.size() < 2;
    for (const auto& pm : m->p2p) {
        const GpuInfo* a = cuda_gpu(pm.cuda_a);
        const GpuInfo* b = cuda_gpu(pm.cuda_b);
        const std::string name = "measured.p2p.gpu" + (a ? idx(*a) : "?") + "-gpu" + (b ? idx(*b) : "?");
        if (loopback) {
            r.add(name,
                  pm.gbps.value ? fmt("%.1f GB/s (loopback on one GPU: code path check only)", *pm.gbps.value)
                                : "failed: " + pm.gbps.note,
                  pm.gbps.value ? Level::kInfo : Level::kWarn);
            continue;
        }
        double reference = 0;
        std::string ref_name;
        if (a && b && nvlinks_between(*a, *b) > 0) {
            if (auto part = find_part(a->name)) {
                reference = part->nvlink_gbps_per_dir;
                ref_name = "NVLink";
            }
        } else if (a && a->pcie_gen_max && a->pcie_width_max) {
            reference = pcie_link_gbps(*a->pcie_gen_max, *a->pcie_width_max);
            ref_name = "PCIe";
        }
        add_ratio(r, name, pm.gbps, "GB/s", reference, ref_name, kPeerWarnFraction,
                  "nvidia-smi topo -m; nvidia-smi nvlink -s (peer copies below the link rate)");
    }
    const std::string nccl_name = "measured.nccl_allreduce";
    if (loopback) {
        r.add(nccl_name,
              m->nccl_busbw_gbps.value ? "ran on a communicator of size 1 (result checked; bus bandwidth is 0 by "
                                         "definition)"
                                       : "failed: " + m->nccl_busbw_gbps.note,
              m->nccl_busbw_gbps.value ? Level::kInfo : Level::kWarn);
        return;
    }
    double reference = 0;
    std::string ref_name;
    if (!inv.gpus.empty()) {
        const GpuInfo& g0 = inv.gpus[0];
        const bool nvlink = inv.gpus.size() >= 2 && nvlinks_between(inv.gpus[0], inv.gpus[1]) > 0;
        if (auto part = find_part(g0.name); part && nvlink) {
            reference = part->nvlink_gbps_per_dir;
            ref_name = "NVLink";
        } else if (g0.pcie_gen_max && g0.pcie_width_max) {
            reference = pcie_link_gbps(*g0.pcie_gen_max, *g0.pcie_width_max);
            ref_name = "PCIe";
        }
    }
    add_ratio(r, nccl_name + " (" + std::to_string(m->nccl_ranks) + " GPUs, bus bandwidth)", m->nccl_busbw_gbps, "GB/s",
              reference, ref_name, kPeerWarnFraction,
              "NCCL_DEBUG=INFO shows the transport NCCL chose; nvidia-smi topo -m");
}

Report evaluate(const DoctorInput& in) {
    Report report;
    check_driver(in, report);
    const Inventory& inv = *in.inventory;
    if (inv.driver.ok()) {
        for (size_t i = 0; i < inv.gpus.size(); ++i)
            check_gpu(in, i, report);
        check_nvlink(inv, report);
        check_topology(inv, report);
    }
    if (inv.driver.ok() && !inv.gpus.empty()) check_measurements(in, report);
    return report;
}

}  // namespace pagoda::doctor
