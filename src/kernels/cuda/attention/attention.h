// CUDA launchers for the attention family: RoPE, the attention prologue (QK-norm + RoPE + K/V store), the paged
// K/V write and paged attention (decode and prefill kernels, split-KV).
#pragma once

#include "kernels/cuda/types.h"

namespace pagoda::kernels::cuda {

inline constexpr int kMaxRotaryHalf = 256;
struct RopeArgs {
    Rows x;
    int64_t T, H, D;
    const int32_t* positions;  // device, [T]
    int rotary_dim;
    float inv_freq[kMaxRotaryHalf];  // the model's table (runtime/rope_table.h), as the CPU reference applies it
    float attention_factor;          // multiplies cos and sin (YaRN; 1 otherwise)
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
    float attention_factor;
    // With key_cache set, the finished k rows and the v rows [T, Hk, D] are also stored in the paged caches at
    // slot_mapping, exactly as launch_kv_write stores them (the whole attention prologue in one launch).
    Rows v;
    const int64_t* slot_mapping;  // device, [T]; negative = skip
    void* key_cache;
    void* value_cache;
    ElemType cache_type;
    int64_t num_slots;
    // F8E4M3 caches: rows are stored as e4m3(x · inv_scale) (quantize_e4m3: the CPU's rounding), with per-head
    // scales (device, [Hk]; KvScales::k_heads) as e4m3(x · (inv_scale / head_scale[h])).
    float k_inv_scale = 1.0f, v_inv_scale = 1.0f;
    const float* k_head_scale = nullptr;
    const float* v_head_scale = nullptr;
    // The rows' slots, positions, norm weights and rotations worked out before the programmatic-launch wait
    // (CudaOps' default, off with PAGODA_EARLY_LOADS=0; head_dim <= 256).
    bool early_loads = false;
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
    float k_inv_scale = 1.0f, v_inv_scale = 1.0f;  // F8E4M3 caches, as QkNormRopeArgs
    const float* k_head_scale = nullptr;
    const float* v_head_scale = nullptr;
};
void launch_kv_write(const KvWriteArgs& a, cudaStream_t stream);

// --calculate-kv-scales: amax[0] = max |k|, amax[1] = max |v| over the rows stored (slot_mapping >= 0) of k and v
// [T, H_kv, D] (the KvWriteArgs' rows; the caches are not touched). amax: 2 device floats.
void launch_kv_amax(const KvWriteArgs& a, float* amax, cudaStream_t stream);

// Causal attention of each new token over its sequence's context (cached prefix + new tokens) read from paged caches
// [num_blocks, block_size, H_kv, D] (F8E4M3 caches read as stored · k_scale / v_scale). With BF16 or F8E4M3 caches
// (e4m3 turned into bf16 as the tiles land in shared memory: exact; K's scale folded into Q, V's into the output)
// and head dims 64/128/256, sequences with one query token take
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
    float k_scale = 1.0f, v_scale = 1.0f;  // F8E4M3 caches' dequantisation scales
    // With per-head scales (device, [H_kv]): KV head h reads stored · k_scale · k_head_scale[h].
    const float* k_head_scale = nullptr;
    const float* v_head_scale = nullptr;
    int max_query_len;  // host-known bounds of the batch (grid size)
    int max_seq_len;
    bool has_decode_seqs = false;  // some sequence has exactly one query token (they get the decode kernel)
    int num_splits = 1;            // from plan_paged_attention
    float* workspace = nullptr;    // paged_attention_workspace_floats(...) floats when num_splits > 1
    // The decode kernel loads its sequence bounds, block table entries and its first tile's older keys before the
    // programmatic-launch wait (CudaOps' default, off with PAGODA_EARLY_LOADS=0).
    bool early_loads = false;
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

}  // namespace pagoda::kernels::cuda
