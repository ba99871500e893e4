// Qwen3-Next: Gated DeltaNet layers (packed in_proj_qkvz / in_proj_ba) and gated full-attention layers
// (per-head [q | gate] in q_proj, zero-centred QK-norm, partial NeoX RoPE); MoE with a sigmoid-gated shared
// expert; every RMSNorm except the DeltaNet output norm is zero-centred (the decoder picks NormKind from the spec).
#include "model/arch/arch.h"

namespace pagoda::model {
namespace {

Status load_qwen3_next_layer(const ModelSpec& spec, WeightLoader& loader, int64_t index, const std::string& prefix,
                             LayerWeights& out) {
    if (out.attention == AttentionKind::kLinear) {
        PAGODA_RETURN_IF_ERROR(load_delta_net_packed(spec, loader, prefix + "linear_attn.", out.delta));
    } else {
        AttentionOptions options;
        options.bias = spec.attention_bias;
        options.qk_norm = true;
        options.output_gate = true;
        PAGODA_RETURN_IF_ERROR(load_attention(spec, loader, prefix + "self_attn.", options, out.attn));
    }
    return load_layer_mlp(spec, loader, index, prefix, out);
}

}  // namespace

const Architecture kQwen3NextArchitecture{"qwen3_next", &load_qwen3_next_layer};

}  // namespace pagoda::model
