// The per-GPU and driver rules, driven through the fake NVML: a healthy H100 passes, and each
// threshold and state flips exactly the row it concerns.
#include <gtest/gtest.h>

#include "fake_nvml.h"

namespace pagoda::doctor {
namespace {

using testing::cuda_13_probe;
using testing::evaluate_fake;
using testing::FakeNvml;
using testing::healthy_h100;
using testing::level_of;

class DoctorRules : public ::testing::Test {
  protected:
    void SetUp() override { nvml.gpus.push_back(healthy_h100(0)); }
    GpuInfo& gpu() { return nvml.gpus[0]; }
    Report run() { return evaluate_fake(nvml, cuda_13_probe(static_cast<int>(nvml.gpus.size()))); }
    FakeNvml nvml;
};

TEST_F(DoctorRules, HealthyGpuHasNoWarningOrFailure) {
    const Report r = run();
    for (const auto& row : r.rows)
        EXPECT_TRUE(row.level == Level::kPass || row.level == Level::kInfo) << row.check << ": " << row.value;
    EXPECT_FALSE(r.has_fail());
    EXPECT_EQ(level_of(r, "driver"), Level::kPass);
    EXPECT_EQ(level_of(r, "gpu.count"), Level::kPass);
    EXPECT_EQ(level_of(r, "gpu0.temperature"), Level::kPass);
    EXPECT_EQ(level_of(r, "measured"), Level::kInfo);  // quick
}

TEST_F(DoctorRules, MissingDriverIsAFailThatNamesTheCpuPath) {
    Inventory inv = collect_inventory(nullptr, Status::error("no NVIDIA driver: cannot load libnvidia-ml.so.1"),
                                      "/nonexistent-doctor-root");
    DoctorInput in;
    in.inventory = &inv;
    in.cuda = CudaProbe{};
    const Report r = evaluate(in);
    ASSERT_EQ(level_of(r, "driver"), Level::kFail);
    EXPECT_NE(r.find("driver")->value.find("no NVIDIA driver"), std::string::npos);
    ASSERT_EQ(level_of(r, "gpu.serving"), Level::kFail);
    EXPECT_NE(r.find("gpu.serving")->action.find("--device cpu"), std::string::npos);
    EXPECT_EQ(r.find("gpu0"), nullptr);
    EXPECT_TRUE(r.has_fail());
}

TEST_F(DoctorRules, NvmlSystemErrorIsReportedAsTheDriverFailure) {
    nvml.system_error = "nvmlDeviceGetCount_v2: Driver Not Loaded";
    const Report r = run();
    EXPECT_EQ(level_of(r, "driver"), Level::kFail);
    EXPECT_EQ(r.find("driver")->value, "nvmlDeviceGetCount_v2: Driver Not Loaded");
}

TEST_F(DoctorRules, NoGpuIsAFail) {
    nvml.gpus.clear();
    const Report r = run();
    EXPECT_EQ(level_of(r, "gpu.count"), Level::kFail);
    EXPECT_EQ(level_of(r, "gpu.serving"), Level::kFail);
}

TEST_F(DoctorRules, UnreadableGpuIsAFail) {
    nvml.gpus.push_back(healthy_h100(1));
    nvml.gpu_errors[1] = "GPU 1: nvmlDeviceGetHandleByIndex_v2: GPU is lost";
    const Report r = run();
    EXPECT_EQ(level_of(r, "gpu.unreadable"), Level::kFail);
}

TEST_F(DoctorRules, DriverCudaOlderThanTheBuildFails) {
    nvml.system_info.cuda_driver_version = 12080;
    EXPECT_EQ(level_of(run(), "driver.cuda"), Level::kFail);
    nvml.system_info.cuda_driver_version = 13000;
    EXPECT_EQ(level_of(run(), "driver.cuda"), Level::kPass);
    nvml.system_info.cuda_driver_version = 13020;
    EXPECT_EQ(level_of(run(), "driver.cuda"), Level::kPass);
}

TEST_F(DoctorRules, BuildWithoutCudaWarns) {
    const Report r = evaluate_fake(nvml, CudaProbe{});
    EXPECT_EQ(level_of(r, "driver.cuda"), Level::kWarn);
    EXPECT_EQ(r.find("cuda.devices"), nullptr);
}

TEST_F(DoctorRules, CudaSeeingFewerGpusWarnsAndNoneFails) {
    nvml.gpus.push_back(healthy_h100(1));
    EXPECT_EQ(level_of(evaluate_fake(nvml, cuda_13_probe(1)), "cuda.devices"), Level::kWarn);
    CudaProbe none = cuda_13_probe(0);
    none.error = "cudaGetDeviceCount: no CUDA-capable device is detected";
    EXPECT_EQ(level_of(evaluate_fake(nvml, none), "cuda.devices"), Level::kFail);
}

TEST_F(DoctorRules, MemoryAlreadyInUseWarnsAboveTenPercent) {
    gpu().memory_free = static_cast<uint64_t>(*gpu().memory_total * 0.90);  // exactly 10% used
    EXPECT_EQ(level_of(run(), "gpu0.memory"), Level::kPass);
    gpu().memory_free = static_cast<uint64_t>(*gpu().memory_total * 0.85);
    EXPECT_EQ(level_of(run(), "gpu0.memory"), Level::kWarn);
}

TEST_F(DoctorRules, ComputeCapabilityBelowAmpereOrOutsideTheBuildFails) {
    gpu().cc_major = 7;
    gpu().cc_minor = 5;
    EXPECT_EQ(level_of(run(), "gpu0.compute_capability"), Level::kFail);
    gpu().cc_major = 8;
    gpu().cc_minor = 0;  // an A100 with an sm_90a-only build
    const Report r = run();
    EXPECT_EQ(level_of(r, "gpu0.compute_capability"), Level::kFail);
    EXPECT_NE(r.find("gpu0.compute_capability")->action.find("CMAKE_CUDA_ARCHITECTURES=80"), std::string::npos);
}

TEST(DoctorArchsCover, FollowsNvccTargetRules) {
    EXPECT_TRUE(archs_cover("90a", 9, 0));
    EXPECT_FALSE(archs_cover("90a", 10, 0));  // arch-specific code runs only on that part
    EXPECT_FALSE(archs_cover("90a", 8, 0));
    EXPECT_TRUE(archs_cover("80", 9, 0));  // PTX is compiled by the driver for newer parts
    EXPECT_FALSE(archs_cover("80-real", 9, 0));
    EXPECT_TRUE(archs_cover("80-real", 8, 6));
    EXPECT_TRUE(archs_cover("80;90a", 9, 0));
    EXPECT_TRUE(archs_cover("native", 7, 0));
    EXPECT_TRUE(archs_cover("", 8, 0));
}

TEST(DoctorCodeFor, TheDefaultBuildCoversServerGpus) {
    const std::string build = "80;86-real;89-real;90a-real";  // CMakeLists.txt's default
    EXPECT_EQ(code_for(build, 9, 0), "sm_90a code");
    EXPECT_EQ(code_for(build, 8, 0), "sm_80 code");
    EXPECT_EQ(code_for(build, 8, 6), "sm_86 code");
    EXPECT_EQ(code_for(build, 8, 7), "sm_86 code");  // the newest machine code of the major at or below the part
    EXPECT_EQ(code_for(build, 8, 9), "sm_89 code");
    EXPECT_EQ(code_for(build, 12, 0), "compute_80 PTX, compiled by the driver at the first start");
    EXPECT_EQ(code_for("90a-real", 8, 0), std::nullopt);
    EXPECT_EQ(code_for("80-virtual", 9, 0), "compute_80 PTX, compiled by the driver at the first start");
}

TEST_F(DoctorRules, CapabilityLineNamesTheCodeAndTiles) {
    CudaProbe probe = cuda_13_probe(1);
    probe.archs = "80;86-real;89-real;90a-real";
    gpu().cc_major = 8;
    gpu().cc_minor = 0;
    const Report r = evaluate_fake(nvml, probe);
    EXPECT_EQ(level_of(r, "gpu0.compute_capability"), Level::kPass);
    EXPECT_EQ(r.find("gpu0.compute_capability")->value,
              "8.0: sm_80 code, 163 KB shared-memory tiles, mma.sync attention");
    gpu().cc_major = 9;
    gpu().cc_minor = 0;
    EXPECT_EQ(evaluate_fake(nvml, probe).find("gpu0.compute_capability")->value,
              "9.0: sm_90a code, 227 KB shared-memory tiles, wgmma prefill attention");
    probe.archs = "80-virtual";  // the A100's code on a Hopper GPU (what run_cuda_bench.sh's arch part tests)
    EXPECT_EQ(evaluate_fake(nvml, probe).find("gpu0.compute_capability")->value,
              "9.0: compute_80 PTX, compiled by the driver at the first start, 227 KB shared-memory tiles, mma.sync "
              "attention");
}

TEST_F(DoctorRules, PersistenceOffWarns) {
    gpu().persistence_mode = false;
    EXPECT_EQ(level_of(run(), "gpu0.persistence"), Level::kWarn);
    gpu().persistence_mode.reset();
    EXPECT_EQ(level_of(run(), "gpu0.persistence"), Level::kInfo);
}

TEST_F(DoctorRules, ComputeModes) {
    gpu().compute_mode = 2;
    EXPECT_EQ(level_of(run(), "gpu0.compute_mode"), Level::kFail);
    gpu().compute_mode = 3;
    EXPECT_EQ(level_of(run(), "gpu0.compute_mode"), Level::kPass);
    gpu().compute_mode = 1;
    EXPECT_EQ(level_of(run(), "gpu0.compute_mode"), Level::kWarn);
}

TEST_F(DoctorRules, MigEnabledOrPendingWarns) {
    gpu().mig_current = 1;
    gpu().mig_pending = 1;
    Report r = run();
    EXPECT_EQ(level_of(r, "gpu0.mig"), Level::kWarn);
    EXPECT_EQ(r.find("gpu0.mig.pending"), nullptr);
    gpu().mig_current = 0;
    gpu().mig_pending = 1;
    r = run();
    EXPECT_EQ(level_of(r, "gpu0.mig"), Level::kPass);
    EXPECT_EQ(level_of(r, "gpu0.mig.pending"), Level::kWarn);
}

TEST_F(DoctorRules, VirtualizationModes) {
    gpu().virtualization_mode = 1;
    EXPECT_EQ(level_of(run(), "gpu0.virtualization"), Level::kPass);
    gpu().virtualization_mode = 2;
    EXPECT_EQ(level_of(run(), "gpu0.virtualization"), Level::kWarn);
}

TEST_F(DoctorRules, SmallBar1Warns) {
    gpu().bar1_total = 256ull << 20;
    EXPECT_EQ(level_of(run(), "gpu0.bar1"), Level::kWarn);
    gpu().bar1_total = kMinLargeBar1Bytes;
    EXPECT_EQ(level_of(run(), "gpu0.bar1"), Level::kPass);
}

TEST_F(DoctorRules, PcieWidthBelowMaxWarns) {
    gpu().pcie_width_current = 8;
    EXPECT_EQ(level_of(run(), "gpu0.pcie.link"), Level::kWarn);
}

TEST_F(DoctorRules, PcieGenerationBelowMaxWarnsUnderLoadOnly) {
    gpu().pcie_gen_current = 1;
    gpu().clock_event_reasons = clock_reason::kGpuIdle;
    EXPECT_EQ(level_of(run(), "gpu0.pcie.link"), Level::kInfo);
    gpu().clock_event_reasons = 0;  // busy
    gpu().pcie_gen_current = 4;
    EXPECT_EQ(level_of(run(), "gpu0.pcie.link"), Level::kWarn);
}

TEST_F(DoctorRules, SlotSlowerThanTheGpuIsNoted) {
    gpu().pcie_gen_max = 4;
    gpu().pcie_gen_current = 4;
    const Report r = run();
    EXPECT_EQ(level_of(r, "gpu0.pcie.link"), Level::kPass);
    EXPECT_EQ(level_of(r, "gpu0.pcie.slot"), Level::kInfo);
}

TEST_F(DoctorRules, PcieReplayThreshold) {
    gpu().pcie_replay_count = kPcieReplayWarn - 1;
    EXPECT_EQ(level_of(run(), "gpu0.pcie.replays"), Level::kPass);
    gpu().pcie_replay_count = kPcieReplayWarn;
    EXPECT_EQ(level_of(run(), "gpu0.pcie.replays"), Level::kWarn);
}

TEST_F(DoctorRules, EccModes) {
    gpu().ecc_current = false;
    gpu().ecc_pending = false;
    Report r = run();
    EXPECT_EQ(level_of(r, "gpu0.ecc"), Level::kWarn);
    EXPECT_EQ(r.find("gpu0.ecc.pending"), nullptr);
    gpu().ecc_pending = true;
    EXPECT_EQ(level_of(run(), "gpu0.ecc.pending"), Level::kWarn);
    gpu().ecc_current.reset();
    gpu().ecc_pending.reset();
    EXPECT_EQ(level_of(run(), "gpu0.ecc"), Level::kInfo);
}

TEST_F(DoctorRules, EccErrorCounts) {
    gpu().ecc_uncorrected_volatile = 1;
    gpu().ecc_uncorrected_aggregate = 1;
    EXPECT_EQ(level_of(run(), "gpu0.ecc.errors"), Level::kFail);
    gpu().ecc_uncorrected_volatile = 0;  // from an earlier boot
    EXPECT_EQ(level_of(run(), "gpu0.ecc.errors"), Level::kWarn);
    gpu().ecc_uncorrected_aggregate = 0;
    gpu().ecc_corrected_volatile = kEccCorrectedVolatileWarn - 1;
    EXPECT_EQ(level_of(run(), "gpu0.ecc.errors"), Level::kPass);
    gpu().ecc_corrected_volatile = kEccCorrectedVolatileWarn;
    EXPECT_EQ(level_of(run(), "gpu0.ecc.errors"), Level::kWarn);
}

TEST_F(DoctorRules, RemappedRowsPendingWarnsAndFailureFails) {
    gpu().remapped_rows = RemappedRows{0, 1, true, false};
    EXPECT_EQ(level_of(run(), "gpu0.remapped_rows"), Level::kWarn);
    gpu().remapped_rows = RemappedRows{0, 1, false, true};
    EXPECT_EQ(level_of(run(), "gpu0.remapped_rows"), Level::kFail);
    gpu().remapped_rows = RemappedRows{2, 1, false, false};
    EXPECT_EQ(level_of(run(), "gpu0.remapped_rows"), Level::kPass);
}

TEST_F(DoctorRules, RetiredPagesPendingWarnsOnOlderParts) {
    gpu().remapped_rows.reset();
    gpu().retired_pages_pending = true;
    EXPECT_EQ(level_of(run(), "gpu0.retired_pages"), Level::kWarn);
    gpu().retired_pages_pending = false;
    EXPECT_EQ(level_of(run(), "gpu0.retired_pages"), Level::kPass);
}

TEST_F(DoctorRules, PowerLimitBelowDefaultWarns) {
    gpu().power_limit_mw = 500000;
    const Report r = run();
    EXPECT_EQ(level_of(r, "gpu0.power"), Level::kWarn);
    EXPECT_NE(r.find("gpu0.power")->action.find("-pl 700"), std::string::npos);
}

TEST_F(DoctorRules, TemperatureThresholds) {
    const unsigned slowdown = *gpu().temperature_slowdown_c;  // 87
    gpu().temperature_c = slowdown - kTempWarnMarginC - 1;
    EXPECT_EQ(level_of(run(), "gpu0.temperature"), Level::kPass);
    gpu().temperature_c = slowdown - kTempWarnMarginC;
    EXPECT_EQ(level_of(run(), "gpu0.temperature"), Level::kWarn);
    gpu().temperature_c = slowdown - 1;
    EXPECT_EQ(level_of(run(), "gpu0.temperature"), Level::kWarn);
    gpu().temperature_c = slowdown;
    EXPECT_EQ(level_of(run(), "gpu0.temperature"), Level::kFail);
}

TEST_F(DoctorRules, TemperatureNearShutdownFailsWithoutASlowdownThreshold) {
    gpu().temperature_slowdown_c.reset();
    const unsigned shutdown = *gpu().temperature_shutdown_c;
    gpu().temperature_c = shutdown - kTempShutdownMarginC - 1;
    EXPECT_EQ(level_of(run(), "gpu0.temperature"), Level::kPass);
    gpu().temperature_c = shutdown - kTempShutdownMarginC;
    EXPECT_EQ(level_of(run(), "gpu0.temperature"), Level::kFail);
}

TEST_F(DoctorRules, ThrottleReasons) {
    struct Case {
        uint64_t bits;
        Level expect;
    };
    const Case cases[] = {
        {0, Level::kPass},
        {clock_reason::kGpuIdle, Level::kPass},
        {clock_reason::kGpuIdle | clock_reason::kSwPowerCap, Level::kInfo},
        {clock_reason::kSwPowerCap, Level::kWarn},
        {clock_reason::kApplicationsClocksSetting, Level::kInfo},
        {clock_reason::kSwThermalSlowdown, Level::kWarn},
        {clock_reason::kHwSlowdown, Level::kFail},
        {clock_reason::kHwThermalSlowdown, Level::kFail},
        {clock_reason::kHwPowerBrakeSlowdown, Level::kFail},
        {clock_reason::kSwPowerCap | clock_reason::kHwThermalSlowdown, Level::kFail},
    };
    for (const auto& c : cases) {
        gpu().clock_event_reasons = c.bits;
        EXPECT_EQ(level_of(run(), "gpu0.clocks.events"), c.expect) << "bits " << c.bits;
    }
}

}  // namespace
}  // namespace pagoda::doctor
