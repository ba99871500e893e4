// Helpers shared by the CPU kernel files (not a public header).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "tensor/dtype.h"

// Hot kernels are compiled three times (AVX-512, AVX2+FMA, baseline x86-64) and picked once by CPU features,
// so one binary runs anywhere and still uses the wide units where they exist.
#if defined(__x86_64__) && defined(__GNUC__)
#define PAGODA_HAS_ISA_VARIANTS 1
#define PAGODA_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,bmi,bmi2")))
#define PAGODA_TARGET_AVX2 __attribute__((target("avx2,fma,f16c,bmi,bmi2")))
#else
#define PAGODA_HAS_ISA_VARIANTS 0
#define PAGODA_TARGET_AVX512
#define PAGODA_TARGET_AVX2
#endif
#define PAGODA_INLINE inline __attribute__((always_inline))

namespace pagoda::kernels::cpu {

enum class Isa { Base, Avx2, Avx512 };
Isa cpu_isa();  // detected once
const char* isa_name(Isa isa);

template <typename Fn>
Fn pick_isa(Fn avx512, Fn avx2, Fn base) {
    switch (cpu_isa()) {
        case Isa::Avx512:
            return avx512;
        case Isa::Avx2:
            return avx2;
        default:
            return base;
    }
}

// Defines name_avx512 / name_avx2 / name_base running the body (the trailing arguments; it sees the parameter `r`)
// and a function `name(r)` that calls the variant for this CPU.
// The body may use the type Vec: the f32 vector of the variant's native width (v16f for AVX-512, v8f for AVX2, v4f for
// SSE2).
#define PAGODA_ISA_VARIANTS(name, Param, ...)                                                                \
    PAGODA_TARGET_AVX512 void name##_avx512(Param r) {                                                       \
        using Vec [[maybe_unused]] = v16f;                                                                   \
        __VA_ARGS__;                                                                                         \
    }                                                                                                        \
    PAGODA_TARGET_AVX2 void name##_avx2(Param r) {                                                           \
        using Vec [[maybe_unused]] = v8f;                                                                    \
        __VA_ARGS__;                                                                                         \
    }                                                                                                        \
    void name##_base(Param r) {                                                                              \
        using Vec [[maybe_unused]] = v4f;                                                                    \
        __VA_ARGS__;                                                                                         \
    }                                                                                                        \
    void name(Param r) {                                                                                     \
        static void (*const fn)(Param) = pick_isa<void (*)(Param)>(name##_avx512, name##_avx2, name##_base); \
        fn(r);                                                                                               \
    }

// GCC vector extensions: one 16-lane f32 vector, lowered to one zmm, two ymm or four xmm by the variant.
typedef float v16f __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
template <class V>
inline constexpr int kLanes = static_cast<int>(sizeof(V) / sizeof(float));

template <class V>
PAGODA_INLINE V loadv(const float* p) {
    V v;
    std::memcpy(&v, p, sizeof(v));
    return v;
}
template <class V>
PAGODA_INLINE void storev(float* p, V v) {
    std::memcpy(p, &v, sizeof(v));
}
template <class V>
PAGODA_INLINE float hsumv(V v) {
    float s = 0.0f;
    for (int j = 0; j < kLanes<V>; ++j)
        s += v[j];
    return s;
}

PAGODA_INLINE v16f load16(const float* p) {
    v16f v;
    std::memcpy(&v, p, sizeof(v));
    return v;
}
PAGODA_INLINE float hsum(v16f v) {
    float s = 0.0f;
    for (int j = 0; j < 16; ++j)
        s += v[j];
    return s;
}
// Dot product with two vector accumulators (the compiler does not reorder a scalar float reduction).
PAGODA_INLINE float dot_f32(const float* a, const float* b, int64_t n) {
    v16f s0{}, s1{};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 += load16(a + i) * load16(b + i);
        s1 += load16(a + i + 16) * load16(b + i + 16);
    }
    if (i + 16 <= n) {
        s0 += load16(a + i) * load16(b + i);
        i += 16;
    }
    float s = hsum(s0 + s1);
    for (; i < n; ++i)
        s += a[i] * b[i];
    return s;
}

// Below this many multiply-adds an op runs on the calling thread: a fork/join costs microseconds on an idle
// machine and up to a scheduler time slice on a busy one.
inline constexpr int64_t kParallelMinWork = int64_t{1} << 18;

// All 256 e4m3 values (fp8 weights and KV caches): a table lookup instead of bit twiddling per element.
const std::array<float, 256>& e4m3_table();

// Thread-local scratch that only grows, so steady-state calls allocate nothing.
float* scratch(int which, size_t count);

PAGODA_INLINE float silu(float x) {
    return x / (1.0f + std::exp(-x));
}
PAGODA_INLINE float sigmoid(float x) {
    return 1.0f / (1.0f + std::exp(-x));
}
PAGODA_INLINE float softplus(float x) {
    return x > 20.0f ? x : std::log1p(std::exp(x));
}

// Reads n elements of a float array of any float dtype into f32.
void to_f32(const void* src, DType dtype, int64_t n, float* dst);

// y = x · Wᵀ (+ bias) for a weight stored quantized (fp8, int4): `dequantize(n0, n1, out)` writes weight rows [n0, n1)
// as f32 (K per row, contiguous) into thread-local scratch a chunk at a time, and each chunk runs through
// launch_linear, so the numbers are those of an f32 linear over the dequantised weight. `a` gives x, bias, y and T, N,
// K (its w is not read).
void linear_dequantized(const LinearArgs& a, const std::function<void(int64_t n0, int64_t n1, float* out)>& dequantize);

}  // namespace pagoda::kernels::cpu
