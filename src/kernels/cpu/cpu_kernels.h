// CPU kernels: the math of every op as one plain launcher per op taking an args struct. Activations are fp32;
// weights may be bf16/f16/f32, or fp8-e4m3 / int4 with scales (dequantised, then the f32 path). Parallel with OpenMP
// over the machine's cores. No allocation visible to callers (scratch is thread-local and grows once). Strides are in
// elements.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace pagoda::kernels::cpu {

// The instruction-set variant the hot kernels run ("avx512", "avx2" or "baseline"); PAGODA_CPU_ISA caps it.
const char* active_isa();

// Reads element i of a float-typed array of any float dtype as f32.
float load_as_f32(const void* data, DType dtype, int64_t i);

struct EmbeddingArgs {
    const void* table = nullptr;  // [V, H] of table_dtype, row stride table_stride
    DType table_dtype = DType::BF16;
    int64_t table_stride = 0;
    int64_t vocab = 0, hidden = 0;
    const int32_t* ids = nullptr;  // [T]
    int64_t num_tokens = 0;
    float* out = nullptr;  // [T, H]
    int64_t out_stride = 0;
};
void launch_embedding(const EmbeddingArgs& a);

// Rows of D values addressed as x + t*stride_t + h*stride_h, t<T, h<H (H=1 for a plain [T, D] matrix).
struct RowsF32 {
    float* data = nullptr;
    int64_t stride_t = 0, stride_h = 0;
};

// out = norm(residual += x) if residual is set, else out = norm(x). norm = x̂·w or x̂·(1+w).
struct RmsNormArgs {
    RowsF32 x, out, residual;  // residual.data == nullptr: no residual add
    int64_t T = 0, H = 1, D = 0;
    const void* weight = nullptr;  // [D]
    DType weight_dtype = DType::F32;
    float eps = 1e-6f;
    bool zero_centred = false;
};
void launch_rms_norm(const RmsNormArgs& a);

// y[T, N] = x[T, K] · W[N, K]ᵀ (+ bias[N]).
struct LinearArgs {
    const float* x = nullptr;
    int64_t x_stride = 0;
    const void* w = nullptr;
    DType w_dtype = DType::BF16;
    int64_t w_stride = 0;  // elements between weight rows (K for a contiguous weight)
    const void* bias = nullptr;
    DType bias_dtype = DType::F32;
    float* y = nullptr;
    int64_t y_stride = 0;
    int64_t T = 0, N = 0, K = 0;
};
void launch_linear(const LinearArgs& a);

// The LoRA delta of one adapter on the tokens that use it: for t in tokens, y[t, row_offset + n] += scale ·
// Σ_j B[n, j] · (Σ_k A[j, k] · x[t, k]). A [rank, K] and B [N, rank] contiguous F32; rank <= kLoraMaxRank.
inline constexpr int64_t kLoraMaxRank = 512;
struct LoraDeltaArgs {
    const float* x = nullptr;
    int64_t x_stride = 0;
    float* y = nullptr;
    int64_t y_stride = 0;
    int64_t row_offset = 0;
    const float* a = nullptr;
    const float* b = nullptr;
    int64_t rank = 0, K = 0, N = 0;
    float scale = 1.0f;
    const int32_t* tokens = nullptr;
    int64_t num_tokens = 0;
};
void launch_lora_delta(const LoraDeltaArgs& a);

// The scales of an fp8 weight: weight (n, k) is q(n, k) · data[(n / block_rows) * stride + k / block_cols], one grid
// for per-tensor (one block, stride 0), per-channel (blocks of one row) and 128x128 block scales alike.
struct Fp8Scales {
    const float* data = nullptr;
    int64_t block_rows = 1, block_cols = 1, stride = 0;
};

// out[n - n0, :] = dequantised weight rows [n0, n1) of an F8_E4M3 [N, K] weight, in f32.
struct DequantizeFp8Args {
    const uint8_t* w = nullptr;
    int64_t w_stride = 0;
    Fp8Scales scales;
    int64_t n0 = 0, n1 = 0, K = 0;
    float* out = nullptr;
    int64_t out_stride = 0;
};
void launch_dequantize_fp8(const DequantizeFp8Args& a);

