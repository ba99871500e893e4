// NeoX (rotate-half) RoPE over the first rotary_dim dims of each head, from the caller's inverse frequencies. Angles
// are formed in fp32 the way transformers does (angle = float(pos) * inv_freq, cos and sin then times the attention
// factor) so long positions round alike.
#include <cmath>

#include "common/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/internal.h"

namespace pagoda::kernels::cpu {

void launch_rope(const RopeArgs& a) {
    PAGODA_CHECK(a.rotary_dim > 0 && a.rotary_dim % 2 == 0 && a.rotary_dim <= a.D);
    PAGODA_CHECK(a.inv_freq != nullptr);
    const int half = a.rotary_dim / 2;
    const float* inv_freq = a.inv_freq;
#pragma omp parallel for schedule(static) if (a.T * a.H * a.rotary_dim > kParallelMinWork)
    for (int64_t t = 0; t < a.T; ++t) {
        float* cs = scratch(2, static_cast<size_t>(2 * half));
        const float pos = static_cast<float>(a.positions[t]);
        for (int j = 0; j < half; ++j) {
            const float angle = pos * inv_freq[j];
            cs[j] = std::cos(angle) * a.attention_factor;
            cs[half + j] = std::sin(angle) * a.attention_factor;
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
