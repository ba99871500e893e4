// CUDA launchers for linear layers on few tokens (GEMV), the fp32 -> 16-bit input conversion before cuBLASLt, and the
// fp8 and int4 weight dequantisation before it.
#pragma once

#include "kernels/cuda/types.h"

namespace pagoda::kernels::cuda {

// y[n] = Σ_k x[k] · w[n, k] (+ bias[n]) for one token: reads the weights once, fp32 x. linear() takes it for
// kGemvTokens tokens and cuBLASLt for more: measured on an H200 with Qwen3-8B's projections, a GEMV over T tokens
// matches cuBLASLt at T = 1 only (qkv: 16.8 us; at T = 2 21.2 us and at T = 8 64 us, where cuBLASLt takes 16-17 us).
inline constexpr int64_t kGemvTokens = 1;
// Weight-only fp8 (w_type F8E4M3, with scales): each weight is dequantised as the GEMM path's bf16 copy of it,
// bf16(q · scale), and x is rounded to bf16, so one token gives what it would give in a batch.
struct GemvArgs {
    const float* x;  // [K]
    const void* w;
    ElemType w_type;
    int64_t w_stride;
    const void* bias;  // null or [N]
    ElemType bias_type;
    float* y;  // [N]
    int64_t N, K;
    WeightScales scales = {};  // fp8 weights only
    // 0, or the gated MLP fused (= N): w holds gate rows [0, N) and up rows [N, 2N), and y[n] = silu(gate_n) * up_n,
    // each sum taken as for a plain row, so y equals the GEMV of all 2N rows followed by silu_mul.
    int64_t glu_rows = 0;
    // Set (glu_rows 0): the rows are added to add_to[n] instead of written to y, each times sigmoid(add_gate[0]) where
    // add_gate is set (the gated shared expert's down projection, as sigmoid_mul then add).
    float* add_to = nullptr;
    const float* add_gate = nullptr;
    bool prefetch = true;  // set by launch_gemv: gemv_prefetch()
};
void launch_gemv(const GemvArgs& a, cudaStream_t stream);
// Whether the GEMV asks L2 for its first weights before its programmatic-launch wait, while the kernel before it runs
// (on by default; PAGODA_GEMV_PREFETCH=0 for measuring what it costs that kernel: the decode attention before the
// o projection shares HBM with the o projection's whole weight).
bool gemv_prefetch();
// The fewest output rows for which the GEMVs that stage x in shared memory (fp8, int4/int8) give each row one warp
// (8 rows a block) rather than four (2 rows a block). Each block stages the whole of x, so few rows a block read x
// again and again; with persistent blocks (below) x is staged once a block whatever the rows. Measured on an H100
// (session 26, Qwen3-8B shape, batch-1 decode with CUDA graphs, both settings together): fp8 1,024 (190.2 tok/s
// against 184.1 at 8,192; 1,024 without persistent blocks 179.7), int4/int8 8,192 (AWQ 181.0 against 178.9 at 1,024).
// PAGODA_GEMV_ONE_WARP_ROWS=N sets both.
int64_t staged_gemv_one_warp_rows(bool fp8);
// Those GEMVs take about as many blocks as fit the GPU at once, each staging x once and walking row groups
// blockIdx.x, + gridDim.x, ...; every row's sums are the same either way. On by default (the same runs: AWQ 181.0 tok/s
// against 163.0 without; fp8 with 1,024 one-warp rows as above); PAGODA_GEMV_PERSISTENT=0 turns it off.
bool staged_gemv_persistent();

// Weight-only fp8 for 1 to kGemvMmaTokens tokens on tensor cores (gemm/gemv_mma.cu): the same weights
// bf16(q · scale) and bf16-rounded x as launch_gemv's fp8 path, the products summed by mma.sync, or where its
// f16_products decides (by default one token) q exact in f16, f16 x and the scale on each chunk's sums; a's x and y are
// token 0's rows, the others x_stride and y_stride floats apart (glu_rows as above). Takes K a multiple of 64, scale
// blocks a multiple of 16 columns wide, 16-byte aligned weights and x rows: gemv_fp8_mma_fits.
inline constexpr int64_t kGemvMmaTokens = 8;
// How those GEMVs split K (the sums depend on both, never on the tokens):
// - the warps of a block: 8 (two blocks an SM), or 16 with PAGODA_GEMV_MMA_WARPS=16 (one block of twice the warps; an
//   experiment: on an H100 ahead on some one-token shapes, behind on others, session 28's op bench);
// - with 8, on sm_90, each 32-row tile over a cluster of 1, 2 or 4 blocks, each taking a share of K: by default the
//   largest whose blocks all fit the GPU at once (gemv_mma.cu's split_for), PAGODA_GEMV_MMA_SPLIT=1, 2 or 4 forces one.
int gemv_mma_warps();
bool gemv_fp8_mma_fits(const GemvArgs& a, int64_t T, int64_t x_stride);
void launch_gemv_fp8_mma(const GemvArgs& a, int64_t T, int64_t x_stride, int64_t y_stride, cudaStream_t stream);
// out[n, k] = bf16(q[n, k] · scale(n, k)) for an fp8 weight [N, K] (row stride w_stride): the bf16 weight the
// cuBLASLt GEMM takes for more tokens than the GEMV serves. out is dense [N, K].
struct DequantizeFp8Args {
    const void* w;
    int64_t w_stride;
    WeightScales scales;
    int64_t N, K;
    void* out;  // BF16 [N, K]
};
void launch_dequantize_fp8(const DequantizeFp8Args& a, cudaStream_t stream);

// An int4 weight [N, K] in LinearWeight's kInt4 layout: two unsigned 4-bit values per byte (even k in the low nibble),
// rows row_bytes apart; weight (n, k) = (q - zero) · scale with scale = scales[n * (K / group_size) + k / group_size]
// and zero = zeros[same] (8 where zeros is null: symmetric), the product rounded to round_to (F16 or BF16; F32: not
// rounded) as the format's own dequantisation computes it in its scales' dtype. bits 8: LinearWeight's kInt8 (GPTQ
// 8-bit), one unsigned value a byte, symmetric zero 128; the same kernels, templated on the bits.
struct Int4Weight {
    const void* data;
    int64_t row_bytes;
    const float* scales;
    const float* zeros;
    int64_t group_size;
    ElemType round_to;
    int bits = 4;  // 4 or 8
};

// y[n] = Σ_k x[k] · w(n, k) (+ bias[n]) for one token and an int4 (int8) weight: reads the packed bytes and the group
// scales and zeros once, dequantises in registers exactly as launch_dequantize_int4 writes the weight, bf16((q - zero)
// · scale), with x rounded to bf16 as the GEMM path's input: one token gives what it would give in a batch.
struct GemvInt4Args {
    const float* x;  // [K]
    Int4Weight w;
    const void* bias;  // null or [N]
    ElemType bias_type;
    float* y;  // [N]
    int64_t N, K;
    // As GemvArgs::glu_rows (N outputs silu(row n) · row n + glu_rows); launch_gemv_int4_mma only.
    int64_t glu_rows = 0;
};
void launch_gemv_int4(const GemvInt4Args& a, cudaStream_t stream);

// The int4 weights of launch_gemv_int4 (4 bits, round_to F16 or BF16) for 1 to kGemvMmaTokens tokens on tensor cores
// (gemm/gemv_mma.cu), dequantised exactly as there (with f16 scales by default the f16 products instead: q - zero
// exact in f16, the scale on each chunk's sums); x and y as launch_gemv_fp8_mma's. K a multiple of 128 and groups
// a multiple of 32 wide, 16-byte aligned rows and x: gemv_int4_mma_fits.
bool gemv_int4_mma_fits(const GemvInt4Args& a, int64_t T, int64_t x_stride);
void launch_gemv_int4_mma(const GemvInt4Args& a, int64_t T, int64_t x_stride, int64_t y_stride, cudaStream_t stream);

// out[n, k] = bf16((q(n, k) - zero) · scale) for an int4 (int8) weight: the bf16 weight the cuBLASLt GEMM takes for
// more tokens than the GEMV serves. out is dense [N, K].
struct DequantizeInt4Args {
    Int4Weight w;
    int64_t N, K;
    void* out;  // BF16 [N, K]
};
void launch_dequantize_int4(const DequantizeInt4Args& a, cudaStream_t stream);

// out[t, k] = x[t, perm[k]]: F32 [T, K] (row stride) -> dense F32 [T, K], the input of an act-order GPTQ weight in
// its layout's order (LinearWeight::input_perm: perm is device I32 [K], a permutation of [0, K)).
void launch_gather_columns(const float* x, int64_t x_stride, const int32_t* perm, float* out, int64_t T, int64_t K,
                           cudaStream_t stream);

// F32 [T, K] (row stride) -> dense BF16 or F16 [T, K]: the GEMM input of cuBLASLt.
void launch_convert_rows(const float* src, int64_t src_stride, void* dst, ElemType dst_type, int64_t T, int64_t K,
                         cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