// y[T, N] = x[T, K] · dequant(W)[N, K]ᵀ (+ bias[N]) for an F8_E4M3 weight (weight-only: x stays f32). The reference
// path: chunks of weight rows are dequantised to f32 as transformers does (q · scale, one f32 product) and run
// through launch_linear.
struct LinearFp8Args {
    const float* x = nullptr;
    int64_t x_stride = 0;
    const uint8_t* w = nullptr;
    int64_t w_stride = 0;
    Fp8Scales scales;
    const void* bias = nullptr;
    DType bias_dtype = DType::F32;
    float* y = nullptr;
    int64_t y_stride = 0;
    int64_t T = 0, N = 0, K = 0;
};
void launch_linear_fp8(const LinearFp8Args& a);

// Per-channel e4m3 quantization of a dense [N, K] weight of any float dtype (--quantization fp8 at load):
// scales[n] = max(amax(row n) / 448, 1e-12), q[n, k] = e4m3(w[n, k] / scales[n]) rounded to nearest even; each step an
// f32 operation, so a torch reimplementation gets the same bytes.
struct QuantizeFp8RowsArgs {
    const void* w = nullptr;
    DType w_dtype = DType::BF16;
    int64_t w_stride = 0;
    int64_t N = 0, K = 0;
    uint8_t* q = nullptr;     // [N, K] contiguous
    float* scales = nullptr;  // [N]
};
void launch_quantize_fp8_rows(const QuantizeFp8RowsArgs& a);

// Dynamic fp8 activation quantization (LinearWeight::input_quant_group), as a quantize-dequantize: each row of x
// [T, K] in groups of `group` inputs (<= 0: the whole row; the last group may be shorter), scale = max(amax / 448,
// 1e-12), out = e4m3(x / scale) · scale with e4m3 rounding to nearest even and saturating (f32_to_f8e4m3), each step
// an f32 operation: the values the CUDA W8A8 GEMM multiplies (its fp8 input times its scale), which the CUDA
// quantization kernel computes the same way.
struct QuantizeFp8ActivationsArgs {
    const float* x = nullptr;
    int64_t x_stride = 0;
    float* out = nullptr;  // [T, K] contiguous
    int64_t T = 0, K = 0, group = 0;
};
void launch_quantize_fp8_activations(const QuantizeFp8ActivationsArgs& a);

// An int4 weight [N, K] as LinearWeight's kInt4 holds it: two unsigned 4-bit values per byte (even k in the low
// nibble), row stride `row_bytes`; weight (n, k) = (q(n, k) - zero) · scale with scale = scales[n * groups + k / group]
// and zero = zeros[same] (8 where zeros is null: symmetric), the product rounded to `round_to` (F16, BF16; F32: not
// rounded) as the format's own dequantisation computes it in its scales' dtype. bits 8: kInt8, one unsigned value a
// byte, symmetric zero 128 (the linear only: MoE experts are int4).
struct Int4Weight {
    const uint8_t* data = nullptr;
    int64_t row_bytes = 0;
    const float* scales = nullptr;
    const float* zeros = nullptr;
    int64_t group_size = 0, groups = 0;  // groups per row: K / group_size
    DType round_to = DType::F32;
    int bits = 4;
};

// out[n - n0, :] = dequantised rows [n0, n1) of an int4 weight, in f32: (q - zero) · scale, one f32 subtraction (exact)
// and one product, rounded to round_to.
struct DequantizeInt4Args {
    Int4Weight w;
    int64_t n0 = 0, n1 = 0, K = 0;
    float* out = nullptr;
    int64_t out_stride = 0;
};
void launch_dequantize_int4(const DequantizeInt4Args& a);

// y[T, N] = x[T, K] · dequant(W)[N, K]ᵀ (+ bias[N]) for an int4 (or int8) weight (weight-only: x stays f32), by chunks
// of dequantised rows as launch_linear_fp8.
struct LinearInt4Args {
    const float* x = nullptr;
    int64_t x_stride = 0;
    Int4Weight w;
    const void* bias = nullptr;
    DType bias_dtype = DType::F32;
    float* y = nullptr;
    int64_t y_stride = 0;
    int64_t T = 0, N = 0, K = 0;
};
void launch_linear_int4(const LinearInt4Args& a);

struct RopeArgs {
    RowsF32 x;
    int64_t T = 0, H = 0, D = 0;
    const int32_t* positions = nullptr;  // [T]
    int rotary_dim = 0;
    const float* inv_freq = nullptr;  // [rotary_dim / 2]: angle = position * inv_freq[j]
    float attention_factor = 1.0f;    // multiplies cos and sin (YaRN)
};
void launch_rope(const RopeArgs& a);

