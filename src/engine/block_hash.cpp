// xxh3-128 block hashes (libxxhash).
#include "engine/block_hash.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack: no allocation per block hash
#include <xxhash.h>

#include <cstring>

namespace pagoda::engine {

namespace {
BlockHash from_xxh(XXH128_hash_t h) {
    return {h.low64, h.high64};
}
}  // namespace

BlockHash block_hash_salt(int32_t lora_id, std::string_view cache_salt) {
    XXH3_state_t state;
    XXH3_128bits_reset(&state);
    static constexpr char kTag[] = "pagoda-kv-v1";
    XXH3_128bits_update(&state, kTag, sizeof(kTag));
    XXH3_128bits_update(&state, &lora_id, sizeof(lora_id));
    const uint64_t salt_len = cache_salt.size();
    XXH3_128bits_update(&state, &salt_len, sizeof(salt_len));
    XXH3_128bits_update(&state, cache_salt.data(), cache_salt.size());
    return from_xxh(XXH3_128bits_digest(&state));
}

BlockHash hash_block(const BlockHash& parent, std::span<const int32_t> tokens) {
    XXH3_state_t state;
    XXH3_128bits_reset(&state);
    XXH3_128bits_update(&state, &parent.lo, sizeof(parent.lo));
    XXH3_128bits_update(&state, &parent.hi, sizeof(parent.hi));
    XXH3_128bits_update(&state, tokens.data(), tokens.size_bytes());
    return from_xxh(XXH3_128bits_digest(&state));
}

}  // namespace pagoda::engine
