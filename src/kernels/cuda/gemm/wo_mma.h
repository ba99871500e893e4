// The weight-only GEMM for a few tokens: fp8, int4 and int8 weights read as stored, dequantised tile by tile into
// shared memory and multiplied on tensor cores. Between the one-token GEMVs (gemv.h) and the whole-weight bf16 copy +
// cuBLASLt that many tokens amortise: a decode step of a few sequences reads each quantized weight once (1 or 0.5
// bytes a weight) instead of reading it, writing its bf16 copy and reading that (5 or 4.5 bytes).
#pragma once

#include "kernels/cuda/gemm/gemv.h"

namespace pagoda::kernels::cuda {

// y[t, n] = Σ_k x[t, k] · w(n, k) for t < T, n < N. x is BF16 [T, K] (row stride ldx), as the cuBLASLt path's
// converted input; each weight is dequantised exactly as that path's bf16 copy holds it (bf16(q · scale) for fp8,
// dequantize_int4 for int4/int8), so the two paths differ only in the order of their fp32 sums. K is cut into
// `splits` ranges whose partial sums go to `workspace` ([splits, T, N] fp32) and are added in a fixed order:
// deterministic, and enough blocks for a few tokens to fill the GPU.
struct WoMmaArgs {
    const void* x;  // BF16
    int64_t ldx;
    // The weight: fp8 (w non-null; e4m3 [N, K] with row stride w_stride and its scales), else int4/int8 (int_w).
    const void* w = nullptr;
    int64_t w_stride = 0;
    WeightScales scales = {};
    Int4Weight int_w = {};
    float* y;
    int64_t ldy;
    int64_t T, N, K;
    int splits = 1;
    float* workspace = nullptr;  // splits * T * N floats when splits > 1
};

// Whether the kernel takes this weight and input: K a multiple of 32, 16-byte rows and input, scale blocks (fp8) and
// groups (int) of a multiple of 16 weights. Otherwise the caller keeps the bf16 copy + cuBLASLt.
bool wo_mma_fits(const WoMmaArgs& a);
// The K ranges for T tokens of an [N, K] weight on `sm_count` SMs (about two blocks an SM), and the workspace it needs.
int plan_wo_mma_splits(int64_t T, int64_t N, int64_t K, int sm_count);
inline size_t wo_mma_workspace_floats(int64_t T, int64_t N, int splits) {
    return splits > 1 ? static_cast<size_t>(splits) * static_cast<size_t>(T * N) : 0;
}
void launch_wo_mma(const WoMmaArgs& a, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
