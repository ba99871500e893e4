// PEFT LoRA adapters as `peft` and LLaMA-Factory save them: adapter_config.json (r, lora_alpha, use_rslora,
// target_modules, bias) and adapter_model.safetensors (base_model.model.<module>.lora_A.weight [r, K] and lora_B.weight
// [N, r]). Read once into host F32 tensors, checked against the projections of the model that will run them, so a bad
// adapter is refused by name before any request can use it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/weights.h"
#include "tensor/tensor.h"

namespace pagoda::model {

// What an adapter module may land on: one projection of the model under its checkpoint module name
// ("model.layers.0.self_attn.q_proj"), or a packed checkpoint projection (Qwen3-Next's in_proj_qkvz) that the model
// holds re-ordered in several weights.
struct LoraTargetPart {
    std::string weight;           // the model's LinearWeight, by checkpoint name ("...in_proj_qkv.weight")
    std::vector<int64_t> b_rows;  // the adapter's B rows this part takes, in the weight's row order; empty: all
};
struct LoraTarget {
    int64_t out_features = 0, in_features = 0;  // of the module as the adapter sees it
    std::vector<LoraTargetPart> parts;
};
using LoraTargets = std::map<std::string, LoraTarget>;  // module name -> target

// One module of a read adapter: the delta on one model weight.
struct LoraModule {
    std::string weight;  // LoraTargetPart::weight
    Tensor a;            // [r, K] F32, host
    Tensor b;            // [n, r] F32, host (the part's rows)
};

struct LoraAdapter {
    std::string path;
    int64_t rank = 0;
    float scale = 1.0f;  // lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora
    std::vector<LoraModule> modules;
    OwnedWeights owned;  // the memory of the tensors above
    size_t bytes() const;
};

// Reads and checks the adapter in `dir` against `targets` (the model's, model::Model::lora_targets). `weight_prefix`
// is the model's ("model." or "model.language_model."): module names saved from a text-only model
// ("model.layers.…") are accepted for a model whose weights live under a longer prefix. Refused, with what is wrong:
// a missing or unreadable file, modules_to_save, a bias other than "none", DoRA, rank or alpha patterns, a target
// module the model lacks, keys of modules that are not projections (MoE experts, lm_head, embeddings), a missing
// lora_A or lora_B, shapes that do not fit, a rank other than the config's or above `max_rank`.
Result<std::shared_ptr<const LoraAdapter>> read_lora_adapter(const std::string& dir, const LoraTargets& targets,
                                                             const std::string& weight_prefix, int64_t max_rank);

}  // namespace pagoda::model
