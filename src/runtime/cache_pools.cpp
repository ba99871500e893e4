// KV block pool and linear-attention state-slot pool: one allocation each, carved into per-layer views.
#include "runtime/cache_pools.h"

#include <string>

#include "common/check.h"

namespace pagoda {

namespace {
int64_t kv_layer_elems(const KvCacheConfig& c) {
    return static_cast<int64_t>(c.num_blocks) * c.block_size * c.num_kv_heads * c.head_dim;
}
int64_t conv_elems(const StateCacheConfig& c) {
    return static_cast<int64_t>(c.num_slots) * c.conv_dim * (c.conv_kernel - 1);
}
int64_t recurrent_elems(const StateCacheConfig& c) {
    return static_cast<int64_t>(c.num_slots) * c.num_v_heads * c.k_head_dim * c.v_head_dim;
}
}  // namespace

size_t KvCachePool::bytes_per_block(const KvCacheConfig& c) {
    return 2 * static_cast<size_t>(c.num_layers) * c.block_size * c.num_kv_heads * c.head_dim * dtype_size(c.dtype);
}

Result<KvCachePool> KvCachePool::create(Allocator& allocator, const KvCacheConfig& config) {
    if (config.num_layers < 0 || config.num_blocks <= 0 || config.block_size <= 0 || config.num_kv_heads <= 0 ||
        config.head_dim <= 0)
        return Status::error("invalid KV cache configuration");
    KvCachePool pool;
    pool.config_ = config;
    const size_t bytes = bytes_per_block(config) * static_cast<size_t>(config.num_blocks);
    auto buffer = Buffer::allocate(allocator, bytes);
    if (!buffer.ok())
        return buffer.status().with_context("KV cache of " + std::to_string(config.num_blocks) + " blocks");
    pool.buffer_ = std::move(buffer).value();
    return pool;
}

Tensor KvCachePool::key(int32_t layer) const {
    PAGODA_CHECK(layer >= 0 && layer < config_.num_layers);
    const int64_t elems = kv_layer_elems(config_);
    char* base =
        static_cast<char*>(buffer_.data()) + 2 * layer * elems * static_cast<int64_t>(dtype_size(config_.dtype));
    return Tensor(base, config_.dtype, {config_.num_blocks, config_.block_size, config_.num_kv_heads, config_.head_dim},
                  buffer_.device());
}

Tensor KvCachePool::value(int32_t layer) const {
    PAGODA_CHECK(layer >= 0 && layer < config_.num_layers);
    const int64_t elems = kv_layer_elems(config_);
    char* base =
        static_cast<char*>(buffer_.data()) + (2 * layer + 1) * elems * static_cast<int64_t>(dtype_size(config_.dtype));
    return Tensor(base, config_.dtype, {config_.num_blocks, config_.block_size, config_.num_kv_heads, config_.head_dim},
                  buffer_.device());
}

size_t StateCachePool::bytes_per_slot(const StateCacheConfig& c) {
    const size_t per_layer = static_cast<size_t>(c.conv_dim) * (c.conv_kernel - 1) +
                             static_cast<size_t>(c.num_v_heads) * c.k_head_dim * c.v_head_dim;
    return per_layer * c.num_layers * sizeof(float);
}

Result<StateCachePool> StateCachePool::create(Allocator& allocator, const StateCacheConfig& config) {
    if (config.num_layers < 0 || config.num_slots <= 0 || config.conv_dim <= 0 || config.conv_kernel < 2 ||
        config.num_v_heads <= 0 || config.k_head_dim <= 0 || config.v_head_dim <= 0)
        return Status::error("invalid linear-attention state configuration");
    StateCachePool pool;
    pool.config_ = config;
    auto buffer = Buffer::allocate(allocator, bytes_per_slot(config) * static_cast<size_t>(config.num_slots));
    if (!buffer.ok())
        return buffer.status().with_context("state cache of " + std::to_string(config.num_slots) + " slots");
    pool.buffer_ = std::move(buffer).value();
    return pool;
}

Tensor StateCachePool::conv_state(int32_t layer) const {
    PAGODA_CHECK(layer >= 0 && layer < config_.num_layers);
    const int64_t per_layer = conv_elems(config_) + recurrent_elems(config_);
    float* base = static_cast<float*>(buffer_.data()) + layer * per_layer;
    return Tensor(base, DType::F32, {config_.num_slots, config_.conv_dim, config_.conv_kernel - 1}, buffer_.device());
}

Tensor StateCachePool::recurrent_state(int32_t layer) const {
    PAGODA_CHECK(layer >= 0 && layer < config_.num_layers);
    const int64_t per_layer = conv_elems(config_) + recurrent_elems(config_);
    float* base = static_cast<float*>(buffer_.data()) + layer * per_layer + conv_elems(config_);
    return Tensor(base, DType::F32, {config_.num_slots, config_.num_v_heads, config_.k_head_dim, config_.v_head_dim},
                  buffer_.device());
}

}  // namespace pagoda
