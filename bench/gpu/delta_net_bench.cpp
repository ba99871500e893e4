// pagoda_delta_net_bench: the Gated DeltaNet delta-rule kernels alone at Qwen3.5-9B sizes (Hk 16, Hv 32, dk = dv =
// 128) on random data. Decode: state bytes read + written ÷ time, next to a device-to-device copy of the same bytes
// (the ceiling) measured in the same run; each call uses another layer's state (64 of them), so the 2 MiB per layer
// and sequence is not served from L2. Prefill: microseconds per call and per token. Calls are recorded in a CUDA graph
// and replayed, so launch gaps count as they would in a decode graph. Prefills run both forms: "recurrent" and
// "chunked" (the tensor-core kernels for every sequence, with their workspace) at 2,048 tokens of one sequence, 8 x
// 512, and the short lengths (16, 32, 64) where CudaOps' Auto threshold (kChunkedMinTokens) should sit. Prints one JSON
// line per case.
//   pagoda_delta_net_bench
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/cuda/delta_net/delta_net.h"

namespace {

using namespace pagoda::kernels::cuda;

#define BENCH_CUDA_CHECK(expr)                                                                           \
    do {                                                                                                 \
        const cudaError_t err_ = (expr);                                                                 \
        if (err_ != cudaSuccess) {                                                                       \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(err_)); \
            std::exit(1);                                                                                \
        }                                                                                                \
    } while (0)

constexpr int kHk = 16, kHv = 32, kD = 128, kLayers = 64;

template <class T>
T* device_random(size_t n, std::mt19937& rng, float lo, float hi) {
    std::vector<T> h(n);
    std::uniform_real_distribution<float> u(lo, hi);
    for (auto& x : h)
        x = static_cast<T>(u(rng));
    T* d = nullptr;
    BENCH_CUDA_CHECK(cudaMalloc(&d, n * sizeof(T)));
    BENCH_CUDA_CHECK(cudaMemcpy(d, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

// Mean milliseconds of one `calls`-long sequence of launches, recorded once as a graph and replayed.
template <class F>
double time_graph(cudaStream_t stream, int calls, F&& launch) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    BENCH_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < calls; ++i)
        launch(i);
    BENCH_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    BENCH_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    cudaEvent_t start, stop;
    BENCH_CUDA_CHECK(cudaEventCreate(&start));
    BENCH_CUDA_CHECK(cudaEventCreate(&stop));
    BENCH_CUDA_CHECK(cudaGraphLaunch(exec, stream));  // warm-up
    constexpr int kReps = 5;
    BENCH_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int r = 0; r < kReps; ++r)
        BENCH_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    BENCH_CUDA_CHECK(cudaEventRecord(stop, stream));
    BENCH_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    BENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    BENCH_CUDA_CHECK(cudaEventDestroy(start));
    BENCH_CUDA_CHECK(cudaEventDestroy(stop));
    BENCH_CUDA_CHECK(cudaGraphExecDestroy(exec));
    BENCH_CUDA_CHECK(cudaGraphDestroy(graph));
    return ms / kReps / calls;
}

