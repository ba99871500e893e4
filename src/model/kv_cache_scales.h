// An fp8 KV cache's per-layer scales as a checkpoint may carry them: llm-compressor's kv_cache_scheme (and vLLM's
// loader) name them `<prefix>layers.N.self_attn.k_scale` and `.v_scale`, one value each, for every full-attention
// layer N.
#pragma once

#include <vector>

#include "common/status.h"
#include "model/model_spec.h"
#include "model/safetensors.h"
#include "runtime/cache_pools.h"

namespace pagoda::model {

// One KvScales per full-attention layer, in layer order; empty when the checkpoint has none. A checkpoint with scales
// for some layers only, or a scale that is not one positive finite float, is an error that names the tensor.
Result<std::vector<KvScales>> read_kv_cache_scales(const ModelSpec& spec, const Checkpoint& checkpoint);

}  // namespace pagoda::model
