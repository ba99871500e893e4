// The real NvmlSource: libnvidia-ml.so.1 opened with dlopen at run time. The declarations below are
// our own, written from NVIDIA's public NVML API reference (types, enum values, versioned symbol
// names); only the few functions the doctor reads are declared. Every query is read-only.
#include <dlfcn.h>

#include <array>
#include <cstring>

#include "tools/doctor/nvml_source.h"

namespace pagoda::doctor {
namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = struct NvmlDeviceOpaque*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlErrorDriverNotLoaded = 9;
constexpr nvmlReturn_t kNvmlErrorLibraryNotFound = 12;
constexpr unsigned kNvLinkMaxLinks = 18;               // NVML_NVLINK_MAX_LINKS
constexpr int kFeatureEnabled = 1;                     // NVML_FEATURE_ENABLED
constexpr int kTemperatureGpu = 0;                     // NVML_TEMPERATURE_GPU
constexpr int kThresholdShutdown = 0;                  // NVML_TEMPERATURE_THRESHOLD_SHUTDOWN
constexpr int kThresholdSlowdown = 1;                  // NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
constexpr int kClockSm = 1, kClockMem = 2;             // NVML_CLOCK_SM, NVML_CLOCK_MEM
constexpr int kEccCorrected = 0, kEccUncorrected = 1;  // nvmlMemoryErrorType_t
constexpr int kEccVolatile = 0, kEccAggregate = 1;     // nvmlEccCounterType_t
constexpr int kP2pCapsRead = 0;                        // NVML_P2P_CAPS_INDEX_READ
constexpr int kP2pStatusOk = 0;                        // NVML_P2P_STATUS_OK

// nvmlPciInfo_t as filled by the _v3 / _v2 entry points.
struct NvmlPciInfo {
    char bus_id_legacy[16];
    unsigned domain;
    unsigned bus;
    unsigned device;
    unsigned pci_device_id;
    unsigned pci_sub_system_id;
    char bus_id[32];
};
struct NvmlMemory {  // nvmlMemory_t (v1)
    unsigned long long total, free, used;
};
struct NvmlBar1Memory {  // nvmlBAR1Memory_t
    unsigned long long bar1_total, bar1_free, bar1_used;
};

struct NvmlFunctions {
    nvmlReturn_t (*init)() = nullptr;
    nvmlReturn_t (*shutdown)() = nullptr;
    const char* (*error_string)(nvmlReturn_t) = nullptr;
    nvmlReturn_t (*driver_version)(char*, unsigned) = nullptr;
    nvmlReturn_t (*nvml_version)(char*, unsigned) = nullptr;
    nvmlReturn_t (*cuda_driver_version)(int*) = nullptr;
    nvmlReturn_t (*device_count)(unsigned*) = nullptr;
    nvmlReturn_t (*handle_by_index)(unsigned, nvmlDevice_t*) = nullptr;
    nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
    nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
    nvmlReturn_t (*pci_info)(nvmlDevice_t, NvmlPciInfo*) = nullptr;
    nvmlReturn_t (*memory_info)(nvmlDevice_t, NvmlMemory*) = nullptr;
    nvmlReturn_t (*compute_capability)(nvmlDevice_t, int*, int*) = nullptr;
    nvmlReturn_t (*persistence_mode)(nvmlDevice_t, int*) = nullptr;
    nvmlReturn_t (*compute_mode)(nvmlDevice_t, int*) = nullptr;
    nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
    nvmlReturn_t (*virtualization_mode)(nvmlDevice_t, int*) = nullptr;
    nvmlReturn_t (*bar1_memory)(nvmlDevice_t, NvmlBar1Memory*) = nullptr;
    nvmlReturn_t (*pcie_gen_current)(nvmlDevice_t, unsigned*) = nullptr;
    nvmlReturn_t (*pcie_gen_max)(nvmlDevice_t, unsigned*) = nullptr;
    nvmlReturn_t (*pcie_gen_gpu_max)(nvmlDevice_t, unsigned*) = nullptr;
    nvmlReturn_t (*pcie_width_current)(nvmlDevice_t, unsigned*) = nullptr;
    nvmlReturn_t (*pcie_width_max)(nvmlDevice_t, unsigned*) = nullptr;
    nvmlReturn_t (*pcie_replay)(nvmlDevice_t, unsigned*) = nullptr;
    nvmlReturn_t (*nvlink_state)(nvmlDevice_t, unsigned, int*) = nullptr;
    nvmlReturn_t (*nvlink_version)(nvmlDevice_t, unsigned, unsigned*) = nullptr;
    nvmlReturn_t (*nvlink_remote_pci)(nvmlDevice_t, unsigned, NvmlPciInfo*) = nullptr;
    nvmlReturn_t (*nvlink_remote_type)(nvmlDevice_t, unsigned, int*) = nullptr;
    nvmlReturn_t (*ecc_mode)(nvmlDevice_t, int*, int*) = nullptr;
    nvmlReturn_t (*ecc_errors)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
    nvmlReturn_t (*remapped_rows)(nvmlDevice_t, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
    nvmlReturn_t (*retired_pages_pending)(nvmlDevice_t, int*) = nullptr;
    nvmlReturn_t (*power_usage)(nvmlDevice_t, unsigned*) = nullptr;
    nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned*) = nullptr;
    nvmlReturn_t (*power_default_limit)(nvmlDevice_t, unsigned*) = nullptr;
    nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned*) = nullptr;
    nvmlReturn_t (*temperature_threshold)(nvmlDevice_t, int, unsigned*) = nullptr;
    nvmlReturn_t (*clock_reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
    nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned*) = nullptr;
    nvmlReturn_t (*max_clock)(nvmlDevice_t, int, unsigned*) = nullptr;
    nvmlReturn_t (*topology)(nvmlDevice_t, nvmlDevice_t, int*) = nullptr;
    nvmlReturn_t (*p2p_status)(nvmlDevice_t, nvmlDevice_t, int, int*) = nullptr;
};

