// `pagoda doctor`: the read-only GPU server preflight (driver, GPUs, PCIe, NVLink, topology, memory
// health, power and thermals, measured bandwidth and GEMM rate). Exit 0 without FAIL, 1 with.
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>

#include "cli/args.h"
#include "cli/command.h"
#include "tools/doctor/doctor.h"

namespace {

int run_doctor_command(std::span<const std::string_view> args) {
    pagoda::cli::ArgParser parser(
        "pagoda doctor [--quick] [--json] [--model DIR [--max-model-len N] [--max-num-seqs M]]",
        "Checks this machine for GPU serving: NVIDIA driver and CUDA version, every GPU (memory, compute capability,\n"
        "persistence, MIG, BAR1), PCIe and NVLink links, topology and NUMA affinity, ECC and remapped rows, power,\n"
        "temperatures and throttling; then measures memory bandwidth, bf16 GEMM and host<->device copies.\n"
        "Never changes a setting. Exit status 0 when no check FAILs, 1 otherwise.");
    parser.add_switch("quick", "skip the micro-benchmarks (a few seconds of GPU time)");
    parser.add_switch("json", "print one JSON object instead of the table");
    parser.add_switch("loopback",
                      "with one GPU, still run the peer-to-peer and NCCL code paths (self-copy, 1-rank communicator)");
    parser.add_option("model", "DIR", "will this model fit? weights, KV cache per token, largest batch, smallest TP");
    parser.add_option("max-model-len", "N", "with --model: context length to plan for (default: the model's)");
    parser.add_option("max-num-seqs", "M", "with --model: check that M full-length sequences fit at once");
    parser.add_option("gpu-memory-gib", "G", "with --model: plan for GPUs of G GiB instead of this machine's");
    if (auto exit = pagoda::cli::parse_or_exit(parser, "doctor", args)) return *exit;

    pagoda::doctor::DoctorOptions options;
    options.quick = parser.has("quick");
    options.loopback = parser.has("loopback");
    if (auto dir = parser.get("model")) options.model_dir = *dir;
    for (const char* flag : {"max-model-len", "max-num-seqs"}) {
        auto text = parser.get(flag);
        if (!text) continue;
        int64_t value = 0;
        auto [ptr, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
        if (ec != std::errc() || ptr != text->data() + text->size() || value <= 0)
            return pagoda::cli::fail("doctor",
                                     std::string("--") + flag + " needs a positive integer, got '" + *text + "'");
        (std::string_view(flag) == "max-model-len" ? options.max_model_len : options.max_num_seqs) = value;
    }
    if (auto text = parser.get("gpu-memory-gib")) {
        char* end = nullptr;
        options.gpu_memory_gib = std::strtod(text->c_str(), &end);
        if (end == text->c_str() || *end != '\0' || options.gpu_memory_gib <= 0)
            return pagoda::cli::fail("doctor", "--gpu-memory-gib needs a positive number, got '" + *text + "'");
    }
    if (options.model_dir.empty() && (options.max_model_len || options.max_num_seqs || options.gpu_memory_gib > 0))
        return pagoda::cli::fail("doctor", "--max-model-len, --max-num-seqs and --gpu-memory-gib need --model DIR");
    const pagoda::doctor::Report report = pagoda::doctor::run_doctor(options);
    if (parser.has("json")) {
        std::printf("%s\n", pagoda::doctor::render_json(report).c_str());
    } else {
        std::fputs(pagoda::doctor::render_table(report).c_str(), stdout);
    }
    return report.has_fail() ? 1 : 0;
}

}  // namespace

PAGODA_COMMAND("doctor", "check this machine for GPU serving (read-only) and measure it", run_doctor_command);