// Paged layout shared by write and attention: cache[block][offset][head][d], contiguous. Caches hold F32, or with
// fp8 set e4m3 bytes: stored = e4m3(x · inv_scale) (round to nearest even, saturating at ±448, as f32_to_f8e4m3 and
// the CUDA writes round), read back as stored · scale.
struct PagedKvWriteArgs {
    const float* k = nullptr;
    const float* v = nullptr;
    int64_t k_stride_t = 0, k_stride_h = 0, v_stride_t = 0, v_stride_h = 0;
    int64_t T = 0, H_kv = 0, D = 0;
    const int64_t* slot_mapping = nullptr;  // [T]
    void* key_cache = nullptr;
    void* value_cache = nullptr;
    int64_t num_slots = 0;  // num_blocks * block_size (bounds check)
    bool fp8 = false;
    float k_inv_scale = 1.0f, v_inv_scale = 1.0f;
    // fp8 with per-head scales: head h is stored as x · (k_inv_scale / k_head_scales[h]) (KvScales::k_heads).
    const float* k_head_scales = nullptr;
    const float* v_head_scales = nullptr;
};
void launch_paged_kv_write(const PagedKvWriteArgs& a);

// The largest |x| over the rows of k and of v [T, H_kv, D] that are stored (slot >= 0): what --calculate-kv-scales
// derives a layer's scales from. {0, 0} when no row is stored.
struct KvAmax {
    float k = 0.0f, v = 0.0f;
};
KvAmax paged_kv_amax(const PagedKvWriteArgs& a);

struct PagedAttentionArgs {
    RowsF32 q, out;
    int64_t H_q = 0, H_kv = 0, D = 0;
    const void* key_cache = nullptr;  // F32, or e4m3 with fp8 (dequantised with k_scale / v_scale)
    const void* value_cache = nullptr;
    bool fp8 = false;
    float k_scale = 1.0f, v_scale = 1.0f;
    const float* k_head_scales =
        nullptr;  // fp8 with per-head scales: KV head h reads stored · k_scale · k_head_scales[h]
    const float* v_head_scales = nullptr;
    int32_t block_size = 16;
    int64_t num_blocks = 0;
    int32_t num_seqs = 0;
    const int32_t* query_start_loc = nullptr;  // [S+1]
    const int32_t* seq_lens = nullptr;         // [S]
    const int32_t* block_tables = nullptr;     // [S, max_blocks_per_seq]
    int32_t max_blocks_per_seq = 0;
    float scale = 1.0f;
};
void launch_paged_attention(const PagedAttentionArgs& a);

// Elementwise over [T, N] rows, or [T, H, N] when H > 1 (row and head strides given per operand).
enum class ElementwiseOp : uint8_t {
    SiluMul,     // out = silu(a) * b
    SigmoidMul,  // out = a * sigmoid(b); b may broadcast one value per row (b_cols == 1)
    Add,         // out = a + b
};
struct ElementwiseArgs {
    ElementwiseOp op = ElementwiseOp::Add;
    const float* a = nullptr;
    int64_t a_stride = 0;
    const float* b = nullptr;
    int64_t b_stride = 0;
    int64_t b_cols = 0;  // N, or 1 for a per-row broadcast
    float* out = nullptr;
    int64_t out_stride = 0;
    int64_t T = 0, N = 0;
    int64_t H = 1, a_stride_h = 0, b_stride_h = 0, out_stride_h = 0;
};
void launch_elementwise(const ElementwiseArgs& a);

// dst[T, N] = src[T, N] converting between float dtypes (F32/BF16/F16).
struct CopyArgs {
    const void* src = nullptr;
    DType src_dtype = DType::F32;
    int64_t src_stride = 0;
    void* dst = nullptr;
    DType dst_dtype = DType::F32;
    int64_t dst_stride = 0;
    int64_t T = 0, N = 0;
    const int32_t* rows = nullptr;  // optional gather: dst row i = src row rows[i]
};
void launch_copy(const CopyArgs& a);

struct TopkSoftmaxArgs {
    const float* logits = nullptr;  // [T, E]
    int64_t logits_stride = 0;
    int64_t T = 0, E = 0, k = 0;
    bool normalize = true;
    float* weights = nullptr;  // [T, k] contiguous
    int32_t* ids = nullptr;    // [T, k] contiguous
};
void launch_topk_softmax(const TopkSoftmaxArgs& a);