template <typename Fn>
void bind(void* lib, Fn& fn, const char* name, const char* fallback = nullptr) {
    void* sym = dlsym(lib, name);
    if (!sym && fallback) sym = dlsym(lib, fallback);
    fn = reinterpret_cast<Fn>(sym);
}

// A query that is absent from an old library counts as "not supported", like NVML's own answer.
template <typename T, typename Fn, typename... Args>
std::optional<T> query(Fn fn, Args... args) {
    if (!fn) return std::nullopt;
    T value{};
    if (fn(args..., &value) != kNvmlSuccess) return std::nullopt;
    return value;
}

std::string bus_id_string(const NvmlPciInfo& pci) {
    return std::string(pci.bus_id, strnlen(pci.bus_id, sizeof(pci.bus_id)));
}

class DlopenNvml final : public NvmlSource {
  public:
    DlopenNvml(void* lib, NvmlFunctions fns) : lib_(lib), fns_(fns) {}
    ~DlopenNvml() override {
        if (fns_.shutdown) fns_.shutdown();
        dlclose(lib_);
    }
    DlopenNvml(const DlopenNvml&) = delete;
    DlopenNvml& operator=(const DlopenNvml&) = delete;

    std::string error_text(nvmlReturn_t r) const {
        const char* s = fns_.error_string ? fns_.error_string(r) : nullptr;
        return s ? std::string(s) : "NVML error " + std::to_string(r);
    }

    Result<SystemInfo> system() override {
        SystemInfo info;
        std::array<char, 96> buf{};
        if (fns_.driver_version && fns_.driver_version(buf.data(), buf.size()) == kNvmlSuccess)
            info.driver_version = buf.data();
        buf.fill(0);
        if (fns_.nvml_version && fns_.nvml_version(buf.data(), buf.size()) == kNvmlSuccess)
            info.nvml_version = buf.data();
        info.cuda_driver_version = query<int>(fns_.cuda_driver_version);
        if (!fns_.device_count) return Status::error("NVML has no nvmlDeviceGetCount_v2");
        nvmlReturn_t r = fns_.device_count(&info.device_count);
        if (r != kNvmlSuccess) return Status::error("nvmlDeviceGetCount_v2: " + error_text(r));
        return info;
    }

