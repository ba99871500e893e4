// The RoPE frequencies a config asks for, as the table the ops apply: plain RoPE, or YaRN (rope_type "yarn") with
// its factor, correction range and attention factor resolved as transformers resolves them. Other rope scalings
// are refused by name, at load, rather than served with the wrong positions.
#pragma once

#include "common/status.h"
#include "model/model_spec.h"
#include "runtime/rope_table.h"

namespace pagoda::model {

Result<RopeTable> rope_table_for(const ModelSpec& spec);

// How far positions may reach: max_position_embeddings, or with YaRN the original context times its factor (what
// vLLM derives, and what Qwen's model cards pair with --max-model-len). 0 when the config gives neither.
int64_t max_context_length(const ModelSpec& spec);

}  // namespace pagoda::model
