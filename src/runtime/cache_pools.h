// Device memory for sequence state: the paged KV pool of full-attention layers and the state-slot pool of
// linear-attention (Gated DeltaNet) layers. The engine deals only in block ids and slot ids; these own the memory.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "tensor/buffer.h"
#include "tensor/tensor.h"

namespace pagoda {

struct KvCacheConfig {
    int32_t num_layers = 0;  // number of full-attention layers (the model maps its layer index to 0..n-1)
    int32_t num_blocks = 0;
    int32_t block_size = 16;
    int32_t num_kv_heads = 0;
    int32_t head_dim = 0;
    DType dtype = DType::F32;  // F32 on CPU
};

class KvCachePool {
  public:
    static Result<KvCachePool> create(Allocator& allocator, const KvCacheConfig& config);
    static size_t bytes_per_block(const KvCacheConfig& config);  // over all layers, K and V

    const KvCacheConfig& config() const { return config_; }
    // [num_blocks, block_size, num_kv_heads, head_dim]
    Tensor key(int32_t layer) const;
    Tensor value(int32_t layer) const;

  private:
    KvCacheConfig config_;
    Buffer buffer_;
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
