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
    Tensor embed;          // [V, H]
    Tensor final_norm;     // [H] F32
    LinearWeight lm_head;  // [V, H] (its data is the embedding when tied)
    std::vector<LayerWeights> layers;
    OwnedWeights owned;
};

// How a family's decoder layers differ, as data: the blocks are shared (blocks.h), so a family is the switches of
// its attention and the storage layout of its linear-attention projections (DeltaNetLayout, blocks.h).
struct Architecture {
    std::string_view name;
    bool always_qkv_bias = false;  // q/k/v bias whatever the config says (Qwen2's config has no switch for it)
    bool qk_norm = false;          // per-head RMSNorm of q and k before RoPE
    bool output_gate = false;      // q_proj holds [q | gate] per head; the attention output is gated
    DeltaNetLayout delta_net = DeltaNetLayout::kNone;
};

extern const Architecture kQwen2Architecture;
extern const Architecture kQwen3Architecture;
extern const Architecture kQwen3MoeArchitecture;
extern const Architecture kQwen3NextArchitecture;
extern const Architecture kQwen3_5Architecture;  // qwen3_5 and qwen3_5_moe

const Architecture& architecture_for(ModelFamily family);

// Every tensor of decoder layer `w` (its mixer and MLP, as w.attention and w.mlp say): the norms, then the block's
// visit_weights. `prefix` is "<weight_prefix>layers.<index>.".
Status visit_weights(LayerWeights& w, const ModelSpec& spec, const Architecture& arch, const std::string& prefix,
                     const WeightVisitor& visit);
// Every tensor of the model: the embedding, the final norm, the LM head (optional when the embeddings are tied),
// then each of w.layers (whose kinds say which blocks it has).
Status visit_weights(ModelWeights& w, const ModelSpec& spec, const WeightVisitor& visit);

// Before layer `index` is walked for loading: the checks of its config and the layouts a walk cannot read by name
// (prepare_delta_net, prepare_moe).
Status prepare_layer(const Architecture& arch, const ModelSpec& spec, WeightLoader& loader, int64_t index,
                     const std::string& prefix, LayerWeights& out);
// A ModelWeights with the layer kinds of the spec and no tensors: what visit_weights declares for a config alone.
ModelWeights declared_weights(const ModelSpec& spec);

}  // namespace pagoda::model