// The weights of all experts as one [E, rows, cols] tensor (strides in elements; the last dim contiguous).
struct StackedWeight {
    const void* data = nullptr;
    DType dtype = DType::BF16;
    int64_t expert_stride = 0;
    int64_t row_stride = 0;
    // F8_E4M3 weights: expert 0's scale grid (per channel or in blocks), each next expert's scale_expert_stride floats
    // further. Gate and up halves each start at a block row (the loader checks).
    Fp8Scales scales;
    int64_t scale_expert_stride = 0;
    // U8 weights are int4 (LinearWeight's kInt4 layout, rows of row_stride bytes): expert 0's group scales and zero
    // points (int4.data unused); each next expert's scale_expert_stride floats further.
    Int4Weight int4;
};
// out[T, H] = Σ_j w[t,j] · down_e(silu(gate_e x) ⊙ up_e x). Tokens are grouped per expert so each expert's
// weights are read once per call; fp8 and int4 experts are dequantised expert by expert, rows as the dense linears'.
struct MoeExpertsArgs {
    const float* x = nullptr;
    int64_t x_stride = 0;
    int64_t T = 0, H = 0, I = 0, E = 0, k = 0;
    const float* topk_weights = nullptr;  // [T, k]
    const int32_t* topk_ids = nullptr;    // [T, k]
    StackedWeight gate_up;                // [E, 2I, H]: rows [0, I) gate, [I, 2I) up
    StackedWeight down;                   // [E, H, I]
    float* out = nullptr;
    int64_t out_stride = 0;
    // Expert parallelism: the stacks are experts [first_expert, first_expert + E) of num_experts (0: E); ids must be
    // in [0, num_experts), and those outside the stacks contribute nothing.
    int64_t first_expert = 0;
    int64_t num_experts = 0;
};
void launch_moe_experts(const MoeExpertsArgs& a);

// Per-sequence metadata the Gated DeltaNet kernels need.
struct SeqInfo {
    int32_t num_seqs = 0;
    const int32_t* query_start_loc = nullptr;  // [S+1]
    const int32_t* seq_lens = nullptr;         // [S]
    const int32_t* state_slots = nullptr;      // [S]
};

struct CausalConv1dArgs {
    const float* x = nullptr;
    int64_t x_stride = 0;
    float* out = nullptr;
    int64_t out_stride = 0;
    int64_t C = 0, K = 4;
    const void* weight = nullptr;  // [C, K]
    DType weight_dtype = DType::BF16;
    float* conv_state = nullptr;  // [slots, C, K-1]
    int64_t num_slots = 0;
    SeqInfo seqs;
};
void launch_causal_conv1d_silu(const CausalConv1dArgs& a);

struct GdnGatingArgs {
    const float* a = nullptr;
    int64_t a_stride = 0;
    const float* b = nullptr;
    int64_t b_stride = 0;
    const void* a_log = nullptr;
    DType a_log_dtype = DType::F32;
    const void* dt_bias = nullptr;
    DType dt_bias_dtype = DType::F32;
    float* g = nullptr;
    int64_t g_stride = 0;
    float* beta = nullptr;
    int64_t beta_stride = 0;
    int64_t T = 0, H = 0;
};
void launch_gdn_gating(const GdnGatingArgs& a);

struct L2NormArgs {
    RowsF32 x;
    int64_t T = 0, H = 0, D = 0;
    float eps = 1e-6f;
};
void launch_l2_norm(const L2NormArgs& a);

struct DeltaRuleArgs {
    RowsF32 q, k, v, out;  // q,k: [T, Hk, dk]; v, out: [T, Hv, dv]
    const float* g = nullptr;
    int64_t g_stride = 0;  // [T, Hv]
    const float* beta = nullptr;
    int64_t beta_stride = 0;
    int64_t Hk = 0, Hv = 0, dk = 0, dv = 0;
    float q_scale = 1.0f;
    float* state = nullptr;  // [slots, Hv, dk, dv]
    int64_t num_slots = 0;
    SeqInfo seqs;
    int mode = 0;  // 0 auto (chunked when a sequence has > 1 new token), 1 recurrent, 2 chunked
    int chunk_size = 64;
};
void launch_gated_delta_rule(const DeltaRuleArgs& a);

struct GatedRmsNormArgs {
    RowsF32 x, z, out;
    int64_t T = 0, H = 0, D = 0;
    const void* weight = nullptr;
    DType weight_dtype = DType::F32;
    float eps = 1e-6f;
};
void launch_gated_rms_norm(const GatedRmsNormArgs& a);

struct ArgmaxArgs {
    const float* logits = nullptr;
    int64_t stride = 0;
    int64_t R = 0, V = 0;
    int32_t* out = nullptr;
};
void launch_argmax(const ArgmaxArgs& a);

}  // namespace pagoda::kernels::cpu
