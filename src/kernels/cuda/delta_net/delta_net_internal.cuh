// Scalar math shared by the Gated DeltaNet kernels, written as the CPU kernels write it (kernels/cpu/internal.h);
// silu and sigmoid are common.cuh's.
#pragma once

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/delta_net/delta_net.h"

namespace pagoda::kernels::cuda::delta_net {

// g = -exp(a_log) · softplus(a + dt_bias), softplus(x) = x above 20.
__device__ __forceinline__ float gdn_g(float a, float a_log, float dt_bias) {
    const float x = a + dt_bias;
    return -expf(a_log) * (x > 20.0f ? x : log1pf(expf(x)));
}

}  // namespace pagoda::kernels::cuda::delta_net
