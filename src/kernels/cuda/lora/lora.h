// CUDA launchers for multi-LoRA (runtime/lora.h): a step's tokens are grouped by adapter slot, and each group runs a
// shrink (u = scale · x · Aᵀ, rank values per token) then an expand (y[:, off:off+N] += u · Bᵀ) per slice of the
// projection. Gathered: the kernels read the group's rows of x and y through its token list, so nothing is copied.
#pragma once

#include "kernels/cuda/types.h"

namespace pagoda::kernels::cuda {

// u[i, j] = scale · Σ_k x[tokens[i], k] · a[j, k] for i < num_tokens, j < rank. a F32 [rank, K]; u F32 [num_tokens,
// rank] dense; tokens on the device.
struct LoraShrinkArgs {
    const float* x;
    int64_t x_stride;
    const float* a;
    int64_t rank, K;
    float scale;
    const int32_t* tokens;
    int64_t num_tokens;
    float* u;
};
void launch_lora_shrink(const LoraShrinkArgs& a, cudaStream_t stream);

// y[tokens[i], row_offset + n] += Σ_j u[i, j] · b[n, j] for n < N. b F32 [N, rank].
struct LoraExpandArgs {
    const float* u;
    const float* b;
    int64_t rank, N;
    float* y;
    int64_t y_stride, row_offset;
    const int32_t* tokens;
    int64_t num_tokens;
};
void launch_lora_expand(const LoraExpandArgs& a, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
