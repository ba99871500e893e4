// `pagoda doctor` as a library call: load NVML, measure (unless quick), read the inventory, judge.
#pragma once

#include <cstdint>
#include <string>

#include "tools/doctor/report.h"

namespace pagoda::doctor {

struct DoctorOptions {
    bool quick = false;      // skip the micro-benchmarks
    bool loopback = false;   // exercise the P2P / NCCL code on a single GPU
    std::string root = "/";  // prefix of /proc and /sys (tests)
    std::string nvml_library = "libnvidia-ml.so.1";
    // --model DIR: will it fit? (empty: not asked)
    std::string model_dir;
    int64_t max_model_len = 0;  // 0: the model's own limit
    int64_t max_num_seqs = 0;   // 0: only report the largest batch
    double gpu_memory_gib = 0;  // plan for GPUs of this size instead of the machine's (0: the machine's)
};

Report run_doctor(const DoctorOptions& options);

}  // namespace pagoda::doctor
