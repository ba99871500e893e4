// Qwen3.5 / Qwen3.6 text models (dense and MoE): as Qwen3-Next, with split DeltaNet projections (in_proj_qkv,
// in_proj_z, in_proj_b, in_proj_a), weights under model.language_model.*, fused routed experts
// (experts.gate_up_proj / experts.down_proj) and interleaved M-RoPE, which for text-only positions is exactly the
// partial NeoX RoPE the attention block applies. Vision (model.visual.*) and MTP (mtp.*) tensors are not loaded.
#include "model/arch/arch.h"

namespace pagoda::model {
namespace {

Status load_qwen3_5_layer(const ModelSpec& spec, WeightLoader& loader, int64_t index, const std::string& prefix,
                          LayerWeights& out) {
    if (out.attention == AttentionKind::kLinear) {
        PAGODA_RETURN_IF_ERROR(load_delta_net_split(spec, loader, prefix + "linear_attn.", out.delta));
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

const Architecture kQwen3_5Architecture{"qwen3_5", &load_qwen3_5_layer};

}  // namespace pagoda::model
