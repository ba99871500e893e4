// Weight-only fp8 (e4m3) on the CPU: the linear that is the reference the CUDA kernels are checked against, and the
// per-channel quantization of dense weights at load. The linear dequantises weight rows chunk by chunk into
// thread-local f32 scratch (linear_dequantized) and multiplies by the f32 GEMM/GEMV, so the numbers are those of an f32
// linear over the dequantised weight, which is what transformers computes when it loads an fp8 checkpoint on a machine
// without fp8 kernels.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>

#include <omp.h>

#include "common/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/internal.h"

namespace pagoda::kernels::cpu {

namespace {

void dequantize_rows(const DequantizeFp8Args& a, int64_t n0, int64_t n1) {
    const float* lut = e4m3_table().data();
    const Fp8Scales& s = a.scales;
    for (int64_t n = n0; n < n1; ++n) {
        const uint8_t* q = a.w + n * a.w_stride;
        const float* scale_row = s.data + (n / s.block_rows) * s.stride;
        float* out = a.out + (n - a.n0) * a.out_stride;
        for (int64_t k0 = 0; k0 < a.K; k0 += s.block_cols) {
            const float scale = scale_row[k0 / s.block_cols];
            const int64_t k1 = std::min(a.K, k0 + s.block_cols);
            for (int64_t k = k0; k < k1; ++k)
                out[k] = lut[q[k]] * scale;
        }
    }
}

}  // namespace

void launch_dequantize_fp8(const DequantizeFp8Args& a) {
    PAGODA_CHECK(a.w && a.out && a.scales.data && a.scales.block_rows > 0 && a.scales.block_cols > 0);
    const int64_t rows = a.n1 - a.n0;
    if (rows <= 0 || a.K <= 0) return;
    const int threads = rows * a.K < kParallelMinWork ? 1 : omp_get_max_threads();
#pragma omp parallel num_threads(threads)
    {
        const int nt = omp_get_num_threads(), id = omp_get_thread_num();
        dequantize_rows(a, a.n0 + rows * id / nt, a.n0 + rows * (id + 1) / nt);
    }
}

void launch_linear_fp8(const LinearFp8Args& a) {
    PAGODA_CHECK(a.x && a.w && a.y && a.K > 0);
    LinearArgs l;
    l.x = a.x, l.x_stride = a.x_stride, l.bias = a.bias, l.bias_dtype = a.bias_dtype;
    l.y = a.y, l.y_stride = a.y_stride, l.T = a.T, l.N = a.N, l.K = a.K;
    linear_dequantized(l, [&a](int64_t n0, int64_t n1, float* out) {
        DequantizeFp8Args d;
        d.w = a.w, d.w_stride = a.w_stride, d.scales = a.scales;
        d.n0 = n0, d.n1 = n1, d.K = a.K, d.out = out, d.out_stride = a.K;
        launch_dequantize_fp8(d);
    });
}

void launch_quantize_fp8_rows(const QuantizeFp8RowsArgs& a) {
    PAGODA_CHECK(a.w && a.q && a.scales);
    if (a.N <= 0 || a.K <= 0) return;
    const int threads = a.N * a.K < kParallelMinWork ? 1 : omp_get_max_threads();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t n = 0; n < a.N; ++n) {
        const int64_t row = n * a.w_stride;
        float amax = 0.0f;
        for (int64_t k = 0; k < a.K; ++k)
            amax = std::max(amax, std::fabs(load_as_f32(a.w, a.w_dtype, row + k)));
        const float scale = std::max(amax / 448.0f, 1e-12f);
        a.scales[n] = scale;
        for (int64_t k = 0; k < a.K; ++k)
            a.q[n * a.K + k] = f32_to_f8e4m3(load_as_f32(a.w, a.w_dtype, row + k) / scale);
    }
}

void launch_quantize_fp8_activations(const QuantizeFp8ActivationsArgs& a) {
    PAGODA_CHECK(a.x && a.out);
    if (a.T <= 0 || a.K <= 0) return;
    const int64_t group = a.group > 0 ? a.group : a.K;
    const int threads = a.T * a.K < kParallelMinWork ? 1 : omp_get_max_threads();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t t = 0; t < a.T; ++t) {
        const float* x = a.x + t * a.x_stride;
        float* out = a.out + t * a.K;
        for (int64_t k0 = 0; k0 < a.K; k0 += group) {
            const int64_t k1 = std::min(a.K, k0 + group);
            float amax = 0.0f;
            for (int64_t k = k0; k < k1; ++k)
                amax = std::max(amax, std::fabs(x[k]));
            const float scale = std::max(amax / 448.0f, 1e-12f);
            for (int64_t k = k0; k < k1; ++k)
                out[k] = f8e4m3_to_f32(f32_to_f8e4m3(x[k] / scale)) * scale;
        }
    }
}

}  // namespace pagoda::kernels::cpu
