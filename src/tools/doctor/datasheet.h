// Datasheet figures of common NVIDIA parts, to express measured numbers as a percentage of what
// the part is sold as. Dense (no sparsity) bf16 tensor throughput with fp32 accumulation.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pagoda::doctor {

struct PartSpec {
    std::string_view pattern;    // matched as a whole token in the NVML name ("H200", "A100-SXM4-80GB")
    std::string_view part;       // human name
    double memory_gbps;          // device memory bandwidth, GB/s (10^9 B/s)
    double bf16_dense_tflops;    // dense bf16 tensor TFLOP/s
    double nvlink_gbps_per_dir;  // NVLink bandwidth per GPU per direction (0: none)
};

// The first table entry whose pattern occurs in `nvml_name` as a whole token; nullopt when the
// part is not in the table (the doctor then reports raw numbers only).
std::optional<PartSpec> find_part(std::string_view nvml_name);

// Theoretical one-direction bandwidth of a PCIe link after line encoding, GB/s; 0 if unknown.
double pcie_link_gbps(unsigned generation, unsigned width);

}  // namespace pagoda::doctor
