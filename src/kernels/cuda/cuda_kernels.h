// CUDA launchers for the Ops of a dense model: one plain function per op taking an args struct and a stream.
// No allocation inside; workspaces are passed in. Activations are F32 [T, N] (or [T, H, D]) with a contiguous last
// dimension and any outer strides, as the Ops contract (runtime/ops.h) says; weights and KV caches may be BF16/F16.
// Every launcher checks its launch and aborts with file:line on a CUDA error (a broken invariant, not user input).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/sampling_rows.h"

namespace pagoda::kernels::cuda {

enum class ElemType : uint8_t { F32, F16, BF16 };

// A [T, H, D] (or [T, D] with H = 1) F32 view: element (t, h, d) at data[t*stride_t + h*stride_h + d].
struct Rows {
    float* data = nullptr;
    int64_t stride_t = 0;
    int64_t stride_h = 0;
};

// --- embedding, elementwise, copies ----------------------------------------------------------------------------------
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
// out = op(a, b) over [T, N]; b may have one column (b_cols == 1, SigmoidMul only) broadcast over the row.
struct BinaryArgs {
    BinaryOp op;
    const float* a;
    int64_t a_stride;
    const float* b;
    int64_t b_stride, b_cols;
    float* out;
    int64_t out_stride, T, N;
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

// --- RMSNorm
// ----------------------------------------------------------------------------------------------------------- Per (t,
// h) row of D: if residual: residual += x, then normalise residual. out = x̂ · w (or (1 + w)); fp32 stats. x and out may
// alias.
struct RmsNormArgs {
    Rows x, out, residual;  // residual.data null when absent
    int64_t T, H, D;
    const void* weight;
    ElemType weight_type;
    float eps;
    bool zero_centred;
};
void launch_rms_norm(const RmsNormArgs& a, cudaStream_t stream);

// --- RoPE and the paged KV write -------------------------------------------------------------------------------------
inline constexpr int kMaxRotaryHalf = 256;
struct RopeArgs {
    Rows x;
    int64_t T, H, D;
    const int32_t* positions;  // device, [T]
    int rotary_dim;
    float inv_freq[kMaxRotaryHalf];  // computed on the host exactly as the CPU reference does
};
void launch_rope(const RopeArgs& a, cudaStream_t stream);

// Per-head RMSNorm (when norm is set) then RoPE, in place on q [T, Hq, D] and k [T, Hk, D]: one block per head row.
struct QkNormRopeArgs {
    Rows q, k;
    int64_t T;
    int Hq, Hk, D;
    bool norm;
    const void* q_weight;  // [D] each
    const void* k_weight;
    ElemType weight_type;
    float eps;
    bool zero_centred;
    const int32_t* positions;  // device, [T]
    int rotary_dim;
    float inv_freq[kMaxRotaryHalf];
    // With key_cache set, the finished k rows and the v rows [T, Hk, D] are also stored in the paged caches at
    // slot_mapping, exactly as launch_kv_write stores them (the whole attention prologue in one launch).
    Rows v;
    const int64_t* slot_mapping;  // device, [T]; negative = skip
    void* key_cache;
    void* value_cache;
    ElemType cache_type;
    int64_t num_slots;
};
void launch_qk_norm_rope(const QkNormRopeArgs& a, cudaStream_t stream);

struct KvWriteArgs {
    Rows k, v;
    int64_t T, H_kv, D;
    const int64_t* slot_mapping;  // device, [T]; negative = skip
    void* key_cache;
    void* value_cache;
    ElemType cache_type;
    int64_t num_slots;
};
void launch_kv_write(const KvWriteArgs& a, cudaStream_t stream);

// --- Linear
// ------------------------------------------------------------------------------------------------------------ y[t, n]
// = Σ_k x[t, k] · w[n, k] (+ bias[n]) for few tokens (T ≤ kGemvMaxTokens): reads the weights once, fp32 x.
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

// --- Paged attention -------------------------------------------------------------------------------------------------
// Causal attention of each new token over its sequence's context (cached prefix + new tokens) read from paged caches
// [num_blocks, block_size, H_kv, D]. With BF16 caches and head dims 64/128/256, sequences with one query token take
// a decode kernel (tensor cores, the GQA group as the rows of one tile, memory-bound) and longer ones a
// flash-attention kernel (tensor cores); both round Q and P to bf16 as FlashAttention does. Anything else takes the
// general CUDA-core kernel (fp32); long contexts with few blocks are split over the KV
// range (flash-decoding) and combined.
struct PagedAttentionArgs {
    Rows q, out;
    int64_t T;
    int H_q, H_kv, D;
    const void* key_cache;
    const void* value_cache;
    ElemType cache_type;
    int block_size, num_seqs, max_blocks_per_seq;
    const int32_t* query_start_loc;  // device, [S+1]
    const int32_t* seq_lens;         // device, [S]
    const int32_t* block_tables;     // device, [S * max_blocks_per_seq]
    float scale;
    int max_query_len;  // host-known bounds of the batch (grid size)
    int max_seq_len;
    bool has_decode_seqs = false;  // some sequence has exactly one query token (they get the decode kernel)
    int num_splits = 1;            // from plan_paged_attention
    float* workspace = nullptr;    // paged_attention_workspace_floats(...) floats when num_splits > 1
};
// Head dims with a kernel: 16, 32, 64, 128, 256.
bool paged_attention_supports_head_dim(int D);
// Picks num_splits for the batch (enough blocks to fill `sm_count` SMs) and returns it.
int plan_paged_attention_splits(const PagedAttentionArgs& a, int sm_count);
size_t paged_attention_workspace_floats(int64_t T, int H_q, int D, int num_splits);
// The most paged_attention_workspace_floats can be for any batch of these heads with splits planned for `sm_count`
// SMs: reserving it once means no step ever grows the workspace.
size_t paged_attention_workspace_bound_floats(int H_q, int H_kv, int D, int sm_count);
void launch_paged_attention(const PagedAttentionArgs& a, cudaStream_t stream);

// --- Sampling --------------------------------------------------------------------------------------------------------
// One SampledToken per SampleRow (kernels/sampling_rows.h), the CPU sampler's algorithm (engine/sampler.cpp). The
// sampled rows of `logits` are overwritten; edit_raw gets the raw value under each edit (same length as edits).
struct SampleArgs {
    float* logits;  // device, [R, V] with row stride
    int64_t stride, V;
    const SampleRow* rows;  // device, [num_rows]
    int32_t num_rows;
    const LogitEdit* edits;  // device
    float* edit_raw;         // device, one per edit
    SampledToken* out;       // device, [num_rows]
};
void launch_sample(const SampleArgs& a, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