// chunked: run the chunked kernels for every sequence (chunked_min_tokens 1) instead of the recurrent one.
void run_case(cudaStream_t stream, std::mt19937& rng, int seqs, int tokens_per_seq, bool chunked = false) {
    const int T = seqs * tokens_per_seq;
    const int64_t proj = 2 * kHk * kD + kHv * kD;  // q|k|v columns of the conv output
    const size_t state_per_layer = static_cast<size_t>(seqs) * kHv * kD * kD;
    float* x = device_random<float>(static_cast<size_t>(T) * proj, rng, -1.0f, 1.0f);
    float* g = device_random<float>(static_cast<size_t>(T) * kHv, rng, -1.0f, -0.01f);
    float* beta = device_random<float>(static_cast<size_t>(T) * kHv, rng, 0.1f, 0.9f);
    float* out = device_random<float>(static_cast<size_t>(T) * kHv * kD, rng, 0.0f, 0.0f);
    float* state = device_random<float>(state_per_layer * kLayers, rng, -0.1f, 0.1f);
    std::vector<int32_t> qsl{0}, lens, slots;
    for (int s = 0; s < seqs; ++s) {
        qsl.push_back(qsl.back() + tokens_per_seq);
        lens.push_back(tokens_per_seq + 100);  // cached context: the state is read
        slots.push_back(s);
    }
    int32_t* meta = nullptr;
    BENCH_CUDA_CHECK(cudaMalloc(&meta, sizeof(int32_t) * (3 * seqs + 1)));
    BENCH_CUDA_CHECK(cudaMemcpy(meta, qsl.data(), sizeof(int32_t) * (seqs + 1), cudaMemcpyHostToDevice));
    BENCH_CUDA_CHECK(cudaMemcpy(meta + seqs + 1, lens.data(), sizeof(int32_t) * seqs, cudaMemcpyHostToDevice));
    BENCH_CUDA_CHECK(cudaMemcpy(meta + 2 * seqs + 1, slots.data(), sizeof(int32_t) * seqs, cudaMemcpyHostToDevice));

    GatedDeltaRuleArgs a;
    a.q = {x, proj, kD}, a.k = {x + kHk * kD, proj, kD}, a.v = {x + 2 * kHk * kD, proj, kD};
    a.out = {out, kHv * kD, kD}, a.g = g, a.g_stride = kHv, a.beta = beta, a.beta_stride = kHv;
    a.Hk = kHk, a.Hv = kHv, a.dk = kD, a.dv = kD, a.q_scale = 1.0f / std::sqrt(static_cast<float>(kD));
    a.num_slots = seqs, a.seqs = {seqs, meta, meta + seqs + 1, meta + 2 * seqs + 1}, a.num_tokens = T;
    a.l2_norm_qk = true;
    a.chunked_min_tokens = chunked ? 1 : 0;
    void* workspace = nullptr;
    if (chunked) BENCH_CUDA_CHECK(cudaMalloc(&workspace, gated_delta_rule_chunked_workspace_bytes(T, kHv, kD, kD)));
    const int calls = tokens_per_seq == 1 ? kLayers : 4;
    const double ms = time_graph(stream, calls, [&](int i) {
        GatedDeltaRuleArgs c = a;
        c.state = state + state_per_layer * (i % kLayers);
        if (chunked)
            launch_gated_delta_rule_chunked(c, workspace, stream);
        else
            launch_gated_delta_rule(c, stream);
    });
    const double state_bytes = 2.0 * static_cast<double>(state_per_layer) * sizeof(float);
    // The ceiling: the same bytes moved by a device-to-device copy of one layer's state into another's.
    const double copy_ms = time_graph(stream, kLayers, [&](int i) {
        BENCH_CUDA_CHECK(cudaMemcpyAsync(state + state_per_layer * ((i + 1) % kLayers),
                                         state + state_per_layer * (i % kLayers), state_per_layer * sizeof(float),
                                         cudaMemcpyDeviceToDevice, stream));
    });
    std::printf(
        "{\"op\":\"gated_delta_rule\",\"form\":\"%s\",\"seqs\":%d,\"tokens_per_seq\":%d,\"us_per_call\":%.2f,\"us_per_"
        "token\":%.3f,"
        "\"state_GBps\":%.0f,\"copy_same_bytes_us\":%.2f,\"copy_GBps\":%.0f}\n",
        chunked ? "chunked" : "recurrent", seqs, tokens_per_seq, ms * 1e3, ms * 1e3 / tokens_per_seq,
        state_bytes / (ms * 1e-3) / 1e9, copy_ms * 1e3, state_bytes / (copy_ms * 1e-3) / 1e9);
    BENCH_CUDA_CHECK(cudaFree(x));
    BENCH_CUDA_CHECK(cudaFree(g));
    BENCH_CUDA_CHECK(cudaFree(beta));
    BENCH_CUDA_CHECK(cudaFree(out));
    BENCH_CUDA_CHECK(cudaFree(state));
    BENCH_CUDA_CHECK(cudaFree(meta));
    if (workspace != nullptr) BENCH_CUDA_CHECK(cudaFree(workspace));
}

}  // namespace

int main() {
    cudaStream_t stream;
    BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    std::mt19937 rng(7);
    for (int seqs : {1, 4, 16, 64})
        run_case(stream, rng, seqs, 1);
    for (bool chunked : {false, true}) {
        for (int tokens : {16, 32, 64, 1024, 2048, 4096})
            run_case(stream, rng, 1, tokens, chunked);
        run_case(stream, rng, 8, 512, chunked);
        run_case(stream, rng, 16, 32, chunked);
    }
    BENCH_CUDA_CHECK(cudaStreamDestroy(stream));
    return 0;
}
