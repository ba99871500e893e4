// y = x · Wᵀ (+ bias) with fp32 accumulation over bf16/f16/f32 weights.
// Decode (few rows of x) is memory-bound: each weight row is streamed once and converted in registers.
// Prefill converts a panel of weight rows to f32 once and reuses it for every row of x (register-blocked 6x2 vectors).
#include <algorithm>
#include <bit>
#include <cstring>

#include <omp.h>

#include "common/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/internal.h"

namespace pagoda::kernels::cpu {

namespace {

// Integer/half vectors matching an f32 vector V lane for lane, for the weight conversions.
template <class V>
struct Lanes;
template <>
struct Lanes<v16f> {
    typedef uint32_t U __attribute__((vector_size(64)));
    typedef uint16_t H __attribute__((vector_size(32)));
};
template <>
struct Lanes<v8f> {
    typedef uint32_t U __attribute__((vector_size(32)));
    typedef uint16_t H __attribute__((vector_size(16)));
};
template <>
struct Lanes<v4f> {
    typedef uint32_t U __attribute__((vector_size(16)));
    typedef uint16_t H __attribute__((vector_size(8)));
};

struct Bf16W {
    using T = uint16_t;
    static PAGODA_INLINE float load(const T* p, int64_t i) { return std::bit_cast<float>(uint32_t(p[i]) << 16); }
    template <class V>
    static PAGODA_INLINE V loadv(const T* p) {
        typename Lanes<V>::H h;
        std::memcpy(&h, p, sizeof(h));
        const auto u = __builtin_convertvector(h, typename Lanes<V>::U) << 16;
        return (V)u;  // same-size vector cast: a bit cast
    }
};
// f16 -> f32 without F16C or _Float16: shifting the 15 magnitude bits into an f32 and scaling by 2^112 rebiases
// the exponent and turns f16 subnormals into the right f32 values. Inf/NaN are not preserved (weights are finite).
struct F16W {
    using T = uint16_t;
    static PAGODA_INLINE float load(const T* p, int64_t i) {
        const uint32_t u = p[i];
        const float mag = std::bit_cast<float>((u & 0x7fffu) << 13) * 0x1p112f;
        return std::bit_cast<float>(std::bit_cast<uint32_t>(mag) | ((u & 0x8000u) << 16));
    }
    template <class V>
    static PAGODA_INLINE V loadv(const T* p) {
        using U = typename Lanes<V>::U;
        typename Lanes<V>::H h;
        std::memcpy(&h, p, sizeof(h));
        const U u = __builtin_convertvector(h, U);
        const V mag = (V)((u & 0x7fffu) << 13) * 0x1p112f;
        return (V)((U)mag | ((u & 0x8000u) << 16));
    }
};
struct F32W {
    using T = float;
    static PAGODA_INLINE float load(const T* p, int64_t i) { return p[i]; }
    template <class V>
    static PAGODA_INLINE V loadv(const T* p) {
        return cpu::loadv<V>(p);
    }
};

struct Range {
    const LinearArgs* a;
    int64_t n0, n1;
};

PAGODA_INLINE float bias_at(const LinearArgs& a, int64_t n) {
    return a.bias ? load_as_f32(a.bias, a.bias_dtype, n) : 0.0f;
}

// NT rows of x (NT <= 4) against weight rows [n0, n1); two vectors per step for independent FMA chains.
template <class W, int NT, class V>
PAGODA_INLINE void gemv_rows(const Range& r) {
    constexpr int L = kLanes<V>;
    const LinearArgs& a = *r.a;
    const auto* w = static_cast<const typename W::T*>(a.w);
    const float* x = a.x;
    const int64_t K = a.K, K2 = K / (2 * L) * (2 * L);
    for (int64_t n = r.n0; n < r.n1; ++n) {
        const typename W::T* wr = w + n * a.w_stride;
        V acc0[NT], acc1[NT];
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t)
            acc0[t] = acc1[t] = V{};
        for (int64_t k = 0; k < K2; k += 2 * L) {
            const V w0 = W::template loadv<V>(wr + k), w1 = W::template loadv<V>(wr + k + L);
#pragma GCC unroll 4
            for (int t = 0; t < NT; ++t) {
                acc0[t] += loadv<V>(x + t * a.x_stride + k) * w0;
                acc1[t] += loadv<V>(x + t * a.x_stride + k + L) * w1;
            }
        }
        const float b = bias_at(a, n);
        for (int t = 0; t < NT; ++t) {
            float s = hsumv(acc0[t] + acc1[t]);
            for (int64_t kk = K2; kk < K; ++kk)
                s += x[t * a.x_stride + kk] * W::load(wr, kk);
            a.y[t * a.y_stride + n] = s + b;
        }
    }
}

template <class W, class V>
PAGODA_INLINE void gemv_dispatch(const Range& r) {
    switch (r.a->T) {
        case 1:
            gemv_rows<W, 1, V>(r);
            break;
        case 2:
            gemv_rows<W, 2, V>(r);
            break;
        case 3:
            gemv_rows<W, 3, V>(r);
            break;
        default:
            gemv_rows<W, 4, V>(r);
            break;
    }
}

constexpr int64_t kNR = 4;      // GEMV: weight rows per work unit (thread split granularity)
constexpr int64_t kNCMax = 32;  // GEMM: weight rows per packed panel = two vectors (32 for AVX-512, 16 otherwise)
constexpr int64_t kKC = 128;    // GEMM: k per packed panel: 128 x 32 f32 = 16 KiB, stays in L1
constexpr int64_t kTB = 6;      // GEMM: x rows per register block (6 x 2 accumulators)

// Prefill: y[t, n] for all t and n in [n0, n1). Weight panels are converted to f32 and transposed once
// (wp[k][j] = W[nb + j][kb + k]); the register block is an outer product: per k, two weight vectors and six
// broadcast x values feed twelve FMAs.
template <class W, class V>
PAGODA_INLINE void gemm_rows(const Range& r) {
    constexpr int64_t L = kLanes<V>, NC = 2 * L;
    const LinearArgs& a = *r.a;
    const auto* w = static_cast<const typename W::T*>(a.w);
    float* wp = scratch(0, kKC * NC);
    float buf[kTB][NC];
    for (int64_t nb = r.n0; nb < r.n1; nb += NC) {
        const int64_t nr = std::min(NC, r.n1 - nb);
        for (int64_t kb = 0; kb < a.K; kb += kKC) {
            const int64_t kl = std::min(kKC, a.K - kb);
            for (int64_t j = 0; j < NC; ++j) {
                if (j < nr) {
                    const typename W::T* wr = w + (nb + j) * a.w_stride + kb;
                    for (int64_t k = 0; k < kl; ++k)
                        wp[k * NC + j] = W::load(wr, k);
                } else {
                    for (int64_t k = 0; k < kl; ++k)
                        wp[k * NC + j] = 0.0f;
                }
            }
            for (int64_t t0 = 0; t0 < a.T; t0 += kTB) {
                const int64_t tr = std::min(kTB, a.T - t0);
                const float* xr[kTB];
                for (int64_t t = 0; t < kTB; ++t)
                    xr[t] = a.x + (t0 + std::min(t, tr - 1)) * a.x_stride + kb;
                // Start from the partial sums (or the bias on the first k panel).
                for (int64_t t = 0; t < kTB; ++t)
                    for (int64_t j = 0; j < NC; ++j) {
                        float v = 0.0f;
                        if (t < tr && j < nr) v = kb == 0 ? bias_at(a, nb + j) : a.y[(t0 + t) * a.y_stride + nb + j];
                        buf[t][j] = v;
                    }
                V c00 = loadv<V>(buf[0]), c01 = loadv<V>(buf[0] + L), c10 = loadv<V>(buf[1]),
                  c11 = loadv<V>(buf[1] + L);
                V c20 = loadv<V>(buf[2]), c21 = loadv<V>(buf[2] + L), c30 = loadv<V>(buf[3]),
                  c31 = loadv<V>(buf[3] + L);
                V c40 = loadv<V>(buf[4]), c41 = loadv<V>(buf[4] + L), c50 = loadv<V>(buf[5]),
                  c51 = loadv<V>(buf[5] + L);
                for (int64_t k = 0; k < kl; ++k) {
                    const V w0 = loadv<V>(wp + k * NC), w1 = loadv<V>(wp + k * NC + L);
                    V x = V{} + xr[0][k];
                    c00 += x * w0, c01 += x * w1;
                    x = V{} + xr[1][k];
                    c10 += x * w0, c11 += x * w1;
                    x = V{} + xr[2][k];
                    c20 += x * w0, c21 += x * w1;
                    x = V{} + xr[3][k];
                    c30 += x * w0, c31 += x * w1;
                    x = V{} + xr[4][k];
                    c40 += x * w0, c41 += x * w1;
                    x = V{} + xr[5][k];
                    c50 += x * w0, c51 += x * w1;
                }
                const V acc[kTB][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
                std::memcpy(buf, acc, sizeof(buf));
                for (int64_t t = 0; t < tr; ++t)
                    for (int64_t j = 0; j < nr; ++j)
                        a.y[(t0 + t) * a.y_stride + nb + j] = buf[t][j];
            }
        }
    }
}

PAGODA_ISA_VARIANTS(gemv_bf16, const Range&, gemv_dispatch<Bf16W, Vec>(r))
PAGODA_ISA_VARIANTS(gemv_f16, const Range&, gemv_dispatch<F16W, Vec>(r))
PAGODA_ISA_VARIANTS(gemv_f32, const Range&, gemv_dispatch<F32W, Vec>(r))
PAGODA_ISA_VARIANTS(gemm_bf16, const Range&, gemm_rows<Bf16W, Vec>(r))
PAGODA_ISA_VARIANTS(gemm_f16, const Range&, gemm_rows<F16W, Vec>(r))
PAGODA_ISA_VARIANTS(gemm_f32, const Range&, gemm_rows<F32W, Vec>(r))

}  // namespace

void launch_linear(const LinearArgs& a) {
    PAGODA_CHECK(a.x && a.w && a.y && a.K > 0);
    if (a.T == 0 || a.N == 0) return;
    void (*fn)(const Range&) = nullptr;
    const bool small = a.T <= 4;
    switch (a.w_dtype) {
        case DType::BF16:
            fn = small ? gemv_bf16 : gemm_bf16;
            break;
        case DType::F16:
            fn = small ? gemv_f16 : gemm_f16;
            break;
        case DType::F32:
            fn = small ? gemv_f32 : gemm_f32;
            break;
        default:
            PAGODA_CHECK_MSG(false, "linear: weight dtype must be BF16, F16 or F32");
    }
    // Split the weight rows evenly over the threads (in multiples of the tile height); tiny N runs on one thread.
    const int64_t work = a.N * a.K * std::max<int64_t>(a.T, 1);
    const int threads = work < 4 * kParallelMinWork ? 1 : omp_get_max_threads();
#pragma omp parallel num_threads(threads)
    {
        const int nt = omp_get_num_threads();
        const int id = omp_get_thread_num();
        const int64_t unit = small ? kNR : kNCMax;
        const int64_t tiles = (a.N + unit - 1) / unit;
        const int64_t t0 = tiles * id / nt, t1 = tiles * (id + 1) / nt;
        const Range r{&a, std::min(a.N, t0 * unit), std::min(a.N, t1 * unit)};
        if (r.n1 > r.n0) fn(r);
    }
}

}  // namespace pagoda::kernels::cpu
