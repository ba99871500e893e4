// CUDA launchers for the element-wise ops, the embedding lookup, copies and row gathers, bias adds and argmax.
#pragma once

#include "kernels/cuda/types.h"

namespace pagoda::kernels::cuda {

struct EmbeddingArgs {
    const void* table;
    ElemType table_type;
    int64_t table_stride, V, H;
    const int32_t* ids;  // device, [T]
    int64_t T;
    float* out;
    int64_t out_stride;
};
void launch_embedding(const EmbeddingArgs& a, cudaStream_t stream);

enum class BinaryOp : uint8_t { SiluMul, SigmoidMul, Add };
// out = op(a, b) over [T, N], or over [T, H, N] when H > 1 (head strides given per operand: the gates interleaved
// with the queries of gated attention); b may have one column (b_cols == 1, SigmoidMul only) broadcast over the row.
struct BinaryArgs {
    BinaryOp op;
    const float* a;
    int64_t a_stride;
    const float* b;
    int64_t b_stride, b_cols;
    float* out;
    int64_t out_stride, T, N;
    int64_t H = 1, a_stride_h = 0, b_stride_h = 0, out_stride_h = 0;
    // When set (H == 1): out rounded to bf16 as launch_convert_rows rounds it, also written here packed [T, N], so the
    // GEMM that reads out next (the gated MLP's down projection) finds its input converted without another pass.
    void* out_bf16 = nullptr;
};
void launch_binary(const BinaryArgs& a, cudaStream_t stream);

// dst[i, :] = src[rows ? rows[i] : i, :] converting between float types; [T, N] with row strides.
struct CopyArgs {
    const void* src;
    ElemType src_type;
    int64_t src_stride;
    void* dst;
    ElemType dst_type;
    int64_t dst_stride, T, N;
    const int32_t* rows = nullptr;  // device, [T]
};
void launch_copy(const CopyArgs& a, cudaStream_t stream);

// y[t, n] += bias[n] over [T, N].
void launch_add_bias(float* y, int64_t y_stride, const void* bias, ElemType bias_type, int64_t T, int64_t N,
                     cudaStream_t stream);

// out[r] = first index of the maximum of logits[r, :].
void launch_argmax(const float* logits, int64_t stride, int64_t R, int64_t V, int32_t* out, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
