// Weight-only int4 on the CPU (AWQ, GPTQ and compressed-tensors checkpoints, repacked at load into LinearWeight's one
// int4 layout; GPTQ 8-bit into its int8 twin): the reference the CUDA kernels are checked against. Rows are dequantised
// to f32 by chunks and run through the f32 GEMM (linear_dequantized), as transformers runs such a checkpoint once its
// weights are dequantised.
#include <omp.h>

#include "common/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/internal.h"

namespace pagoda::kernels::cpu {

namespace {

// (q - zero) · scale in f32, then rounded to `round_to`: the product of an f16 or bf16 multiplication (exactly so: the
// f32 product of two such values is exact, its rounding is the 16-bit multiply's).
template <DType R>
float product(float q, float zero, float scale) {
    const float v = (q - zero) * scale;
    if constexpr (R == DType::F16) return round_to_f16(v);
    if constexpr (R == DType::BF16) return bf16_to_f32(f32_to_bf16(v));
    return v;
}

template <DType R>
void dequantize_rows(const DequantizeInt4Args& a, int64_t n0, int64_t n1) {
    const Int4Weight& w = a.w;
    const float symmetric_zero = w.bits == 8 ? 128.0f : 8.0f;
    for (int64_t n = n0; n < n1; ++n) {
        const uint8_t* q = w.data + n * w.row_bytes;
        const float* scales = w.scales + n * w.groups;
        const float* zeros = w.zeros ? w.zeros + n * w.groups : nullptr;
        float* out = a.out + (n - a.n0) * a.out_stride;
        for (int64_t g = 0; g * w.group_size < a.K; ++g) {
            const float scale = scales[g], zero = zeros ? zeros[g] : symmetric_zero;
            const int64_t k0 = g * w.group_size, k1 = k0 + w.group_size;  // the group size divides K (even)
            if (w.bits == 8) {
                for (int64_t k = k0; k < k1; ++k)
                    out[k] = product<R>(static_cast<float>(q[k]), zero, scale);
                continue;
            }
            // A group's weights take 16 values: each worked out once, then looked up (the same products, rounded
            // once each instead of once a weight).
            float value[16];
            for (int v = 0; v < 16; ++v)
                value[v] = product<R>(static_cast<float>(v), zero, scale);
            for (int64_t k = k0; k < k1; k += 2) {
                const uint8_t byte = q[k / 2];
                out[k] = value[byte & 0xF];
                out[k + 1] = value[byte >> 4];
            }
        }
    }
}

}  // namespace

void launch_dequantize_int4(const DequantizeInt4Args& a) {
    const Int4Weight& w = a.w;
    PAGODA_CHECK(w.data && w.scales && a.out && w.group_size > 0 && w.group_size % 2 == 0 &&
                 a.K == w.group_size * w.groups && (w.bits == 4 || w.bits == 8));
    const int64_t rows = a.n1 - a.n0;
    if (rows <= 0 || a.K <= 0) return;
    const int threads = rows * a.K < kParallelMinWork ? 1 : omp_get_max_threads();
#pragma omp parallel num_threads(threads)
    {
        const int nt = omp_get_num_threads(), id = omp_get_thread_num();
        const int64_t n0 = a.n0 + rows * id / nt, n1 = a.n0 + rows * (id + 1) / nt;
        if (w.round_to == DType::F16)
            dequantize_rows<DType::F16>(a, n0, n1);
        else if (w.round_to == DType::BF16)
            dequantize_rows<DType::BF16>(a, n0, n1);
        else
            dequantize_rows<DType::F32>(a, n0, n1);
    }
}

void launch_linear_int4(const LinearInt4Args& a) {
    PAGODA_CHECK(a.x && a.w.data && a.y && a.K > 0);
    LinearArgs l;
    l.x = a.x, l.x_stride = a.x_stride, l.bias = a.bias, l.bias_dtype = a.bias_dtype;
    l.y = a.y, l.y_stride = a.y_stride, l.T = a.T, l.N = a.N, l.K = a.K;
    linear_dequantized(l, [&a](int64_t n0, int64_t n1, float* out) {
        launch_dequantize_int4({a.w, n0, n1, a.K, out, a.K});
    });
}

}  // namespace pagoda::kernels::cpu
