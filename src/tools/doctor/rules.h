// The doctor's rules: inventory and measurements in, rows of PASS/INFO/WARN/FAIL out. Pure
// functions of their inputs, so tests drive them with a fake NVML and hand-made measurements.
#pragma once

#include <optional>
#include <string>

#include "tools/doctor/inventory.h"
#include "tools/doctor/measure.h"
#include "tools/doctor/report.h"

namespace pagoda::doctor {

// Thresholds, named so tests and docs/operations.md refer to the same numbers.
inline constexpr unsigned kTempWarnMarginC = 10;     // WARN within this many degrees of the slowdown threshold
inline constexpr unsigned kTempShutdownMarginC = 5;  // FAIL within this many degrees of shutdown (or at slowdown)
inline constexpr double kMemoryInUseWarn = 0.10;     // WARN when more than 10% of GPU memory is already used
inline constexpr unsigned kPcieReplayWarn = 100;     // WARN at this many PCIe replays since driver load
inline constexpr uint64_t kEccCorrectedVolatileWarn = 1000;
inline constexpr uint64_t kMinLargeBar1Bytes = 1ull << 30;  // a BAR1 below 1 GiB is the legacy 256 MiB window
inline constexpr double kMemoryBwWarnFraction = 0.70;       // measured / datasheet
inline constexpr double kGemmWarnFraction = 0.60;
inline constexpr double kPcieCopyWarnFraction = 0.60;  // pinned copies / PCIe link theoretical
inline constexpr double kPeerWarnFraction = 0.50;      // P2P and NCCL bus bandwidth / link theoretical

struct DoctorInput {
    const Inventory* inventory = nullptr;
    CudaProbe cuda;
    const Measurements* measurements = nullptr;  // null with --quick
    bool quick = false;
};

void check_driver(const DoctorInput& in, Report& report);
void check_gpu(const DoctorInput& in, size_t gpu, Report& report);
void check_nvlink(const Inventory& inv, Report& report);
void check_topology(const Inventory& inv, Report& report);
void check_measurements(const DoctorInput& in, Report& report);

// All of the above in the order the table shows them.
Report evaluate(const DoctorInput& in);

// Whether a build for `archs` (CMAKE_CUDA_ARCHITECTURES, e.g. "90a" or "80;90") has code that runs
// on a GPU of compute capability major.minor. Unknown spellings ("native", "all") count as yes.
bool archs_cover(const std::string& archs, int major, int minor);
// Which of that code the driver runs there ("sm_90a code", "sm_80 code", "compute_80 PTX, compiled by the driver at
// the first start"), or none.
std::optional<std::string> code_for(const std::string& archs, int major, int minor);

std::string format_bytes_gib(uint64_t bytes);    // "141.0 GiB"
std::string topology_name(TopologyLevel level);  // "PIX (one PCIe switch)", ...

}  // namespace pagoda::doctor
