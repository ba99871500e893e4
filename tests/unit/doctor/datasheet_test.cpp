// Part lookup by NVML name (names as NVML reports them) and PCIe link arithmetic (PCIe spec rates
// and encodings).
#include <gtest/gtest.h>

#include "tools/doctor/datasheet.h"

namespace pagoda::doctor {
namespace {

std::string part_of(std::string_view name) {
    auto p = find_part(name);
    return p ? std::string(p->part) : "none";
}

TEST(DoctorDatasheet, MatchesWholeTokensMostSpecificFirst) {
    EXPECT_EQ(part_of("NVIDIA H200"), "H200 SXM");
    EXPECT_EQ(part_of("NVIDIA H200 NVL"), "H200 NVL");
    EXPECT_EQ(part_of("NVIDIA GH200 480GB"), "GH200 (H100 96 GB HBM3)");
    EXPECT_EQ(part_of("NVIDIA H100 80GB HBM3"), "H100 SXM");
    EXPECT_EQ(part_of("NVIDIA H100 PCIe"), "H100 PCIe");
    EXPECT_EQ(part_of("NVIDIA H100 NVL"), "H100 NVL");
    EXPECT_EQ(part_of("NVIDIA A100-SXM4-80GB"), "A100 SXM 80 GB");
    EXPECT_EQ(part_of("NVIDIA A100-SXM4-40GB"), "A100 SXM 40 GB");
    EXPECT_EQ(part_of("NVIDIA A100 80GB PCIe"), "A100 PCIe 80 GB");
    EXPECT_EQ(part_of("NVIDIA L40S"), "L40S");
    EXPECT_EQ(part_of("NVIDIA L40"), "L40");
    EXPECT_EQ(part_of("NVIDIA L4"), "L4");
    EXPECT_EQ(part_of("NVIDIA A10"), "A10");
    EXPECT_EQ(part_of("NVIDIA GeForce RTX 4090"), "GeForce RTX 4090");
    EXPECT_EQ(part_of("NVIDIA GeForce RTX 3090"), "none");
}

TEST(DoctorDatasheet, H200Figures) {
    auto p = find_part("NVIDIA H200");
    ASSERT_TRUE(p);
    EXPECT_DOUBLE_EQ(p->memory_gbps, 4800);
    EXPECT_DOUBLE_EQ(p->bf16_dense_tflops, 989);
}

TEST(DoctorDatasheet, PcieLinkRates) {
    EXPECT_NEAR(pcie_link_gbps(3, 16), 15.75, 0.01);  // 8 GT/s, 128b/130b
    EXPECT_NEAR(pcie_link_gbps(4, 16), 31.51, 0.01);
    EXPECT_NEAR(pcie_link_gbps(5, 16), 63.02, 0.01);
    EXPECT_NEAR(pcie_link_gbps(1, 1), 0.25, 1e-9);  // 2.5 GT/s, 8b/10b
    EXPECT_EQ(pcie_link_gbps(9, 16), 0);
}

}  // namespace
}  // namespace pagoda::doctor
