// Device memory for sequence state: the paged KV pool of full-attention layers and the state-slot pool of
// linear-attention (Gated DeltaNet) layers. The engine deals only in block ids and slot ids; these own the memory.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "tensor/buffer.h"
#include "tensor/tensor.h"

namespace pagoda {

// --kv-cache-dtype, as vLLM spells it: auto (the backend's own: BF16 on a GPU, F32 on the CPU), bfloat16, or fp8 /
// fp8_e4m3 (OCP e4m3 with a per-tensor scale per layer for K and one for V).
enum class KvCacheDtype { kAuto, kBf16, kFp8E4M3 };
Result<KvCacheDtype> parse_kv_cache_dtype(std::string_view name);
std::string_view kv_cache_dtype_name(KvCacheDtype dtype);

// One layer's dequantisation scales of an fp8 cache: a value x is stored as e4m3(x · (1 / scale)) and read as
// stored · scale. 1.0 unless given (a checkpoint's k_scale / v_scale) or calculated: with `pending`, the first write
// that stores tokens sets them from those tokens' amax (amax / 448, vLLM's --calculate-kv-scales) and clears it.
// Host values, passed to the kernels by value: final after the first stored step, which is never a CUDA-graph step
// (a sequence's first tokens are a prefill chunk).
struct KvScales {
    float k = 1.0f, v = 1.0f;
    bool pending = false;
    // Per KV head factors ([num_kv_heads] F32 in the cache's device memory, owned by the model): a checkpoint's
    // per-attention-head scales (vLLM's k/v_scale = [num_kv_heads]), this rank's heads under tensor parallelism.
    // Head h is stored as e4m3(x · ((1 / k) / k_heads[h])) and read as stored · (k · k_heads[h]); null: k alone.
    // Calculated scales (pending) are one per layer: a pool that calculates them drops these.
    const float* k_heads = nullptr;
    const float* v_heads = nullptr;
};

// The largest finite e4m3 value: what amax maps to.
inline constexpr float kE4M3Max = 448.0f;
// Pending scales from the amax of the first rows stored: amax / 448 (1.0 for a tensor of zeros); no longer pending.
void settle_kv_scales(KvScales& scales, float amax_k, float amax_v);
// True when a write of tokens at slot_mapping sets pending scales: they are pending and it stores a token (the
// warm-up step and padding rows store none).
bool settles_kv_scales(const KvScales* scales, std::span<const int64_t> slot_mapping);

struct KvCacheConfig {
    int32_t num_layers = 0;  // number of full-attention layers (the model maps its layer index to 0..n-1)
    int32_t num_blocks = 0;
    int32_t block_size = 16;
    int32_t num_kv_heads = 0;
    int32_t head_dim = 0;
    DType dtype = DType::F32;  // F32 on CPU, BF16 on a GPU, or F8_E4M3 (either)
    // F8_E4M3 only: compute each layer's scales from the first stored tokens (else they start at 1.0, or at
    // layer_scales where given: one per layer).
    bool calculate_scales = false;
    std::vector<KvScales> layer_scales = {};
};

// One full-attention layer's view of the pool, what the attention ops take: caches
// [num_blocks, block_size, num_kv_heads, head_dim] and, for an fp8 cache, the layer's scales (null otherwise).
struct KvCacheLayer {
    Tensor key, value;
    KvScales* scales = nullptr;
};

class KvCachePool {
  public:
    static Result<KvCachePool> create(Allocator& allocator, const KvCacheConfig& config);
    static size_t bytes_per_block(const KvCacheConfig& config);  // over all layers, K and V

    const KvCacheConfig& config() const { return config_; }
    // [num_blocks, block_size, num_kv_heads, head_dim]
    Tensor key(int32_t layer) const;
    Tensor value(int32_t layer) const;
    KvCacheLayer layer(int32_t layer) const;
    // This pool's scales as they stand (fp8 only; 1.0 otherwise): what a log line or a test reads.
    KvScales scales(int32_t layer) const;

  private:
    KvCacheConfig config_;
    Buffer buffer_;
    std::unique_ptr<KvScales[]> scales_;  // [num_layers] for F8_E4M3; on the heap, so moving the pool keeps them put
};

struct StateCacheConfig {
    int32_t num_layers = 0;  // number of linear-attention layers
    int32_t num_slots = 0;   // sequences that can hold a state at once
    int32_t conv_dim = 0;    // 2*Hk*dk + Hv*dv
    int32_t conv_kernel = 4;
    int32_t num_v_heads = 0;
    int32_t k_head_dim = 0;
    int32_t v_head_dim = 0;
};

class StateCachePool {
  public:
    static Result<StateCachePool> create(Allocator& allocator, const StateCacheConfig& config);
    static size_t bytes_per_slot(const StateCacheConfig& config);  // over all layers

    const StateCacheConfig& config() const { return config_; }
    // F32 [num_slots, conv_dim, conv_kernel-1]
    Tensor conv_state(int32_t layer) const;
    // F32 [num_slots, num_v_heads, k_head_dim, v_head_dim]
    Tensor recurrent_state(int32_t layer) const;

  private:
    StateCacheConfig config_;
    Buffer buffer_;
};

}  // namespace pagoda
