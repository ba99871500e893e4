// /proc and /sys parsing over a temporary tree laid out as the kernel does.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "fake_nvml.h"
#include "tools/doctor/host_info.h"

namespace pagoda::doctor {
namespace {

namespace fs = std::filesystem;

class DoctorHostTree : public ::testing::Test {
  protected:
    void SetUp() override {
        root = fs::temp_directory_path() /
               ("doctor-host-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(root);
        fs::create_directories(root);
    }
    void TearDown() override { fs::remove_all(root); }
    void write(const std::string& rel, const std::string& text) {
        fs::path p = root / rel;
        fs::create_directories(p.parent_path());
        std::ofstream(p) << text;
    }
    fs::path root;
};

TEST_F(DoctorHostTree, ModulesAndNumaNodes) {
    write("proc/modules",
          "nvidia_uvm 1531904 0 - Live 0x0000000000000000 (POE)\n"
          "nvidia 54288384 2 nvidia_uvm, Live 0x0000000000000000 (POE)\n");
    fs::create_directories(root / "sys/devices/system/node/node0");
    fs::create_directories(root / "sys/devices/system/node/node1");
    fs::create_directories(root / "sys/devices/system/node/power");
    write("proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04\nGCC version\n");
    const HostInfo h = read_host_info(root.string());
    EXPECT_EQ(h.nouveau_loaded, false);
    EXPECT_EQ(h.nvidia_loaded, true);  // nvidia_uvm alone would not count
    EXPECT_EQ(h.numa_nodes, 2);
    EXPECT_EQ(h.kernel_driver_line, "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04");
}

TEST_F(DoctorHostTree, NouveauLoadedFails) {
    write("proc/modules", "nouveau 2281472 0 - Live 0x0000000000000000\n");
    testing::FakeNvml nvml;
    nvml.gpus.push_back(testing::healthy_h100(0));
    const Report r = testing::evaluate_fake(nvml, testing::cuda_13_probe(1), nullptr, true, root.string());
    EXPECT_EQ(testing::level_of(r, "driver.nouveau"), Level::kFail);
}

TEST_F(DoctorHostTree, UnreadableModulesIsInfo) {
    testing::FakeNvml nvml;
    nvml.gpus.push_back(testing::healthy_h100(0));
    const Report r = testing::evaluate_fake(nvml, testing::cuda_13_probe(1), nullptr, true, root.string());
    EXPECT_EQ(testing::level_of(r, "driver.nouveau"), Level::kInfo);
    EXPECT_EQ(testing::level_of(r, "gpu0.numa"), Level::kInfo);
}

TEST_F(DoctorHostTree, GpuNumaAffinity) {
    testing::FakeNvml nvml;
    nvml.gpus.push_back(testing::healthy_h100(0));  // bus 00000000:18:00.0
    fs::create_directories(root / "sys/devices/system/node/node0");
    fs::create_directories(root / "sys/devices/system/node/node1");
    write("sys/bus/pci/devices/0000:18:00.0/numa_node", "1\n");
    write("sys/bus/pci/devices/0000:18:00.0/local_cpulist", "16-31,48-63\n");
    Report r = testing::evaluate_fake(nvml, testing::cuda_13_probe(1), nullptr, true, root.string());
    EXPECT_EQ(testing::level_of(r, "gpu0.numa"), Level::kPass);
    EXPECT_EQ(r.find("gpu0.numa")->value, "NUMA node 1, CPUs 16-31,48-63");
    write("sys/bus/pci/devices/0000:18:00.0/numa_node", "-1\n");
    r = testing::evaluate_fake(nvml, testing::cuda_13_probe(1), nullptr, true, root.string());
    EXPECT_EQ(testing::level_of(r, "gpu0.numa"), Level::kWarn);
}

TEST(DoctorSysfsBusId, ConvertsNvmlForm) {
    EXPECT_EQ(sysfs_bus_id("00000000:1B:00.0"), "0000:1b:00.0");
    EXPECT_EQ(sysfs_bus_id("0000:1b:00.0"), "0000:1b:00.0");
}

}  // namespace
}  // namespace pagoda::doctor