    Result<nvmlDevice_t> handle(unsigned index) {
        nvmlDevice_t dev = nullptr;
        if (!fns_.handle_by_index) return Status::error("NVML has no nvmlDeviceGetHandleByIndex_v2");
        nvmlReturn_t r = fns_.handle_by_index(index, &dev);
        if (r != kNvmlSuccess)
            return Status::error("GPU " + std::to_string(index) + ": nvmlDeviceGetHandleByIndex_v2: " + error_text(r));
        return dev;
    }

    Result<GpuInfo> gpu(unsigned index) override {
        PAGODA_ASSIGN_OR_RETURN(nvmlDevice_t dev, handle(index));
        GpuInfo g;
        g.index = index;
        std::array<char, 128> buf{};
        if (fns_.name && fns_.name(dev, buf.data(), buf.size()) == kNvmlSuccess) g.name = buf.data();
        buf.fill(0);
        if (fns_.uuid && fns_.uuid(dev, buf.data(), buf.size()) == kNvmlSuccess) g.uuid = buf.data();
        NvmlPciInfo pci{};
        if (fns_.pci_info && fns_.pci_info(dev, &pci) == kNvmlSuccess) g.bus_id = bus_id_string(pci);
        if (auto m = query<NvmlMemory>(fns_.memory_info, dev)) {
            g.memory_total = m->total;
            g.memory_free = m->free;
            g.memory_used = m->used;
        }
        int major = 0, minor = 0;
        if (fns_.compute_capability && fns_.compute_capability(dev, &major, &minor) == kNvmlSuccess) {
            g.cc_major = major;
            g.cc_minor = minor;
        }
        if (auto p = query<int>(fns_.persistence_mode, dev)) g.persistence_mode = *p == kFeatureEnabled;
        g.compute_mode = query<int>(fns_.compute_mode, dev);
        unsigned mig_cur = 0, mig_pend = 0;
        if (fns_.mig_mode && fns_.mig_mode(dev, &mig_cur, &mig_pend) == kNvmlSuccess) {
            g.mig_current = mig_cur;
            g.mig_pending = mig_pend;
        }
        g.virtualization_mode = query<int>(fns_.virtualization_mode, dev);
        if (auto b = query<NvmlBar1Memory>(fns_.bar1_memory, dev)) g.bar1_total = b->bar1_total;
        g.pcie_gen_current = query<unsigned>(fns_.pcie_gen_current, dev);
        g.pcie_gen_max = query<unsigned>(fns_.pcie_gen_max, dev);
        g.pcie_gen_gpu_max = query<unsigned>(fns_.pcie_gen_gpu_max, dev);
        g.pcie_width_current = query<unsigned>(fns_.pcie_width_current, dev);
        g.pcie_width_max = query<unsigned>(fns_.pcie_width_max, dev);
        g.pcie_replay_count = query<unsigned>(fns_.pcie_replay, dev);
        read_nvlinks(dev, g);
        int ecc_cur = 0, ecc_pend = 0;
        if (fns_.ecc_mode && fns_.ecc_mode(dev, &ecc_cur, &ecc_pend) == kNvmlSuccess) {
            g.ecc_current = ecc_cur == kFeatureEnabled;
            g.ecc_pending = ecc_pend == kFeatureEnabled;
        }
        g.ecc_corrected_volatile = query<unsigned long long>(fns_.ecc_errors, dev, kEccCorrected, kEccVolatile);
        g.ecc_uncorrected_volatile = query<unsigned long long>(fns_.ecc_errors, dev, kEccUncorrected, kEccVolatile);
        g.ecc_corrected_aggregate = query<unsigned long long>(fns_.ecc_errors, dev, kEccCorrected, kEccAggregate);
        g.ecc_uncorrected_aggregate = query<unsigned long long>(fns_.ecc_errors, dev, kEccUncorrected, kEccAggregate);
        unsigned corr = 0, unc = 0, pending = 0, failure = 0;
        if (fns_.remapped_rows && fns_.remapped_rows(dev, &corr, &unc, &pending, &failure) == kNvmlSuccess)
            g.remapped_rows = RemappedRows{corr, unc, pending != 0, failure != 0};
        if (auto p = query<int>(fns_.retired_pages_pending, dev)) g.retired_pages_pending = *p == kFeatureEnabled;
        g.power_mw = query<unsigned>(fns_.power_usage, dev);
        g.power_limit_mw = query<unsigned>(fns_.power_limit, dev);
        g.power_default_limit_mw = query<unsigned>(fns_.power_default_limit, dev);
        g.temperature_c = query<unsigned>(fns_.temperature, dev, kTemperatureGpu);
        g.temperature_slowdown_c = query<unsigned>(fns_.temperature_threshold, dev, kThresholdSlowdown);
        g.temperature_shutdown_c = query<unsigned>(fns_.temperature_threshold, dev, kThresholdShutdown);
        g.clock_event_reasons = query<unsigned long long>(fns_.clock_reasons, dev);
        g.sm_clock_mhz = query<unsigned>(fns_.clock, dev, kClockSm);
        g.sm_clock_max_mhz = query<unsigned>(fns_.max_clock, dev, kClockSm);
        g.mem_clock_mhz = query<unsigned>(fns_.clock, dev, kClockMem);
        g.mem_clock_max_mhz = query<unsigned>(fns_.max_clock, dev, kClockMem);
        return g;
    }

