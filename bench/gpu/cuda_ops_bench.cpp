// pagoda_cuda_ops_bench: the hot ops of a Qwen3-8B-shaped step alone, on random data, each timed over many runs:
// decode attention (the KV bytes it must read ÷ its time = achieved bandwidth), the projections of a decode step at
// T = 1 (GEMV: weight bytes ÷ time) and at T = 256 (cuBLASLt: FLOP/s). Prints one JSON line per op, so a kernel change
// can be judged by itself, next to the machine's copy bandwidth and GEMM peak that pagoda_cuda_bench reports.
//   pagoda_cuda_ops_bench [--seqs 256] [--context 1536] [--attention-only]
// PAGODA_DECODE_ATTENTION=WxS picks another block shape of the decode attention kernel (decode_attention.cu).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/cache_pools.h"
#include "runtime/cuda_backend.h"
#include "runtime/forward_batch.h"
#include "runtime/ops.h"
#include "tensor/buffer.h"

namespace {

using namespace pagoda;
using Clock = std::chrono::steady_clock;

// Mean seconds of one call of `op` over `reps` back-to-back calls (after two warm-up calls).
double time_op(Backend& backend, int reps, const std::function<void()>& op) {
    op();
    op();
    backend.synchronize();
    const auto t = Clock::now();
    for (int i = 0; i < reps; ++i)
        op();
    backend.synchronize();
    return std::chrono::duration<double>(Clock::now() - t).count() / reps;
}

// A device tensor of random values in [-1, 1) (bf16 or f32), made on the host and copied over.
Buffer random_device(Backend& backend, DType dtype, const Shape& shape, std::mt19937& rng) {
    HostTensor host = HostTensor::empty(dtype, shape);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    for (int64_t i = 0; i < shape.numel(); ++i) {
        if (dtype == DType::BF16)
            host.tensor.data_as<uint16_t>()[i] = f32_to_bf16(d(rng));
        else
            host.tensor.data_as<float>()[i] = d(rng);
    }
    auto buffer = Buffer::allocate(backend.allocator(), host.tensor.nbytes(), 256);
    if (!buffer.ok()) {
        std::fprintf(stderr, "pagoda_cuda_ops_bench: %s\n", buffer.message().c_str());
        std::exit(1);
    }
    backend.copy(buffer->view(dtype, shape), host.tensor);
    return std::move(buffer).value();
}

void attention(Backend& backend, int32_t seqs, int32_t context, std::mt19937& rng) {
    const int64_t Hq = 32, Hkv = 8, D = 128;
    const int32_t bs = 16, per_seq = (context + bs - 1) / bs, blocks = seqs * per_seq;
    auto pool = KvCachePool::create(backend.allocator(),
                                    {1, blocks, bs, static_cast<int32_t>(Hkv), static_cast<int32_t>(D), DType::BF16});
    if (!pool.ok()) {
        std::fprintf(stderr, "pagoda_cuda_ops_bench: %s\n", pool.message().c_str());
        std::exit(1);
    }
    // Blocks shuffled over the pool, as a server's would be after a while.
    std::vector<int32_t> ids(static_cast<size_t>(blocks));
    for (int32_t i = 0; i < blocks; ++i)
        ids[static_cast<size_t>(i)] = i;
    std::shuffle(ids.begin(), ids.end(), rng);
    ForwardBatchBuilder builder(bs);
    const int32_t token = 1;
    for (int32_t s = 0; s < seqs; ++s) {
        const std::vector<int32_t> table(ids.begin() + s * per_seq, ids.begin() + (s + 1) * per_seq);
        builder.add_sequence(std::span<const int32_t>(&token, 1), context - 1, table, 0);
    }
    const ForwardBatch batch = builder.view();
    Buffer q = random_device(backend, DType::F32, Shape{seqs, Hq, D}, rng);
    Buffer out = random_device(backend, DType::F32, Shape{seqs, Hq, D}, rng);
    const Tensor qt = q.view(DType::F32, Shape{seqs, Hq, D}), ot = out.view(DType::F32, Shape{seqs, Hq, D});
    Ops& ops = backend.ops();
    const double s =
        time_op(backend, 20, [&] { ops.paged_attention(qt, pool->key(0), pool->value(0), batch, 0.088f, ot); });
    const double bytes = 2.0 * seqs * context * Hkv * D * 2;  // K and V, bf16
    std::printf("{\"op\": \"decode attention\", \"seqs\": %d, \"context\": %d, \"ms\": %.4f, \"gbps\": %.0f}\n", seqs,
                context, s * 1e3, bytes / s / 1e9);
}

void projections(Backend& backend, int64_t T, std::mt19937& rng) {
    const int64_t H = 4096;
    struct Proj {
        const char* name;
        int64_t N, K;
    };
    const Proj projs[] = {
        {"qkv", 6144, H}, {"o", H, 4096}, {"gate_up", 2 * 12288, H}, {"down", H, 12288}, {"lm_head", 151936, H}};
    Ops& ops = backend.ops();
    for (const Proj& p : projs) {
        Buffer w = random_device(backend, DType::BF16, Shape{p.N, p.K}, rng);
        Buffer x = random_device(backend, DType::F32, Shape{T, p.K}, rng);
        Buffer y = random_device(backend, DType::F32, Shape{T, p.N}, rng);
        const Tensor wt = w.view(DType::BF16, Shape{p.N, p.K}), xt = x.view(DType::F32, Shape{T, p.K}),
                     yt = y.view(DType::F32, Shape{T, p.N});
        const LinearWeight lw = LinearWeight::dense(wt);
        const double s = time_op(backend, 20, [&] { ops.linear(xt, lw, yt); });
        const double weight_bytes = 2.0 * p.N * p.K, flops = 2.0 * T * p.N * p.K;
        std::printf(
            "{\"op\": \"linear %s\", \"T\": %lld, \"N\": %lld, \"K\": %lld, \"ms\": %.4f, \"weight_gbps\": %.0f, "
            "\"tflops\": %.1f}\n",
            p.name, static_cast<long long>(T), static_cast<long long>(p.N), static_cast<long long>(p.K), s * 1e3,
            weight_bytes / s / 1e9, flops / s / 1e12);
    }
}

}  // namespace

int main(int argc, char** argv) {
    int32_t seqs = 256, context = 1536;
    bool attention_only = false;
    for (int i = 1; i < argc; ++i) {
        const std::string k = argv[i];
        if (k == "--attention-only") {
            attention_only = true;
        } else if ((k == "--seqs" || k == "--context") && i + 1 < argc) {
            (k == "--seqs" ? seqs : context) = std::atoi(argv[++i]);
        } else {
            std::fprintf(stderr, "usage: pagoda_cuda_ops_bench [--seqs N] [--context N] [--attention-only]\n");
            return 1;
        }
    }
    auto backend = make_cuda_backend();
    if (!backend.ok()) {
        std::fprintf(stderr, "pagoda_cuda_ops_bench: %s\n", backend.message().c_str());
        return 1;
    }
    std::mt19937 rng(5);
    attention(**backend, seqs, context, rng);
    attention(**backend, 1, 512, rng);
    attention(**backend, 16, 4096, rng);
    if (attention_only) return 0;
    for (int64_t T : {1, 2, 3, 4, 8, 64, 256})
        projections(**backend, T, rng);
    return 0;
}
