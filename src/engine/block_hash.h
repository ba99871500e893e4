// Chained 128-bit block hashes for the prefix cache: hash(block i) = xxh3_128(hash(block i-1), tokens of block i,
// salt), where the salt carries the LoRA adapter and the request's cache_salt, so tenants and adapters never share.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace pagoda::engine {

struct BlockHash {
    uint64_t lo = 0;
    uint64_t hi = 0;
    friend bool operator==(const BlockHash&, const BlockHash&) = default;
};

struct BlockHashHasher {
    size_t operator()(const BlockHash& h) const { return static_cast<size_t>(h.lo ^ (h.hi * 0x9E3779B97F4A7C15ull)); }
};

// The salt of a request: one 128-bit value from (lora_id, cache_salt); the root of its hash chain.
BlockHash block_hash_salt(int32_t lora_id, std::string_view cache_salt);

// Hash of one full block. `parent` is the previous block's hash, or the salt for the first block.
BlockHash hash_block(const BlockHash& parent, std::span<const int32_t> tokens);

}  // namespace pagoda::engine