    void read_nvlinks(nvmlDevice_t dev, GpuInfo& g) {
        if (!fns_.nvlink_state) return;
        for (unsigned link = 0; link < kNvLinkMaxLinks; ++link) {
            int state = 0;
            if (fns_.nvlink_state(dev, link, &state) != kNvmlSuccess) continue;  // not supported / no such link
            NvLinkInfo info;
            info.link = link;
            info.active = state == kFeatureEnabled;
            info.version = query<unsigned>(fns_.nvlink_version, dev, link);
            if (info.active) {
                NvmlPciInfo pci{};
                if (fns_.nvlink_remote_pci && fns_.nvlink_remote_pci(dev, link, &pci) == kNvmlSuccess)
                    info.remote_bus_id = bus_id_string(pci);
                if (auto t = query<int>(fns_.nvlink_remote_type, dev, link))
                    info.remote_type = static_cast<NvLinkRemote>(*t);
            }
            g.nvlinks.push_back(std::move(info));
        }
    }

    std::optional<TopologyLevel> topology(unsigned a, unsigned b) override {
        auto da = handle(a);
        auto db = handle(b);
        if (!da.ok() || !db.ok()) return std::nullopt;
        auto level = query<int>(fns_.topology, *da, *db);
        if (!level) return std::nullopt;
        return static_cast<TopologyLevel>(*level);
    }

    std::optional<bool> p2p_read_ok(unsigned a, unsigned b) override {
        auto da = handle(a);
        auto db = handle(b);
        if (!da.ok() || !db.ok()) return std::nullopt;
        auto status = query<int>(fns_.p2p_status, *da, *db, kP2pCapsRead);
        if (!status) return std::nullopt;
        return *status == kP2pStatusOk;
    }

    std::optional<ClockSample> clocks(unsigned index) override {
        auto dev = handle(index);
        if (!dev.ok()) return std::nullopt;
        ClockSample s;
        s.sm_clock_mhz = query<unsigned>(fns_.clock, *dev, kClockSm);
        s.power_mw = query<unsigned>(fns_.power_usage, *dev);
        s.clock_event_reasons = query<unsigned long long>(fns_.clock_reasons, *dev);
        return s;
    }

  private:
    void* lib_;
    NvmlFunctions fns_;
};

}  // namespace

