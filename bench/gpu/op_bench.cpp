// pagoda_op_bench: the op harness's perf mode. Times the cases of tests/unit/ops (the correctness table, real
// Qwen3-8B shapes: decode at batch 1 and 256, prefill of 2,048, and Qwen3-30B-A3B's MoE layers) on the GPU with CUDA
// events, back to back behind a host hold so launch gaps do not count, and prints per case µs and GB/s
// (bandwidth-bound ops, with the share of this run's own copy bandwidth) or TFLOP/s (GEMMs and prefill attention:
// more than 64 FLOP per byte).
//   pagoda_op_bench [--table qwen3-8b|qwen3-30b-a3b|ops|all] [--filter SUBSTRING] [--cold]
// Calls repeat on the same tensors, so a case whose bytes fit the GPU's L2 (50 MB on an H100) reads them partly from
// L2: its GB/s can exceed the memory's, as in a model's step they cannot. --cold gives each case that builds no step
// batch enough copies of its tensors (2x the L2, at most 32) to call them in turn, each call's bytes from memory.
// PAGODA_DECODE_ATTENTION=WxS picks another block shape of the decode attention kernel (decode_attention.cu), and
// PAGODA_PREFILL_ATTENTION=mma the mma.sync prefill attention kernel instead of Hopper's (prefill_attention_wgmma.cu):
// each is read once a process, so two runs, with and without it, are the A/B (run_cuda_bench.sh's ops-ab part).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "ops/op_harness.h"
#include "runtime/cuda_backend.h"

namespace {

using namespace pagoda;
using namespace pagoda::op_harness;

struct Timing {
    double us = 0;
    const char* how = "events";
};

// Mean µs of one call: CUDA events around `reps` calls queued behind a host hold; ops that wait for the host
// themselves (argmax reads its result back) are timed by the wall clock instead.
Timing time_call(Backend& backend, const std::function<void()>& op) {
    op();  // warm-up (cuBLASLt picks its algorithm, scratch grows)
    backend.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    op();
    backend.synchronize();
    const double once = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    const int reps = std::max(3, std::min(200, static_cast<int>(20000.0 / std::max(once, 1.0))));
    auto queued = cuda_time_queued(
        backend,
        [&] {
            for (int i = 0; i < reps; ++i)
                op();
        },
        100);
    if (queued.ok()) return {queued->gpu_ms * 1e3 / reps, "events"};
    const auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i)
        op();
    backend.synchronize();
    return {std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t1).count() / reps, "wall"};
}

}  // namespace

int main(int argc, char** argv) {
    std::string table = "all", filter;
    bool cold = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--table" && i + 1 < argc) {
            table = argv[++i];
        } else if (a == "--filter" && i + 1 < argc) {
            filter = argv[++i];
        } else if (a == "--cold") {
            cold = true;
        } else {
            std::fprintf(stderr,
                         "usage: pagoda_op_bench [--table qwen3-8b|qwen3-30b-a3b|ops|all] [--filter SUBSTRING] "
                         "[--cold]\n");
            return 1;
        }
    }
    auto made = make_cuda_backend();
    if (!made.ok()) {
        std::fprintf(stderr, "pagoda_op_bench: %s\n", made.message().c_str());
        return 1;
    }
    Backend& gpu = **made;

    // This run's bandwidth ceiling: a 1 GiB F32 device-to-device copy (read + write).
    double copy_gbps = 0;
    {
        CaseRun r(gpu, Layout::Contiguous, 1);
        const Tensor src = r.act(Shape{16384, 16384}), dst = r.act(Shape{16384, 16384});
        const Timing t = time_call(gpu, [&] { gpu.ops().copy(dst, src); });
        copy_gbps = 2.0 * static_cast<double>(src.nbytes()) / (t.us * 1e3);
    }
    int device = 0, l2_bytes = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device);
    std::printf("%s, copy ceiling %.0f GB/s, L2 %d MB%s\n", gpu.name().c_str(), copy_gbps, l2_bytes >> 20,
                cold ? ", --cold: tensors copied past 2x the L2, called in turn" : "");
    std::printf("%-72s %10s %9s %7s %9s\n", "case", "us", "GB/s", "%copy", "TFLOP/s");

    std::vector<const std::vector<OpCase>*> tables;
    if (table == "qwen3-8b" || table == "all") tables.push_back(&qwen3_8b_cases());
    if (table == "qwen3-30b-a3b" || table == "all") tables.push_back(&qwen3_30b_a3b_cases());
    if (table == "ops" || table == "all") tables.push_back(&op_cases());
    for (const auto* cases : tables) {
        for (const OpCase& c : *cases) {
            if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
            if (!gpu.ops().supports(c.op)) {
                std::printf("%-72s skipped: %s not on CUDA yet\n", c.name.c_str(), c.op.c_str());
                continue;
            }
            CaseRun r(gpu, Layout::Contiguous, 1);
            const std::function<void()> op = c.build(r);
            // As the model runs them: the batch's arrays uploaded once per step, the op reading the uploaded copies.
            // --cold: more instances of the case, called in turn (a step batch's cases stay on one instance: the
            // step's arrays are uploaded once for it).
            std::vector<std::unique_ptr<CaseRun>> copies;
            std::vector<std::function<void()>> calls{op};
            if (cold && !r.step_batch() && r.bytes() > 0) {
                const auto want = static_cast<int>(std::min(32.0, std::ceil(2.0 * l2_bytes / r.bytes())));
                for (int i = 1; i < want; ++i) {
                    copies.push_back(std::make_unique<CaseRun>(gpu, Layout::Contiguous, 1));
                    calls.push_back(c.build(*copies.back()));
                }
            }
            size_t next = 0;
            const std::function<void()> in_turn = [&] {
                calls[next]();
                next = (next + 1) % calls.size();
            };
            if (r.step_batch()) gpu.ops().begin_step(*r.step_batch());
            const Timing t = time_call(gpu, in_turn);
            if (r.step_batch()) gpu.ops().end_step();
            const double gbps = r.bytes() / (t.us * 1e3), tflops = r.flops() / (t.us * 1e6);
            const bool compute_bound = r.flops() > 64.0 * r.bytes();
            if (compute_bound)
                std::printf("%-72s %10.2f %9s %7s %9.1f%s\n", c.name.c_str(), t.us, "", "", tflops,
                            t.how[0] == 'w' ? " (wall)" : "");
            else
                std::printf("%-72s %10.2f %9.0f %6.0f%% %9s%s\n", c.name.c_str(), t.us, gbps, 100.0 * gbps / copy_gbps,
                            r.flops() > 0 ? std::to_string(tflops).substr(0, 5).c_str() : "",
                            t.how[0] == 'w' ? " (wall)" : "");
            std::fflush(stdout);
        }
    }
    return 0;
}
