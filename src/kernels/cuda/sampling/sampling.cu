// The GPU sampler: one block per sampled row, the CPU sampler's algorithm (engine/sampler.cpp) pass by pass, so that
// a seeded request draws the same token on either backend. Order: the structured-output mask (-inf), raw log-softmax
// and top logprobs, the edits (bias,
// min_tokens mask, penalties), then greedy argmax, or temperature, min_p, top_k, top_p and an inverse-CDF draw in
// token-id order with the request's uniform. Sums of probabilities are in double, as on the CPU; they are reduced in
// a fixed order (never atomically) so the same input gives the same token every run. Temperature scaling is
// recomputed in each pass rather than stored, so the row keeps its raw values for the sampled token's logprob; masked
// tokens become -inf in place (they can never be drawn, so their raw values are not needed).
#include <cfloat>
#include <climits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/sampling/sampling.h"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
// When at most this many tokens are still live after top_k (Qwen's defaults keep 20), they are gathered into shared
// memory in id order, and top_p and the draw walk that list instead of the whole vocabulary 35 times.
constexpr int kCompact = 1024;
constexpr unsigned kFull = 0xffffffffu;

// Order-preserving key of a float: a larger float has a larger key (-inf < finite < +inf). -0 and +0 share a key,
// since they compare equal and the CPU treats them as a tie.
__device__ __forceinline__ uint32_t key_of(float f) {
    const uint32_t b = f == 0.0f ? 0u : __float_as_uint(f);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float value_of(uint32_t k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// A candidate token: higher value first, then lower id (the CPU's tie order).
struct Best {
    float value;
    int32_t id;
};
__device__ __forceinline__ bool better(float v, int32_t id, const Best& b) {
    return v > b.value || (v == b.value && id < b.id);
}

struct Scratch {
    double d[kWarps];
    float f[kWarps];
    int32_t i[kWarps];
    int32_t j[kWarps];
    uint32_t hist[256];
    uint32_t digit;
    int32_t chosen;
    float chosen_raw;
    float live_values[kCompact];
    int32_t live_ids[kCompact];
};

// Block-wide reductions; every thread gets the result. Warp partials are combined in warp order (deterministic).
template <typename T, typename Op>
__device__ T block_reduce(T v, T* partial, Op op) {
    for (int o = 16; o > 0; o >>= 1)
        v = op(v, __shfl_xor_sync(kFull, v, o));
    __syncthreads();  // partial may still be read by the previous reduction
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
    __syncthreads();
    T r = partial[0];
    for (int w = 1; w < kWarps; ++w)
        r = op(r, partial[w]);
    return r;
}
struct MaxOp {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
    template <typename T>
    __device__ T operator()(T a, T b) const {
        return a + b;
    }
};
struct MaxIntOp {
    __device__ int32_t operator()(int32_t a, int32_t b) const { return a > b ? a : b; }
};
struct MinIntOp {
    __device__ int32_t operator()(int32_t a, int32_t b) const { return a < b ? a : b; }
};

__device__ Best block_best(Best b, Scratch& s) {
    for (int o = 16; o > 0; o >>= 1) {
        const float v = __shfl_xor_sync(kFull, b.value, o);
        const int32_t id = __shfl_xor_sync(kFull, b.id, o);
        if (better(v, id, b)) b = {v, id};
    }
    __syncthreads();
    if ((threadIdx.x & 31) == 0) s.f[threadIdx.x >> 5] = b.value, s.i[threadIdx.x >> 5] = b.id;
    __syncthreads();
    Best r{s.f[0], s.i[0]};
    for (int w = 1; w < kWarps; ++w)
        if (better(s.f[w], s.i[w], r)) r = {s.f[w], s.i[w]};
    return r;
}

// Exclusive prefix over threads in thread order; `total` gets the block's sum.
template <typename T>
__device__ T block_exclusive_scan(T v, T* partial, T& total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    T incl = v;
    for (int o = 1; o < 32; o <<= 1) {
        const T y = __shfl_up_sync(kFull, incl, o);
        if (lane >= o) incl += y;
    }
    T excl = __shfl_up_sync(kFull, incl, 1);
    if (lane == 0) excl = T(0);
    __syncthreads();
    if (lane == 31) partial[warp] = incl;
    __syncthreads();
    T base = T(0), sum = T(0);
    for (int w = 0; w < kWarps; ++w) {
        if (w < warp) base += partial[w];
        sum += partial[w];
    }
    total = sum;
    return base + excl;
}

// The temperature-scaled value; __fmul_rn/__fsub_rn keep nvcc from fusing into an FMA the CPU does not do.
__device__ __forceinline__ float scaled(float x, float inv_t) {
    return __fmul_rn(x, inv_t);
}
// Live = may still be drawn; NaN is not, as on the CPU (`x > -inf`).
__device__ __forceinline__ bool live(float x) {
    return x > -INFINITY;
}
__device__ __forceinline__ double mass(float x, float m) {
    return exp(static_cast<double>(x) - static_cast<double>(m));
}

// The k-th largest key among live (> -inf) scaled values: four 8-bit digits, each from a histogram of the keys that
// share the digits found so far. Integer atomics in shared memory: the counts do not depend on their order.
__device__ uint32_t kth_largest_key(const float* w, int64_t V, float inv_t, int32_t k, Scratch& s) {
    uint32_t prefix = 0;
    int32_t remaining = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        const uint32_t high_mask = shift == 24 ? 0u : (0xffffffffu << (shift + 8));
        for (int b = threadIdx.x; b < 256; b += kThreads)
            s.hist[b] = 0;
        __syncthreads();
        for (int64_t v = threadIdx.x; v < V; v += kThreads) {
            const float x = scaled(w[v], inv_t);
            if (!live(x)) continue;
            const uint32_t key = key_of(x);
            if ((key & high_mask) == (prefix & high_mask)) atomicAdd(&s.hist[(key >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int32_t above = 0;
            int b = 255;
            for (; b > 0; --b) {
                if (above + static_cast<int32_t>(s.hist[b]) >= remaining) break;
                above += static_cast<int32_t>(s.hist[b]);
            }
            s.digit = static_cast<uint32_t>(b);
            s.i[0] = remaining - above;
        }
        __syncthreads();
        prefix |= s.digit << shift;
        remaining = s.i[0];
        __syncthreads();
    }
    return prefix;
}

__device__ double live_mass_above(const float* w, int64_t V, float inv_t, float m, uint32_t key_floor, Scratch& s) {
    double sum = 0;
    for (int64_t v = threadIdx.x; v < V; v += kThreads) {
        const float x = scaled(w[v], inv_t);
        if (live(x) && key_of(x) > key_floor) sum += mass(x, m);
    }
    return block_reduce(sum, s.d, SumOp{});
}

// top_p as the CPU does it: sort live tokens by (value desc, id asc) and keep them while the mass before each is
// below top_p * total (the first always stays). Without sorting: the last kept value x* has the smallest key T with
// mass(key > T) < P (a bitwise search), every value above it stays, and of the tokens equal to x* the lowest ids stay
// while the running mass is below P.
__device__ void apply_top_p(float* w, int64_t V, float inv_t, float m, float top_p, Scratch& s) {
    const double total = live_mass_above(w, V, inv_t, m, 0u, s);  // every live key is above key_of(-inf) > 0
    const double P = static_cast<double>(top_p) * total;
    uint32_t below = 0;  // the largest key whose mass above is still >= P
    for (int bit = 31; bit >= 0; --bit) {
        const uint32_t cand = below | (1u << bit);
        if (live_mass_above(w, V, inv_t, m, cand, s) >= P) below = cand;
    }
    const uint32_t T = below + 1;
    const float x_star = value_of(T);
    const double S = live_mass_above(w, V, inv_t, m, T, s);
    // Ties at x*: count them per thread chunk (id order), then keep the first n_keep.
    const int64_t chunk = (V + kThreads - 1) / kThreads;
    const int64_t lo = threadIdx.x * chunk, hi = lo + chunk < V ? lo + chunk : V;
    int32_t ties = 0;
    for (int64_t v = lo; v < hi; ++v)
        ties += scaled(w[v], inv_t) == x_star;
    int32_t num_ties = 0;
    const int32_t rank0 = block_exclusive_scan(ties, s.i, num_ties);
    __syncthreads();
    if (threadIdx.x == 0) {
        const double e = mass(x_star, m);
        double before = S;
        int32_t keep = 0;
        while (keep < num_ties && (before < P || (keep == 0 && S == 0.0))) {
            before += e;
            ++keep;
        }
        s.j[0] = keep;
    }
    __syncthreads();
    const int32_t n_keep = s.j[0];
    int32_t rank = rank0;
    for (int64_t v = lo; v < hi; ++v) {
        const float x = scaled(w[v], inv_t);
        if (x < x_star || (x == x_star && rank++ >= n_keep)) w[v] = -INFINITY;
    }
    __syncthreads();
}

__device__ int32_t count_live(const float* w, int64_t V, float inv_t, Scratch& s) {
    int32_t n = 0;
    for (int64_t v = threadIdx.x; v < V; v += kThreads)
        n += live(scaled(w[v], inv_t));
    return block_reduce(n, s.i, SumOp{});
}

// Copies the live tokens (raw values and ids, in id order) into s.live_*; returns how many. The caller made sure
// they fit.
__device__ int64_t gather_live(const float* w, int64_t V, float inv_t, Scratch& s) {
    const int64_t chunk = (V + kThreads - 1) / kThreads;
    const int64_t lo = threadIdx.x * chunk, hi = lo + chunk < V ? lo + chunk : V;
    int32_t mine = 0;
    for (int64_t v = lo; v < hi; ++v)
        mine += live(scaled(w[v], inv_t));
    int32_t total = 0;
    int32_t at = block_exclusive_scan(mine, s.i, total);
    for (int64_t v = lo; v < hi; ++v) {
        if (!live(scaled(w[v], inv_t))) continue;
        s.live_values[at] = w[v];
        s.live_ids[at++] = static_cast<int32_t>(v);
    }
    __syncthreads();
    return total;
}

// The inverse-CDF draw over w[0, n) in index order: each thread owns a contiguous chunk; the first chunk whose
// running mass passes u * total walks its tokens in order, exactly like the CPU's loop. Returns the index.
__device__ int64_t draw(const float* w, int64_t n, float inv_t, float m, double uniform, Scratch& s) {
    const int64_t chunk = (n + kThreads - 1) / kThreads;
    const int64_t lo = threadIdx.x * chunk, hi = lo + chunk < n ? lo + chunk : n;
    double own = 0;
    int32_t last = -1;
    for (int64_t v = lo; v < hi; ++v) {
        const float x = scaled(w[v], inv_t);
        if (!live(x)) continue;
        own += mass(x, m);
        last = static_cast<int32_t>(v);
    }
    double total = 0;
    const double base = block_exclusive_scan(own, s.d, total);
    const double target = uniform * total;
    const int32_t last_live = block_reduce(last, s.j, MaxIntOp{});
    const int32_t owner =
        block_reduce(own > 0 && base + own > target ? static_cast<int32_t>(threadIdx.x) : INT_MAX, s.i, MinIntOp{});
    if (threadIdx.x == 0) s.chosen = last_live;
    __syncthreads();
    if (static_cast<int32_t>(threadIdx.x) == owner) {
        double acc = base;
        int32_t pick = last;  // rounding left the crossing at the chunk's end
        for (int64_t v = lo; v < hi; ++v) {
            const float x = scaled(w[v], inv_t);
            if (!live(x)) continue;
            acc += mass(x, m);
            if (acc > target) {
                pick = static_cast<int32_t>(v);
                break;
            }
        }
        s.chosen = pick;
    }
    __syncthreads();
    return s.chosen;
}

__global__ void __launch_bounds__(kThreads) sample_kernel(SampleArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    __shared__ Scratch s;
    const SampleRow r = a.rows[blockIdx.x];
    float* w = a.logits + static_cast<int64_t>(r.logits_row) * a.stride;
    const int64_t V = a.V;
    SampledToken* out = a.out + blockIdx.x;
    if (threadIdx.x == 0) out->num_top = 0;  // no top logprobs unless asked for (also on the no-token returns)

    // 0. Structured output: tokens the grammar does not allow are -inf from here on, so the logprobs below are those
    // of the masked distribution (as the CPU sampler, and vLLM, report them).
    if (r.mask_row >= 0) {
        const uint32_t* mask = a.masks + static_cast<int64_t>(r.mask_row) * a.mask_words;
        for (int64_t v = threadIdx.x; v < V; v += kThreads)
            if (!((mask[v >> 5] >> (v & 31)) & 1u)) w[v] = -INFINITY;
        __syncthreads();
    }

    // 1. Log-softmax of the raw row, and its most likely tokens, before anything edits it.
    float raw_max = 0;
    double raw_log_sum = 0;
    if (r.num_top >= 0) {
        float m = -INFINITY;
        for (int64_t v = threadIdx.x; v < V; v += kThreads)
            m = fmaxf(m, w[v]);
        raw_max = block_reduce(m, s.f, MaxOp{});
        double sum = 0;
        for (int64_t v = threadIdx.x; v < V; v += kThreads)
            sum += mass(w[v], raw_max);
        raw_log_sum = log(block_reduce(sum, s.d, SumOp{}));
        const double lse = static_cast<double>(raw_max) + raw_log_sum;
        Best prev{INFINITY, -1};  // before every token
        int32_t n = 0;
        for (; n < r.num_top; ++n) {
            Best b{-INFINITY, INT_MAX};
            for (int64_t v = threadIdx.x; v < V; v += kThreads) {
                const float x = w[v];
                const int32_t id = static_cast<int32_t>(v);
                const bool after = x < prev.value || (x == prev.value && id > prev.id);
                if (after && better(x, id, b)) b = {x, id};
            }
            b = block_best(b, s);
            if (b.id == INT_MAX || b.value == -INFINITY) break;  // -inf: masked out, as the CPU leaves them out
            if (threadIdx.x == 0) {
                out->top_ids[n] = b.id;
                out->top_logprobs[n] = static_cast<float>(static_cast<double>(b.value) - lse);
            }
            prev = b;
        }
        if (threadIdx.x == 0) out->num_top = n;
    }
    __syncthreads();

    // 2. The engine's edits; the raw values are kept for the sampled token's logprob.
    for (int32_t e = r.edit_begin + threadIdx.x; e < r.edit_end; e += kThreads) {
        const LogitEdit ed = a.edits[e];
        float x = w[ed.token];
        a.edit_raw[e] = x;
        x = x + ed.bias;
        if (ed.masked) x = -INFINITY;
        if (ed.repetition_penalty != 1.0f)
            x = x > 0.0f ? __fdiv_rn(x, ed.repetition_penalty) : __fmul_rn(x, ed.repetition_penalty);
        w[ed.token] = x - ed.subtract;
    }
    __syncthreads();

    int32_t chosen = -1;
    if (r.temperature == 0.0f) {
        // 3a. Greedy.
        Best b{-INFINITY, INT_MAX};
        for (int64_t v = threadIdx.x; v < V; v += kThreads)
            if (better(w[v], static_cast<int32_t>(v), b)) b = {w[v], static_cast<int32_t>(v)};
        b = block_best(b, s);
        if (b.id == INT_MAX || b.value == -INFINITY) {  // every token masked out: no token (engine::kNoToken)
            if (threadIdx.x == 0) out->token = -1, out->error = 1, out->logprob = 0.0f;
            return;
        }
        chosen = b.id;
    } else {
        // 3b. Temperature, min_p, top_k, top_p, then the draw.
        const float inv_t = 1.0f / r.temperature;
        float m = -INFINITY;
        for (int64_t v = threadIdx.x; v < V; v += kThreads)
            m = fmaxf(m, scaled(w[v], inv_t));
        m = block_reduce(m, s.f, MaxOp{});
        if (!live(m)) {
            if (threadIdx.x == 0) out->token = -1, out->error = 1, out->logprob = 0.0f;
            return;
        }
        if (r.min_p > 0.0f) {
            for (int64_t v = threadIdx.x; v < V; v += kThreads)
                if (__fsub_rn(scaled(w[v], inv_t), m) < r.min_p_log) w[v] = -INFINITY;
            __syncthreads();
        }
        if (r.top_k > 0) {
            if (r.top_k < count_live(w, V, inv_t, s)) {
                const float kth = value_of(kth_largest_key(w, V, inv_t, r.top_k, s));
                for (int64_t v = threadIdx.x; v < V; v += kThreads)
                    if (scaled(w[v], inv_t) < kth) w[v] = -INFINITY;
                __syncthreads();
            }
        }

        // Few live tokens: gather them (in id order, so ties and the draw see the same order).
        float* dw = w;
        int64_t dn = V;
        const int32_t* ids = nullptr;
        if (count_live(w, V, inv_t, s) <= kCompact) {
            dn = gather_live(w, V, inv_t, s);
            dw = s.live_values, ids = s.live_ids;
        }
        if (r.top_p < 1.0f) apply_top_p(dw, dn, inv_t, m, r.top_p, s);
        const int64_t pick = draw(dw, dn, inv_t, m, r.uniform, s);
        chosen = ids ? ids[pick] : static_cast<int32_t>(pick);
    }

    // 4. The sampled token's logprob from its raw logit (its edit kept the raw value if it had one).
    if (r.num_top >= 0) {
        if (threadIdx.x == 0) s.chosen_raw = w[chosen];
        __syncthreads();
        for (int32_t e = r.edit_begin + threadIdx.x; e < r.edit_end; e += kThreads)
            if (a.edits[e].token == chosen) s.chosen_raw = a.edit_raw[e];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out->token = chosen;
        out->error = 0;
        out->logprob =
            r.num_top >= 0 ? static_cast<float>(static_cast<double>(s.chosen_raw) - raw_max - raw_log_sum) : 0.0f;
    }
}

}  // namespace

void launch_sample(const SampleArgs& a, cudaStream_t stream) {
    if (a.num_rows == 0) return;
    PAGODA_KERNEL_REQUIRE(a.V > 0 && a.V < INT_MAX, "sample: vocabulary size out of range");
    launch_kernel<sample_kernel>(static_cast<unsigned>(a.num_rows), kThreads, 0, stream, a);
    PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::kernels::cuda