Result<std::unique_ptr<NvmlSource>> load_nvml(const std::string& library) {
    void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char* why = dlerror();
        const std::string reason = why && !std::strstr(why, "No such file") ? why : "not found";
        return Status::error("no NVIDIA driver: " + library + " " + reason);
    }
    NvmlFunctions f;
    bind(lib, f.init, "nvmlInit_v2", "nvmlInit");
    bind(lib, f.shutdown, "nvmlShutdown");
    bind(lib, f.error_string, "nvmlErrorString");
    bind(lib, f.driver_version, "nvmlSystemGetDriverVersion");
    bind(lib, f.nvml_version, "nvmlSystemGetNVMLVersion");
    bind(lib, f.cuda_driver_version, "nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion");
    bind(lib, f.device_count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    bind(lib, f.handle_by_index, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
    bind(lib, f.name, "nvmlDeviceGetName");
    bind(lib, f.uuid, "nvmlDeviceGetUUID");
    bind(lib, f.pci_info, "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2");
    bind(lib, f.memory_info, "nvmlDeviceGetMemoryInfo");
    bind(lib, f.compute_capability, "nvmlDeviceGetCudaComputeCapability");
    bind(lib, f.persistence_mode, "nvmlDeviceGetPersistenceMode");
    bind(lib, f.compute_mode, "nvmlDeviceGetComputeMode");
    bind(lib, f.mig_mode, "nvmlDeviceGetMigMode");
    bind(lib, f.virtualization_mode, "nvmlDeviceGetVirtualizationMode");
    bind(lib, f.bar1_memory, "nvmlDeviceGetBAR1MemoryInfo");
    bind(lib, f.pcie_gen_current, "nvmlDeviceGetCurrPcieLinkGeneration");
    bind(lib, f.pcie_gen_max, "nvmlDeviceGetMaxPcieLinkGeneration");
    bind(lib, f.pcie_gen_gpu_max, "nvmlDeviceGetGpuMaxPcieLinkGeneration");
    bind(lib, f.pcie_width_current, "nvmlDeviceGetCurrPcieLinkWidth");
    bind(lib, f.pcie_width_max, "nvmlDeviceGetMaxPcieLinkWidth");
    bind(lib, f.pcie_replay, "nvmlDeviceGetPcieReplayCounter");
    bind(lib, f.nvlink_state, "nvmlDeviceGetNvLinkState");
    bind(lib, f.nvlink_version, "nvmlDeviceGetNvLinkVersion");
    bind(lib, f.nvlink_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    bind(lib, f.nvlink_remote_type, "nvmlDeviceGetNvLinkRemoteDeviceType");
    bind(lib, f.ecc_mode, "nvmlDeviceGetEccMode");
    bind(lib, f.ecc_errors, "nvmlDeviceGetTotalEccErrors");
    bind(lib, f.remapped_rows, "nvmlDeviceGetRemappedRows");
    bind(lib, f.retired_pages_pending, "nvmlDeviceGetRetiredPagesPendingStatus");
    bind(lib, f.power_usage, "nvmlDeviceGetPowerUsage");
    bind(lib, f.power_limit, "nvmlDeviceGetEnforcedPowerLimit");
    bind(lib, f.power_default_limit, "nvmlDeviceGetPowerManagementDefaultLimit");
    bind(lib, f.temperature, "nvmlDeviceGetTemperature");
    bind(lib, f.temperature_threshold, "nvmlDeviceGetTemperatureThreshold");
    bind(lib, f.clock_reasons, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons");
    bind(lib, f.clock, "nvmlDeviceGetClockInfo");
    bind(lib, f.max_clock, "nvmlDeviceGetMaxClockInfo");
    bind(lib, f.topology, "nvmlDeviceGetTopologyCommonAncestor");
    bind(lib, f.p2p_status, "nvmlDeviceGetP2PStatus");
    if (!f.init) {
        dlclose(lib);
        return Status::error("no NVIDIA driver: " + library + " has no nvmlInit_v2");
    }
    nvmlReturn_t r = f.init();
    if (r != kNvmlSuccess) {
        std::string why = f.error_string && f.error_string(r) ? f.error_string(r) : "error " + std::to_string(r);
        dlclose(lib);
        if (r == kNvmlErrorDriverNotLoaded || r == kNvmlErrorLibraryNotFound)
            return Status::error("no NVIDIA driver: nvmlInit_v2: " + why);
        return Status::error("NVML failed to start: nvmlInit_v2: " + why);
    }
    return std::unique_ptr<NvmlSource>(std::make_unique<DlopenNvml>(lib, f));
}

}  // namespace pagoda::doctor
