// CUDA launchers for linear layers on few tokens (GEMV) and the fp32 -> 16-bit input conversion before cuBLASLt.
#pragma once

#include "kernels/cuda/types.h"

namespace pagoda::kernels::cuda {

// y[t, n] = Σ_k x[t, k] · w[n, k] (+ bias[n]) for few tokens (T ≤ kGemvMaxTokens): reads the weights once, fp32 x.
inline constexpr int kGemvMaxTokens = 8;
struct GemvArgs {
    const float* x;
    int64_t x_stride;
    const void* w;
    ElemType w_type;
    int64_t w_stride;
    const void* bias;  // null or [N]
    ElemType bias_type;
    float* y;
    int64_t y_stride, T, N, K;
};
void launch_gemv(const GemvArgs& a, cudaStream_t stream);

// F32 [T, K] (row stride) -> dense BF16 or F16 [T, K]: the GEMM input of cuBLASLt.
void launch_convert_rows(const float* src, int64_t src_stride, void* dst, ElemType dst_type, int64_t T, int64_t K,
                         cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
