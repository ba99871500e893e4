// The real NVML loader and the whole doctor on this machine. CI and development machines have no
// NVIDIA driver: the loader must say "no NVIDIA driver" and the doctor must FAIL cleanly with the
// CPU path named. On a machine with a driver these tests skip (the GPU run is recorded in
// docs/operations.md instead).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "tools/doctor/doctor.h"
#include "tools/doctor/nvml_source.h"

namespace pagoda::doctor {
namespace {

bool driver_library_present() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return false;
    dlclose(lib);
    return true;
}

TEST(DoctorNvmlLoader, MissingLibraryReportsNoDriver) {
    auto nvml = load_nvml("/nonexistent/libnvidia-ml.so.1");
    ASSERT_FALSE(nvml.ok());
    EXPECT_EQ(nvml.message().rfind("no NVIDIA driver", 0), 0u) << nvml.message();
}

TEST(DoctorNvmlLoader, LibraryWithoutNvmlSymbolsIsRejected) {
    // libc is a real shared object without nvmlInit_v2.
    auto nvml = load_nvml("libc.so.6");
    ASSERT_FALSE(nvml.ok());
    EXPECT_NE(nvml.message().find("nvmlInit_v2"), std::string::npos) << nvml.message();
}

TEST(DoctorNvmlLoader, ThisMachineWithoutDriver) {
    if (driver_library_present()) GTEST_SKIP() << "libnvidia-ml.so.1 is present: this machine has a driver";
    auto nvml = load_nvml();
    ASSERT_FALSE(nvml.ok());
    EXPECT_EQ(nvml.message().rfind("no NVIDIA driver", 0), 0u) << nvml.message();
}

TEST(DoctorRun, RunsCleanlyWithoutDriver) {
    if (driver_library_present()) GTEST_SKIP() << "libnvidia-ml.so.1 is present: this machine has a driver";
    DoctorOptions options;  // not quick: the measurements must be skipped for lack of a driver
    const Report r = run_doctor(options);
    ASSERT_NE(r.find("driver"), nullptr);
    EXPECT_EQ(r.find("driver")->level, Level::kFail);
    ASSERT_NE(r.find("gpu.serving"), nullptr);
    EXPECT_NE(r.find("gpu.serving")->action.find("--device cpu"), std::string::npos);
    EXPECT_TRUE(r.has_fail());
}

}  // namespace
}  // namespace pagoda::doctor
