// KV block pool and linear-attention state-slot pool: one allocation each, carved into per-layer views.
#include "runtime/cache_pools.h"

#include <algorithm>
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

Result<KvCacheDtype> parse_kv_cache_dtype(std::string_view name) {
    if (name == "auto") return KvCacheDtype::kAuto;
    if (name == "bfloat16" || name == "bf16") return KvCacheDtype::kBf16;
    if (name == "fp8" || name == "fp8_e4m3") return KvCacheDtype::kFp8E4M3;
    if (name == "fp8_e5m2")
        return Status::error(
            "--kv-cache-dtype fp8_e5m2 is not supported: use fp8 (e4m3, the format vLLM uses on "
            "NVIDIA GPUs and the one checkpoints' kv_cache_scheme calibrates for)");
    return Status::error("--kv-cache-dtype " + std::string(name) + " is not one of auto, bfloat16, fp8, fp8_e4m3");
}

std::string_view kv_cache_dtype_name(KvCacheDtype dtype) {
    switch (dtype) {
        case KvCacheDtype::kBf16:
            return "bfloat16";
        case KvCacheDtype::kFp8E4M3:
            return "fp8_e4m3";
        default:
            return "auto";
    }
}

void settle_kv_scales(KvScales& scales, float amax_k, float amax_v) {
    scales.k = amax_k > 0.0f ? amax_k / kE4M3Max : 1.0f;
    scales.v = amax_v > 0.0f ? amax_v / kE4M3Max : 1.0f;
    scales.pending = false;
}

bool settles_kv_scales(const KvScales* scales, std::span<const int64_t> slot_mapping) {
    return scales && scales->pending &&
           std::any_of(slot_mapping.begin(), slot_mapping.end(), [](int64_t s) { return s >= 0; });
}

size_t KvCachePool::bytes_per_block(const KvCacheConfig& c) {
    return 2 * static_cast<size_t>(c.num_layers) * c.block_size * c.num_kv_heads * c.head_dim * dtype_size(c.dtype);
}

Result<KvCachePool> KvCachePool::create(Allocator& allocator, const KvCacheConfig& config) {
    if (config.num_layers < 0 || config.num_blocks <= 0 || config.block_size <= 0 || config.num_kv_heads <= 0 ||
        config.head_dim <= 0)
        return Status::error("invalid KV cache configuration");
    if (config.dtype != DType::F8_E4M3 && (config.calculate_scales || !config.layer_scales.empty()))
        return Status::error("KV cache scales apply to an fp8 cache only");
    if (!config.layer_scales.empty() && static_cast<int32_t>(config.layer_scales.size()) != config.num_layers)
        return Status::error("KV cache scales: " + std::to_string(config.layer_scales.size()) + " given for " +
                             std::to_string(config.num_layers) + " layers");
    KvCachePool pool;
    pool.config_ = config;
    if (config.dtype == DType::F8_E4M3) {
        pool.scales_ = std::make_unique<KvScales[]>(static_cast<size_t>(config.num_layers));
        for (int32_t i = 0; i < config.num_layers; ++i) {
            if (!config.layer_scales.empty()) pool.scales_[i] = config.layer_scales[i];
            if (config.calculate_scales) pool.scales_[i] = KvScales{.pending = true};  // vLLM: calculated win
        }
    }
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

KvCacheLayer KvCachePool::layer(int32_t layer) const {
    return {key(layer), value(layer), scales_ ? &scales_[layer] : nullptr};
}

KvScales KvCachePool::scales(int32_t layer) const {
    PAGODA_CHECK(layer >= 0 && layer < config_.num_layers);
    return scales_ ? scales_[layer] : KvScales{};
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
