// Scalar math shared by the Gated DeltaNet kernels; written as the CPU kernels write it (kernels/cpu/internal.h).
#pragma once

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/delta_net/delta_net.h"

namespace pagoda::kernels::cuda::delta_net {

__device__ __forceinline__ float silu(float x) {
    return x / (1.0f + expf(-x));
}

__device__ __forceinline__ float sigmoid(float x) {
    return 1.0f / (1.0f + expf(-x));
}

// g = -exp(a_log) · softplus(a + dt_bias), softplus(x) = x above 20.
__device__ __forceinline__ float gdn_g(float a, float a_log, float dt_bias) {
    const float x = a + dt_bias;
    return -expf(a_log) * (x > 20.0f ? x : log1pf(expf(x)));
}

}  // namespace pagoda::kernels::cuda::delta_net
