// Measured numbers are compared with the part's datasheet figure (datasheet.cpp) as a fraction;
// the thresholds in rules.h decide PASS or WARN. Inputs are hand-made Measurements.
#include <gtest/gtest.h>

#include "fake_nvml.h"
#include "tools/doctor/datasheet.h"

namespace pagoda::doctor {
namespace {

using testing::cuda_13_probe;
using testing::evaluate_fake;
using testing::FakeNvml;
using testing::healthy_h100;
using testing::level_of;

GpuMeasurement measured_gpu(const GpuInfo& g, double copy, double gemm, double h2d, double d2h) {
    GpuMeasurement m;
    m.cuda_index = static_cast<int>(g.index);
    m.bus_id = sysfs_bus_id(g.bus_id);
    m.name = g.name;
    m.copy_gbps.value = copy;
    m.gemm_tflops.value = gemm;
    m.h2d_gbps.value = h2d;
    m.d2h_gbps.value = d2h;
    return m;
}

class DoctorMeasured : public ::testing::Test {
  protected:
    void SetUp() override {
        nvml.gpus.push_back(healthy_h100(0));
        part = *find_part(nvml.gpus[0].name);
        link = pcie_link_gbps(5, 16);
        ms.ran = true;
    }
    Report run() { return evaluate_fake(nvml, cuda_13_probe(static_cast<int>(nvml.gpus.size())), &ms, false); }
    FakeNvml nvml;
    Measurements ms;
    PartSpec part{};
    double link = 0;
};

TEST_F(DoctorMeasured, ThresholdsAgainstTheDatasheet) {
    const double bw_edge = kMemoryBwWarnFraction * part.memory_gbps;
    const double gemm_edge = kGemmWarnFraction * part.bf16_dense_tflops;
    const double pcie_edge = kPcieCopyWarnFraction * link;
    ms.gpus = {measured_gpu(nvml.gpus[0], bw_edge, gemm_edge, pcie_edge, pcie_edge)};
    Report r = run();
    EXPECT_EQ(level_of(r, "gpu0.measured.memory_bw"), Level::kPass);
    EXPECT_EQ(level_of(r, "gpu0.measured.gemm_bf16"), Level::kPass);
    EXPECT_EQ(level_of(r, "gpu0.measured.h2d_pinned"), Level::kPass);
    EXPECT_EQ(level_of(r, "gpu0.measured.d2h_pinned"), Level::kPass);
    EXPECT_NE(r.find("gpu0.measured.memory_bw")->value.find("70% of H100 SXM"), std::string::npos);
    ms.gpus = {measured_gpu(nvml.gpus[0], bw_edge * 0.99, gemm_edge * 0.99, pcie_edge * 0.99, pcie_edge * 0.99)};
    r = run();
    EXPECT_EQ(level_of(r, "gpu0.measured.memory_bw"), Level::kWarn);
    EXPECT_EQ(level_of(r, "gpu0.measured.gemm_bf16"), Level::kWarn);
    EXPECT_EQ(level_of(r, "gpu0.measured.h2d_pinned"), Level::kWarn);
    EXPECT_EQ(level_of(r, "gpu0.measured.d2h_pinned"), Level::kWarn);
    EXPECT_EQ(level_of(r, "measured.p2p"), Level::kInfo);  // one GPU: not run, said so
    EXPECT_EQ(level_of(r, "measured.nccl_allreduce"), Level::kInfo);
}

TEST_F(DoctorMeasured, UnknownPartReportsRawNumbers) {
    nvml.gpus[0].name = "NVIDIA Imaginary X1";
    ms.gpus = {measured_gpu(nvml.gpus[0], 1000, 100, 20, 20)};
    const Report r = run();
    EXPECT_EQ(level_of(r, "gpu0.measured.memory_bw"), Level::kInfo);
    EXPECT_NE(r.find("gpu0.measured.memory_bw")->value.find("no datasheet figure"), std::string::npos);
}

TEST_F(DoctorMeasured, FailedMeasurementWarnsWithItsReason) {
    GpuMeasurement m = measured_gpu(nvml.gpus[0], 3000, 800, 50, 50);
    m.gemm_tflops.value.reset();
    m.gemm_tflops.note = "cublasLtMatmul: CUBLAS_STATUS_EXECUTION_FAILED";
    ms.gpus = {m};
    const Report r = run();
    EXPECT_EQ(level_of(r, "gpu0.measured.gemm_bf16"), Level::kWarn);
    EXPECT_NE(r.find("gpu0.measured.gemm_bf16")->value.find("EXECUTION_FAILED"), std::string::npos);
}

TEST_F(DoctorMeasured, QuickAndNotRun) {
    Report r = evaluate_fake(nvml, cuda_13_probe(1), nullptr, true);
    EXPECT_EQ(r.find("measured")->value, "skipped (--quick)");
    Measurements none;
    none.not_run = "this pagoda was built without CUDA (PAGODA_CUDA=OFF)";
    r = evaluate_fake(nvml, CudaProbe{}, &none, false);
    EXPECT_EQ(level_of(r, "measured"), Level::kInfo);
    EXPECT_NE(r.find("measured")->value.find("without CUDA"), std::string::npos);
}

TEST_F(DoctorMeasured, LoopbackOnOneGpuIsInfo) {
    ms.gpus = {measured_gpu(nvml.gpus[0], 3000, 800, 50, 50)};
    PairMeasurement self;
    self.gbps.value = 1500;
    ms.p2p = {self};
    ms.nccl_ranks = 1;
    ms.nccl_busbw_gbps.value = 0;
    const Report r = run();
    EXPECT_EQ(level_of(r, "measured.p2p.gpu0-gpu0"), Level::kInfo);
    EXPECT_EQ(level_of(r, "measured.nccl_allreduce"), Level::kInfo);
}

TEST_F(DoctorMeasured, PeerAndAllReduceAgainstNvLink) {
    nvml.gpus.push_back(healthy_h100(1));
    for (auto& g : nvml.gpus)
        testing::add_switch_links(g);
    nvml.p2p[{0, 1}] = true;
    ms.gpus = {measured_gpu(nvml.gpus[0], 3000, 800, 50, 50), measured_gpu(nvml.gpus[1], 3000, 800, 50, 50)};
    PairMeasurement fast, slow;
    fast.cuda_a = 0;
    fast.cuda_b = 1;
    fast.gbps.value = kPeerWarnFraction * part.nvlink_gbps_per_dir;
    slow.cuda_a = 1;
    slow.cuda_b = 0;
    slow.gbps.value = 0.99 * kPeerWarnFraction * part.nvlink_gbps_per_dir;
    ms.p2p = {fast, slow};
    ms.nccl_ranks = 2;
    ms.nccl_busbw_gbps.value = 0.8 * part.nvlink_gbps_per_dir;
    const Report r = run();
    EXPECT_EQ(level_of(r, "measured.p2p.gpu0-gpu1"), Level::kPass);
    EXPECT_EQ(level_of(r, "measured.p2p.gpu1-gpu0"), Level::kWarn);
    EXPECT_EQ(level_of(r, "measured.nccl_allreduce (2 GPUs, bus bandwidth)"), Level::kPass);
}

}  // namespace
}  // namespace pagoda::doctor
