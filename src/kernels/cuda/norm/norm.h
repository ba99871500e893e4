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
};
void launch_rms_norm(const RmsNormArgs& a, cudaStream_t stream);

// The threads launch_rms_norm gives a block (one row of D): about four elements each, a multiple of 32, 32 to 1,024.
// A kernel that finishes a row's norm itself sums as a block of this many threads would (rms_row.cuh).
constexpr int rms_norm_threads(int64_t D) {
    const int64_t want = (D / 4 + 31) / 32 * 32;
    return static_cast<int>(want < 32 ? 32 : want > 1024 ? 1024 : want);
}

// The device words a kernel with a grid tail counts its blocks in (grid_tail.cuh): a top counter and kTailGroups group
// counters.
inline constexpr unsigned kTailGroups = 32;
inline constexpr unsigned kTailCounterWords = 1 + kTailGroups;

// add_rms_norm of one token finished by the kernel that computes the sub-layer's last projection (the GEMV, gemv.h):
// its output rows go to residual (residual[n] += y_n) instead of y, and the last of its blocks to finish normalises
// the whole residual into out as launch_rms_norm would, to the bit. counter: kTailCounterWords device words that are
// zero before the launch; the last block leaves them zero again.
struct ResidualNorm {
    float* residual = nullptr;  // [D]; null: no norm (the kernel writes y)
    float* out = nullptr;       // [D]
    const void* weight = nullptr;
    ElemType weight_type = ElemType::F32;
    float eps = 0.0f;
    bool zero_centred = false;
    unsigned* counter = nullptr;
};

// RMSNorm of one token's row worked out by the kernel that takes it as input (the MoE router's GEMV, gemv.h), as
// launch_rms_norm would (the same bits); out receives the normalised row for the ops after that kernel.
struct InputNorm {
    const float* residual = nullptr;  // [D]
    float* out = nullptr;             // [D]; null: no input norm
    const void* weight = nullptr;
    ElemType weight_type = ElemType::F32;
    float eps = 0.0f;
    bool zero_centred = false;
};

}  // namespace pagoda::kernels::cuda
