// CPU kernel speed: bf16 GEMV bandwidth next to the copy/read bandwidth measured in the same program, plus
// prefill GEMM, paged attention decode and the delta rule. Run: cpu_ops_bench [--benchmark_filter=Gemv].
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "tensor/buffer.h"

namespace pagoda {
namespace {

namespace kc = kernels::cpu;

constexpr size_t kBig = size_t{256} << 20;  // far beyond any cache

Buffer filled(size_t bytes) {
    Buffer b = Buffer::host(bytes);
    std::memset(b.data(), 1, bytes);  // touch every page
    return b;
}

// memcpy split over all OpenMP threads; bytes = read + write.
void BM_MemcpyParallel(benchmark::State& state) {
    Buffer src = filled(kBig), dst = filled(kBig);
    for (auto _ : state) {
#pragma omp parallel
        {
            const int n = omp_get_num_threads(), id = omp_get_thread_num();
            const size_t chunk = kBig / n;
            std::memcpy(static_cast<char*>(dst.data()) + id * chunk, static_cast<char*>(src.data()) + id * chunk,
                        chunk);
        }
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * kBig);
    state.counters["threads"] = omp_get_max_threads();
}
BENCHMARK(BM_MemcpyParallel)->Unit(benchmark::kMillisecond)->UseRealTime();

// Pure streaming read over all threads (what a GEMV needs); bytes = read.
void BM_ReadParallel(benchmark::State& state) {
    Buffer src = filled(kBig);
    const auto* p = static_cast<const uint64_t*>(src.data());
    const size_t n = kBig / 8;
    for (auto _ : state) {
        uint64_t total = 0;
#pragma omp parallel for reduction(^ : total) schedule(static)
        for (size_t i = 0; i < n; ++i)
            total ^= p[i];
        benchmark::DoNotOptimize(total);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kBig);
}
BENCHMARK(BM_ReadParallel)->Unit(benchmark::kMillisecond)->UseRealTime();

struct Gemm {
    std::vector<uint16_t> w;
    std::vector<float> x, y;
    kc::LinearArgs a;
    Gemm(int64_t T, int64_t N, int64_t K) : w(N * K), x(T * K), y(T * N) {
        std::mt19937 rng(1);
        std::uniform_real_distribution<float> d(-1, 1);
        for (auto& v : w)
            v = f32_to_bf16(d(rng));
        for (auto& v : x)
            v = d(rng);
        a.x = x.data(), a.x_stride = K, a.w = w.data(), a.w_dtype = DType::BF16, a.w_stride = K;
        a.y = y.data(), a.y_stride = N, a.T = T, a.N = N, a.K = K;
    }
};

// Decode: one row of x against a bf16 weight; bytes = weight bytes (the memory-bound part).
void BM_GemvBf16(benchmark::State& state) {
    Gemm g(1, state.range(0), state.range(1));
    for (auto _ : state) {
        kc::launch_linear(g.a);
        benchmark::DoNotOptimize(g.y.data());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0) * state.range(1) * 2);
}
// Qwen3-0.6B-like shapes (q/k/v/o, gate/up, down, lm_head slice) and one 64 MiB matrix.
BENCHMARK(BM_GemvBf16)
    ->Args({2048, 1024})
    ->Args({3072, 1024})
    ->Args({1024, 3072})
    ->Args({8192, 4096})
    ->Args({151936, 1024})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// All the linear layers of one decode step of a Qwen3-0.6B-shaped model (28 layers, hidden 1024, 16 q / 8 kv
// heads of 128, intermediate 3072, tied 151936-row lm_head): ~1.2 GB of bf16 weights streamed per token.
// bytes_per_second is directly comparable with BM_ReadParallel (the bandwidth bound); tok/s is what a decode
// step's GEMVs alone allow (norms, attention and sampling are small at short context).
void BM_DecodeLinearsQwen3_0_6B(benchmark::State& state) {
    const int64_t H = 1024, Q = 2048, KV = 1024, I = 3072, V = 151936, layers = 28;
    struct Mat {
        int64_t n, k;
    };
    const Mat per_layer[] = {{Q, H}, {KV, H}, {KV, H}, {H, Q}, {I, H}, {I, H}, {H, I}};
    int64_t elems = V * H;
    for (const Mat& m : per_layer)
        elems += layers * m.n * m.k;
    Buffer weights = Buffer::host(static_cast<size_t>(elems) * 2);
    std::memset(weights.data(), 0x3c, weights.size());  // bf16 0x3c3c ~ 0.0115: values do not matter for speed
    std::vector<float> x(I, 0.5f), y(V);
    for (auto _ : state) {
        const auto* w = static_cast<const uint16_t*>(weights.data());
        auto run = [&](int64_t n, int64_t k) {
            kc::LinearArgs a;
            a.x = x.data(), a.x_stride = k, a.w = w, a.w_dtype = DType::BF16, a.w_stride = k;
            a.y = y.data(), a.y_stride = n, a.T = 1, a.N = n, a.K = k;
            kc::launch_linear(a);
            w += n * k;
        };
        for (int64_t l = 0; l < layers; ++l)
            for (const Mat& m : per_layer)
                run(m.n, m.k);
        run(V, H);
        benchmark::DoNotOptimize(y.data());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * elems * 2);
    state.counters["tok/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
    state.counters["weight_GB"] = static_cast<double>(elems) * 2 / 1e9;
}
BENCHMARK(BM_DecodeLinearsQwen3_0_6B)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

// Prefill: T rows; reports FLOP/s.
void BM_GemmBf16(benchmark::State& state) {
    Gemm g(state.range(0), state.range(1), state.range(2));
    for (auto _ : state) {
        kc::launch_linear(g.a);
        benchmark::DoNotOptimize(g.y.data());
    }
    state.counters["FLOPS"] = benchmark::Counter(
        2.0 * state.range(0) * state.range(1) * state.range(2) * static_cast<double>(state.iterations()),
        benchmark::Counter::kIsRate);
}
BENCHMARK(BM_GemmBf16)->Args({128, 3072, 1024})->Args({512, 1024, 1024})->Unit(benchmark::kMillisecond)->UseRealTime();

// Decode attention: 8 sequences, 16 query heads, 8 kv heads, head_dim 128, context = range(0).
void BM_PagedAttentionDecode(benchmark::State& state) {
    const int32_t S = 8, Hq = 16, Hkv = 8, D = 128, bs = 16;
    const int32_t L = static_cast<int32_t>(state.range(0));
    const int32_t blocks_per_seq = (L + bs - 1) / bs, num_blocks = S * blocks_per_seq;
    std::vector<float> kcache(size_t(num_blocks) * bs * Hkv * D, 0.01f), vcache(kcache.size(), 0.02f);
    std::vector<float> q(size_t(S) * Hq * D, 0.1f), out(q.size());
    std::vector<int32_t> qsl(S + 1), lens(S, L), tables(size_t(S) * blocks_per_seq);
    for (int32_t s = 0; s <= S; ++s)
        qsl[s] = s;
    for (size_t i = 0; i < tables.size(); ++i)
        tables[i] = static_cast<int32_t>(i);
    kc::PagedAttentionArgs a;
    a.q = {q.data(), Hq * D, D}, a.out = {out.data(), Hq * D, D};
    a.H_q = Hq, a.H_kv = Hkv, a.D = D, a.key_cache = kcache.data(), a.value_cache = vcache.data();
    a.block_size = bs, a.num_blocks = num_blocks, a.num_seqs = S, a.query_start_loc = qsl.data();
    a.seq_lens = lens.data(), a.block_tables = tables.data(), a.max_blocks_per_seq = blocks_per_seq;
    a.scale = 1.0f / std::sqrt(float(D));
    for (auto _ : state) {
        kc::launch_paged_attention(a);
        benchmark::DoNotOptimize(out.data());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * S * L * Hkv * D * 4 * 2);
}
BENCHMARK(BM_PagedAttentionDecode)->Arg(512)->Arg(4096)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Delta rule over T tokens of one sequence, Qwen3.5-like heads (16 k heads, 32 v heads, 128 x 128);
// mode 1 recurrent, 2 chunked. Reports tokens/s.
void BM_DeltaRule(benchmark::State& state) {
    const int64_t T = state.range(0), Hk = 16, Hv = 32, dk = 128, dv = 128;
    std::vector<float> q(T * Hk * dk, 0.05f), k(q.size(), 0.05f), v(T * Hv * dv, 0.1f), g(T * Hv, -0.1f),
        beta(T * Hv, 0.5f), out(v.size()), st(Hv * dk * dv);
    std::vector<int32_t> qsl = {0, static_cast<int32_t>(T)}, lens = {static_cast<int32_t>(T)}, slots = {0};
    kc::DeltaRuleArgs a;
    a.q = {q.data(), Hk * dk, dk}, a.k = {k.data(), Hk * dk, dk}, a.v = {v.data(), Hv * dv, dv};
    a.out = {out.data(), Hv * dv, dv}, a.g = g.data(), a.g_stride = Hv, a.beta = beta.data(), a.beta_stride = Hv;
    a.Hk = Hk, a.Hv = Hv, a.dk = dk, a.dv = dv, a.q_scale = 1.0f / std::sqrt(128.0f), a.state = st.data();
    a.num_slots = 1, a.seqs = {1, qsl.data(), lens.data(), slots.data()}, a.mode = static_cast<int>(state.range(1));
    for (auto _ : state) {
        kc::launch_gated_delta_rule(a);
        benchmark::DoNotOptimize(out.data());
    }
    state.counters["tokens"] = benchmark::Counter(double(T) * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DeltaRule)->Args({1, 1})->Args({256, 1})->Args({256, 2})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace pagoda

BENCHMARK_MAIN();
