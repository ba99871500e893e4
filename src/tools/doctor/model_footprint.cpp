// Reads a model directory through pagoda_model (config.json and safetensors headers only).
#include "model/model_dir.h"
#include "model/rope.h"
#include "tools/doctor/model_fit.h"

namespace pagoda::doctor {

Result<ModelFootprint> read_model_footprint(const std::string& dir) {
    PAGODA_ASSIGN_OR_RETURN(model::ModelDir md, model::ModelDir::open(dir, /*open_weights=*/true));
    ModelFootprint f;
    f.name = dir;
    f.weight_bytes = model::summarize_weights(md.spec, *md.checkpoint).weight_bytes;
    f.kv_bytes_per_token = md.spec.kv_cache_bytes_per_token(2);
    f.state_bytes_per_sequence = md.spec.linear_state_bytes_per_sequence();
    f.num_attention_heads = md.spec.num_attention_heads;
    f.num_kv_heads = md.spec.num_key_value_heads;
    f.max_context_length = model::max_context_length(md.spec);
    return f;
}

}  // namespace pagoda::doctor
