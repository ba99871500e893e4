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
    bool early_loads = false;  // the weights loaded before the programmatic-launch wait (unless PAGODA_EARLY_LOADS=0)
    // When set (H == 1): out rounded to bf16 as launch_convert_rows rounds it, also written here packed [T, D], so the
    // GEMMs that read out next (q/k/v, gate/up) find their input converted without another pass.
    void* out_bf16 = nullptr;
};
void launch_rms_norm(const RmsNormArgs& a, cudaStream_t stream);

// The threads launch_rms_norm gives a block (one row of D): about four elements each, a multiple of 32, 32 to 1,024.
constexpr int rms_norm_threads(int64_t D) {
    const int64_t want = (D / 4 + 31) / 32 * 32;
    return static_cast<int>(want < 32 ? 32 : want > 1024 ? 1024 : want);
}

}  // namespace pagoda::kernels::cuda
