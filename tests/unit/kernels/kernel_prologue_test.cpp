// Every CUDA kernel is launched with programmatic dependent launch on Hopper (kernels/cuda/common.cuh): one that does
// not begin with PAGODA_KERNEL_PROLOGUE could read its input before the kernel that writes it has finished, a race
// that shows only now and then. This reads the kernel sources (it needs no GPU, so it runs in every build) and checks
// that each __global__ function's body reaches the prologue before any statement that touches memory, and that no
// kernel is launched with <<<>>> (which would skip the attribute and read as if the rule did not apply).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::vector<fs::path> kernel_sources() {
    std::vector<fs::path> out;
    for (const auto& e : fs::recursive_directory_iterator(fs::path(PAGODA_SOURCE_DIR) / "src/kernels/cuda"))
        if (e.path().extension() == ".cu" || e.path().extension() == ".cuh") out.push_back(e.path());
    return out;
}

// The statements a kernel may run before the prologue: declarations of values computed from its arguments and
// built-in indices (and of uninitialised locals and shared arrays), type aliases, prefetches (prefetch_*) of weights
// and adapters (which no kernel writes), and early loads (early_*, under a flag), which read only what no kernel of
// the step writes or what kernels two launches back wrote (common.cuh). Anything else that stores, loads through a
// pointer it was handed, synchronises or returns must come after. A kernel named early_* reaches the prologue in the
// device function it calls, after such loads.
bool allowed_before_prologue(const std::string& line) {
    static const std::regex ok(
        R"(^\s*(//.*|constexpr .*|using \w+ = .*;|const (int|int64_t|bool|W\*) .*|(?!return\b)\w+ \w+(\[\w+\])?;|)"
        R"(__shared__ \w+ \w+(\[\w+\])+;|)"
        R"(if constexpr \(Glu\) prefetch_first_loads.*|prefetch_\w+[<(].*|if \((early|hold)\) early_\w+[<(].*)$)");
    return line.find_first_not_of(" \t") == std::string::npos || std::regex_match(line, ok);
}

TEST(KernelPrologue, EveryKernelBeginsWithIt) {
    int kernels = 0;
    for (const fs::path& p : kernel_sources()) {
        const std::string src = read(p);
        for (size_t at = src.find("__global__"); at != std::string::npos; at = src.find("__global__", at + 1)) {
            const size_t line_start = src.rfind('\n', at) + 1;
            if (src.substr(line_start, at - line_start).find("//") != std::string::npos) continue;
            const size_t body = src.find('{', at);
            ASSERT_NE(body, std::string::npos) << p;
            if (std::regex_search(src.substr(at, body - at), std::regex(R"(\)\s*early_\w+\()"))) continue;
            const size_t prologue = src.find("PAGODA_KERNEL_PROLOGUE();", body);
            ASSERT_NE(prologue, std::string::npos) << p << ": a kernel without the prologue";
            std::istringstream before(src.substr(body + 1, prologue - body - 1));
            for (std::string line; std::getline(before, line);)
                EXPECT_TRUE(allowed_before_prologue(line))
                    << p.filename() << ": kernel at offset " << at << " runs `" << line << "` before its prologue";
            ++kernels;
        }
    }
    EXPECT_GE(kernels, 30) << "the kernel sources were not found under " << PAGODA_SOURCE_DIR;
}

TEST(KernelPrologue, NoKernelIsLaunchedWithTripleChevrons) {
    for (const fs::path& p : kernel_sources()) {
        std::istringstream src(read(p));
        int n = 0;
        for (std::string line; std::getline(src, line);) {
            ++n;
            const size_t at = line.find("<<<");
            if (at == std::string::npos || line.find("//") < at) continue;
            ADD_FAILURE() << p.filename() << ":" << n << " launches with <<<>>>; use launch_kernel (common.cuh)";
        }
    }
}

}  // namespace
