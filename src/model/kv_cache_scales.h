// An fp8 KV cache's per-layer scales as a checkpoint may carry them: llm-compressor's kv_cache_scheme (and vLLM's
// loader) name them `<prefix>layers.N.self_attn.k_scale` and `.v_scale` for every full-attention layer N: one value
// each (per tensor), or one per KV head (llm-compressor's attn_head strategy: [num_kv_heads], any shape of that
// many elements). A q_scale beside them (for attention computed in fp8) is not used: queries stay unquantized.
#pragma once

#include <vector>

#include "common/status.h"
#include "model/model_spec.h"
#include "model/safetensors.h"
#include "runtime/cache_pools.h"

namespace pagoda::model {

// One layer's scales as stored: per tensor (k, v) or per KV head (k_heads / v_heads: [num_key_value_heads], with k / v
// then 1).
struct CheckpointKvScales {
    float k = 1.0f, v = 1.0f;
    std::vector<float> k_heads, v_heads;
};

// One entry per full-attention layer, in layer order; empty when the checkpoint has none. A checkpoint with scales
// for some layers only, or a scale that is not one (or num_key_value_heads) positive finite floats, is an error that
// names the tensor.
Result<std::vector<CheckpointKvScales>> read_kv_cache_scales(const ModelSpec& spec, const Checkpoint& checkpoint);

}  // namespace pagoda::model
