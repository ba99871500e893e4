// NeoX (rotate-half) RoPE over the first rotary_dim dims of each head. Angles are formed in fp32 the way
// transformers does (inv_freq = 1/theta^(2j/rot) in fp32, angle = float(pos) * inv_freq) so long positions round alike.
#include <cmath>

#include "common/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/internal.h"

namespace pagoda::kernels::cpu {

void launch_rope(const RopeArgs& a) {
    PAGODA_CHECK(a.rotary_dim > 0 && a.rotary_dim % 2 == 0 && a.rotary_dim <= a.D);
    const int half = a.rotary_dim / 2;
    float* inv_freq = scratch(1, static_cast<size_t>(half));
    for (int j = 0; j < half; ++j)
        inv_freq[j] = 1.0f / std::pow(a.theta, static_cast<float>(2 * j) / static_cast<float>(a.rotary_dim));
#pragma omp parallel for schedule(static) if (a.T * a.H * a.rotary_dim > kParallelMinWork)
    for (int64_t t = 0; t < a.T; ++t) {
        float* cs = scratch(2, static_cast<size_t>(2 * half));
        const float pos = static_cast<float>(a.positions[t]);
        for (int j = 0; j < half; ++j) {
            const float angle = pos * inv_freq[j];
            cs[j] = std::cos(angle);
            cs[half + j] = std::sin(angle);
        }
        for (int64_t h = 0; h < a.H; ++h) {
            float* x = a.x.data + t * a.x.stride_t + h * a.x.stride_h;
            for (int j = 0; j < half; ++j) {
                const float x0 = x[j], x1 = x[j + half];
                x[j] = x0 * cs[j] - x1 * cs[half + j];
                x[j + half] = x1 * cs[j] + x0 * cs[half + j];
            }
        }
    }
}

}  // namespace pagoda::kernels::cpu
