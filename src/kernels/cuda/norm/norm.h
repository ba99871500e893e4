// CUDA launcher for RMSNorm: per row or per head, optionally fused with the residual add.
#pragma once

#include "kernels/cuda/types.h"

namespace pagoda::kernels::cuda {

// Per (t, h) row of D: if residual: residual += x, then normalise residual. out = x̂ · w (or (1 + w)); fp32 stats.
// x and out may alias.
struct RmsNormArgs {
    Rows x, out, residual;  // residual.data null when absent
    int64_t T, H, D;
    const void* weight;
    ElemType weight_type;
    float eps;
    bool zero_centred;
};
void launch_rms_norm(const RmsNormArgs& a, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
