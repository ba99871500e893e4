// The LoRA delta of one adapter on its tokens (the reference every other backend is checked against): per token,
// u = x · Aᵀ (r values, fp32), then y[row_offset + n] += scale · Σ_j B[n, j] u[j].
#include <omp.h>

#include "kernels/cpu/cpu_kernels.h"

namespace pagoda::kernels::cpu {

void launch_lora_delta(const LoraDeltaArgs& a) {
    if (a.num_tokens <= 0 || a.N <= 0) return;
#pragma omp parallel for schedule(static) if (a.num_tokens * a.N * a.rank > 65536)
    for (int64_t i = 0; i < a.num_tokens; ++i) {
        const int64_t t = a.tokens[i];
        const float* x = a.x + t * a.x_stride;
        float u[kLoraMaxRank];
        for (int64_t j = 0; j < a.rank; ++j) {
            const float* arow = a.a + j * a.K;
            float acc = 0.0f;
            for (int64_t k = 0; k < a.K; ++k)
                acc += x[k] * arow[k];
            u[j] = acc * a.scale;
        }
        float* y = a.y + t * a.y_stride + a.row_offset;
        for (int64_t n = 0; n < a.N; ++n) {
            const float* brow = a.b + n * a.rank;
            float acc = 0.0f;
            for (int64_t j = 0; j < a.rank; ++j)
                acc += brow[j] * u[j];
            y[n] += acc;
        }
    }
}

}  // namespace pagoda::kernels::cpu
