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
// its attention and the storage layout of its linear-attention projections. load_layer() reads one layer with them.
enum class DeltaNetLayout : uint8_t {
    kNone,    // no linear-attention layers
    kPacked,  // Qwen3-Next: in_proj_qkvz / in_proj_ba packed per key-head group
    kSplit,   // Qwen3.5: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a
};

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

// Loads the mixer (attention or Gated DeltaNet, as out.attention says) and the MLP (dense SwiGLU or MoE, as
// out.mlp says) of layer `index`; `prefix` is "<weight_prefix>layers.<index>.".
Status load_layer(const Architecture& arch, const ModelSpec& spec, WeightLoader& loader, int64_t index,
                  const std::string& prefix, LayerWeights& out);

}  // namespace pagoda::model
