// What the doctor reads from NVML, as plain structs, behind an interface: the real source loads
// libnvidia-ml.so.1 at run time (dlopen; no NVML header or library is needed to build), and tests
// substitute a fake so every rule runs on machines without a GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace pagoda::doctor {

// nvmlGpuTopologyLevel_t values (NVML API reference, "GPU topology"): the closest common ancestor
// of two GPUs on the PCIe tree.
enum class TopologyLevel : int {
    kInternal = 0,     // same board (multi-GPU card)
    kSingle = 10,      // one PCIe switch between them (nvidia-smi: PIX)
    kMultiple = 20,    // several PCIe switches, no host bridge (PXB)
    kHostBridge = 30,  // one CPU host bridge (PHB)
    kNode = 40,        // same NUMA node, different host bridges (NODE)
    kSystem = 50,      // across CPU sockets (SYS)
};

// nvmlIntNvLinkDeviceType_t values.
enum class NvLinkRemote : int { kGpu = 0, kIbmNpu = 1, kSwitch = 2, kUnknown = 0xFF };

struct NvLinkInfo {
    unsigned link = 0;
    bool active = false;              // nvmlDeviceGetNvLinkState == NVML_FEATURE_ENABLED
    std::optional<unsigned> version;  // NVLink generation of this link
    std::optional<std::string> remote_bus_id;
    std::optional<NvLinkRemote> remote_type;
};

struct RemappedRows {
    unsigned corrected = 0;    // rows remapped for correctable errors
    unsigned uncorrected = 0;  // rows remapped for uncorrectable errors
    bool pending = false;      // a remap waits for a GPU reset
    bool failure = false;      // a remap failed: the memory cannot be repaired in the field
};

// Every field a GPU may decline to answer is optional: nullopt means "not supported" (or not
// readable), which the rules report as such rather than guessing.
struct GpuInfo {
    unsigned index = 0;
    std::string name;
    std::string uuid;
    std::string bus_id;                                              // NVML form, "00000000:17:00.0"
    std::optional<uint64_t> memory_total, memory_free, memory_used;  // bytes
    std::optional<int> cc_major, cc_minor;
    std::optional<bool> persistence_mode;
    std::optional<int> compute_mode;  // 0 default, 1 exclusive thread, 2 prohibited, 3 exclusive process
    std::optional<unsigned> mig_current, mig_pending;  // 1 = enabled
    std::optional<int> virtualization_mode;            // 0 none, 1 pass-through, 2 vGPU, 3 host vGPU, 4 host vSGA
    std::optional<uint64_t> bar1_total;                // bytes
    std::optional<unsigned> pcie_gen_current, pcie_gen_max, pcie_gen_gpu_max;
    std::optional<unsigned> pcie_width_current, pcie_width_max;
    std::optional<unsigned> pcie_replay_count;
    std::vector<NvLinkInfo> nvlinks;  // the links whose state NVML answered; empty: no NVLink
    std::optional<bool> ecc_current, ecc_pending;
    std::optional<uint64_t> ecc_corrected_volatile, ecc_uncorrected_volatile;
    std::optional<uint64_t> ecc_corrected_aggregate, ecc_uncorrected_aggregate;
    std::optional<RemappedRows> remapped_rows;
    std::optional<bool> retired_pages_pending;  // pre-Ampere parts retire pages instead of remapping rows
    std::optional<unsigned> power_mw, power_limit_mw, power_default_limit_mw;
    std::optional<unsigned> temperature_c, temperature_slowdown_c, temperature_shutdown_c;
    std::optional<uint64_t> clock_event_reasons;  // nvmlClocksEventReason* bit mask
    std::optional<unsigned> sm_clock_mhz, sm_clock_max_mhz, mem_clock_mhz, mem_clock_max_mhz;
};

// nvmlClocksEventReason* bits (formerly nvmlClocksThrottleReason*).
namespace clock_reason {
inline constexpr uint64_t kGpuIdle = 0x1;
inline constexpr uint64_t kApplicationsClocksSetting = 0x2;
inline constexpr uint64_t kSwPowerCap = 0x4;
inline constexpr uint64_t kHwSlowdown = 0x8;
inline constexpr uint64_t kSyncBoost = 0x10;
inline constexpr uint64_t kSwThermalSlowdown = 0x20;
inline constexpr uint64_t kHwThermalSlowdown = 0x40;
inline constexpr uint64_t kHwPowerBrakeSlowdown = 0x80;
inline constexpr uint64_t kDisplayClockSetting = 0x100;
}  // namespace clock_reason

// The few readings a sampling loop takes many times a second (three NVML calls, not gpu()'s dozens); each is
// nullopt when the GPU declines it.
struct ClockSample {
    std::optional<unsigned> sm_clock_mhz;
    std::optional<unsigned> power_mw;  // nvmlDeviceGetPowerUsage: a 1 s average on Ampere (not A100) and newer
    std::optional<uint64_t> clock_event_reasons;  // nvmlClocksEventReason* bit mask
};

struct SystemInfo {
    std::string driver_version;              // "580.159.04"
    std::optional<int> cuda_driver_version;  // 13000 for CUDA 13.0
    std::string nvml_version;
    unsigned device_count = 0;
};

class NvmlSource {
  public:
    virtual ~NvmlSource() = default;
    virtual Result<SystemInfo> system() = 0;
    // Errors name the GPU and the NVML call (a GPU that fell off the bus answers "GPU is lost").
    virtual Result<GpuInfo> gpu(unsigned index) = 0;
    virtual std::optional<TopologyLevel> topology(unsigned a, unsigned b) = 0;
    // Whether CUDA peer-to-peer reads work between the two GPUs (nvmlDeviceGetP2PStatus, READ).
    virtual std::optional<bool> p2p_read_ok(unsigned a, unsigned b) = 0;
    // SM clock, power and clock-event reasons now; nullopt when the GPU cannot be reached. Not pure: a source that
    // only serves the doctor's checks (the tests' fakes) need not answer it.
    virtual std::optional<ClockSample> clocks(unsigned /*index*/) { return std::nullopt; }
};

// Loads `library` with dlopen and initialises NVML. The error text starts with "no NVIDIA driver"
// when the library is absent or the kernel driver is not loaded, so callers can say so plainly.
Result<std::unique_ptr<NvmlSource>> load_nvml(const std::string& library = "libnvidia-ml.so.1");

}  // namespace pagoda::doctor
