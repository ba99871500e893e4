// RMSNorm (plain and zero-centred, optionally fused with the residual add), gated RMSNorm and L2 norm.
#include <cmath>

#include "common/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/internal.h"

namespace pagoda::kernels::cpu {

namespace {
PAGODA_INLINE float* row(const RowsF32& r, int64_t t, int64_t h) {
    return r.data + t * r.stride_t + h * r.stride_h;
}

PAGODA_INLINE float inv_rms(const float* x, int64_t D, float eps) {
    double ss = 0.0;  // double: rows of 5120 values keep full fp32 precision in the statistic
    for (int64_t d = 0; d < D; ++d)
        ss += static_cast<double>(x[d]) * x[d];
    return static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(D) + eps));
}
}  // namespace

void launch_rms_norm(const RmsNormArgs& a) {
    PAGODA_CHECK(a.x.data && a.out.data && a.weight && a.D > 0);
    float* w = scratch(1, static_cast<size_t>(a.D));
    to_f32(a.weight, a.weight_dtype, a.D, w);
    if (a.zero_centred)
        for (int64_t d = 0; d < a.D; ++d)
            w[d] += 1.0f;
    const int64_t rows = a.T * a.H;
#pragma omp parallel for schedule(static) if (rows * a.D > kParallelMinWork)
    for (int64_t i = 0; i < rows; ++i) {
        const int64_t t = i / a.H, h = i % a.H;
        const float* x = row(a.x, t, h);
        if (a.residual.data) {
            float* r = row(a.residual, t, h);
            for (int64_t d = 0; d < a.D; ++d)
                r[d] += x[d];
            x = r;
        }
        const float s = inv_rms(x, a.D, a.eps);
        float* o = row(a.out, t, h);
        for (int64_t d = 0; d < a.D; ++d)
            o[d] = x[d] * s * w[d];
    }
}

void launch_gated_rms_norm(const GatedRmsNormArgs& a) {
    PAGODA_CHECK(a.x.data && a.z.data && a.out.data && a.weight);
    float* w = scratch(1, static_cast<size_t>(a.D));
    to_f32(a.weight, a.weight_dtype, a.D, w);
    const int64_t rows = a.T * a.H;
#pragma omp parallel for schedule(static) if (rows * a.D > kParallelMinWork)
    for (int64_t i = 0; i < rows; ++i) {
        const int64_t t = i / a.H, h = i % a.H;
        const float* x = row(a.x, t, h);
        const float* z = row(a.z, t, h);
        float* o = row(a.out, t, h);
        const float s = inv_rms(x, a.D, a.eps);
        for (int64_t d = 0; d < a.D; ++d)
            o[d] = x[d] * s * w[d] * silu(z[d]);
    }
}

void launch_l2_norm(const L2NormArgs& a) {
    const int64_t rows = a.T * a.H;
#pragma omp parallel for schedule(static) if (rows * a.D > kParallelMinWork)
    for (int64_t i = 0; i < rows; ++i) {
        float* x = row(a.x, i / a.H, i % a.H);
        double ss = 0.0;
        for (int64_t d = 0; d < a.D; ++d)
            ss += static_cast<double>(x[d]) * x[d];
        const float s = static_cast<float>(1.0 / std::sqrt(ss + a.eps));
        for (int64_t d = 0; d < a.D; ++d)
            x[d] *= s;
    }
}

}  // namespace pagoda::kernels::cpu
