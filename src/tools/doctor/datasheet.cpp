// Figures from NVIDIA's product datasheets (memory bandwidth; dense bf16 Tensor Core TFLOPS, i.e.
// half the "with sparsity" figure; NVLink per-GPU bandwidth halved to one direction).
#include "tools/doctor/datasheet.h"

#include <array>
#include <cctype>

namespace pagoda::doctor {
namespace {

// More specific names first: "H200 NVL" before "H200", "A100-SXM4-80GB" before "A100".
constexpr std::array<PartSpec, 17> kParts = {{
    {"B200", "B200", 8000, 2250, 900},
    {"GH200", "GH200 (H100 96 GB HBM3)", 4000, 989, 450},
    {"H200 NVL", "H200 NVL", 4800, 835, 450},
    {"H200", "H200 SXM", 4800, 989, 450},
    {"H100 NVL", "H100 NVL", 3900, 835, 300},
    {"H100 PCIe", "H100 PCIe", 2000, 756, 300},
    {"H100", "H100 SXM", 3350, 989, 450},
    {"A100-SXM4-80GB", "A100 SXM 80 GB", 2039, 312, 300},
    {"A100 80GB PCIe", "A100 PCIe 80 GB", 1935, 312, 300},
    {"A100-SXM4-40GB", "A100 SXM 40 GB", 1555, 312, 300},
    {"A100-PCIE-40GB", "A100 PCIe 40 GB", 1555, 312, 300},
    {"A100", "A100 40 GB", 1555, 312, 300},
    {"L40S", "L40S", 864, 362, 0},
    {"L40", "L40", 864, 181, 0},
    {"L4", "L4", 300, 121, 0},
    {"A10", "A10", 600, 125, 0},
    {"RTX 4090", "GeForce RTX 4090", 1008, 165, 0},
}};

bool is_word_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0;
}

bool contains_token(std::string_view haystack, std::string_view needle) {
    for (size_t pos = haystack.find(needle); pos != std::string_view::npos; pos = haystack.find(needle, pos + 1)) {
        const bool left_ok = pos == 0 || !is_word_char(haystack[pos - 1]);
        const size_t end = pos + needle.size();
        const bool right_ok = end == haystack.size() || !is_word_char(haystack[end]);
        if (left_ok && right_ok) return true;
    }
    return false;
}

}  // namespace

std::optional<PartSpec> find_part(std::string_view nvml_name) {
    for (const auto& p : kParts)
        if (contains_token(nvml_name, p.pattern)) return p;
    return std::nullopt;
}

double pcie_link_gbps(unsigned generation, unsigned width) {
    // Per lane, one direction: transfer rate × encoding efficiency / 8 bits.
    double per_lane = 0;
    switch (generation) {
        case 1:
            per_lane = 2.5 * 8 / 10 / 8;
            break;
        case 2:
            per_lane = 5.0 * 8 / 10 / 8;
            break;
        case 3:
            per_lane = 8.0 * 128 / 130 / 8;
            break;
        case 4:
            per_lane = 16.0 * 128 / 130 / 8;
            break;
        case 5:
            per_lane = 32.0 * 128 / 130 / 8;
            break;
        case 6:
            per_lane = 64.0 * 242 / 256 / 8;
            break;  // FLIT mode
        default:
            return 0;
    }
    return per_lane * width;
}

}  // namespace pagoda::doctor
