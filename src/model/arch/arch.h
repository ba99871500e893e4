// Per-family architecture descriptions. A family says which blocks (blocks.h) each decoder layer has and how their
// tensors are named; the decoder skeleton (embedding, pre-norm residual layers, final norm, lm_head) is shared by
// all of them (model.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/arch/blocks.h"
#include "model/model_spec.h"
#include "model/weights.h"

namespace pagoda::model {

struct LayerWeights {
    AttentionKind attention = AttentionKind::kFull;
    MlpKind mlp = MlpKind::kDense;
    Tensor input_norm, post_norm;  // [H] F32
    AttentionWeights attn;         // attention == kFull
    DeltaNetWeights delta;         // attention == kLinear
    MlpWeights dense;              // mlp == kDense
    MoeWeights moe;                // mlp == kMoe
};

struct ModelWeights {
    Tensor embed;       // [V, H]
    Tensor final_norm;  // [H] F32
    Tensor lm_head;     // [V, H] (the embedding when tied)
    std::vector<LayerWeights> layers;
    OwnedWeights owned;
};

struct Architecture {
    std::string_view name;
    // Loads the mixer and the MLP of layer `index`; `prefix` is "<weight_prefix>layers.<index>.".
    Status (*load_layer)(const ModelSpec& spec, WeightLoader& loader, int64_t index, const std::string& prefix,
                         LayerWeights& out);
};

extern const Architecture kQwen2Architecture;
extern const Architecture kQwen3Architecture;
extern const Architecture kQwen3MoeArchitecture;
extern const Architecture kQwen3NextArchitecture;
extern const Architecture kQwen3_5Architecture;  // qwen3_5 and qwen3_5_moe

const Architecture& architecture_for(ModelFamily family);

// Shared by the families: a layer's MLP as the spec says (dense SwiGLU of intermediate_size, or MoE).
Status load_layer_mlp(const ModelSpec& spec, WeightLoader& loader, int64_t index, const std::string& prefix,
                      LayerWeights& out);

}  // namespace pagoda::model
