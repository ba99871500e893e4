// Random weights for a config alone, as vLLM's `--load-format dummy` gives: every tensor the model declares, bf16,
// with pseudo-random values, without a checkpoint on disk. For speed measurements of shapes whose checkpoint would
// not fit the disk (Qwen3.5-35B-A3B's 40 layers are ~70 GB) and for trying a config; the words it produces mean
// nothing.
#pragma once

#include <string_view>

#include "common/status.h"
#include "model/model_spec.h"
#include "model/safetensors.h"

namespace pagoda::model {

// A checkpoint holding, under the names a Hugging Face checkpoint of `spec` uses (fused MoE experts, Qwen3-Next's
// packed in_proj_qkvz / in_proj_ba), one bf16 tensor for each weight the model reads; the tied LM head left out as
// such checkpoints leave it. Values uniform in [-1/32, 1/32], the same for the same spec: every tensor is a view of
// one random buffer (its largest tensor's size plus 16 MiB), each starting at another offset in it, so host memory
// stays ~1 GB whatever the model's size; device backends copy each into its own memory. An error for a config with
// a quantization_config (its weights are not bf16; `--quantization fp8` quantizes dummy weights at load).
Result<Checkpoint> dummy_checkpoint(const ModelSpec& spec);

// --load-format as vLLM spells it: auto and safetensors read the checkpoint (false), dummy makes random weights
// (true); anything else is an error that lists the three.
Result<bool> parse_load_format(std::string_view name);

}  // namespace pagoda::model
