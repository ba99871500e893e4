#include "model/arch/arch.h"

namespace pagoda::model {

const Architecture& architecture_for(ModelFamily family) {
    switch (family) {
        case ModelFamily::kQwen2:
            return kQwen2Architecture;
        case ModelFamily::kQwen3:
            return kQwen3Architecture;
        case ModelFamily::kQwen3Moe:
            return kQwen3MoeArchitecture;
        case ModelFamily::kQwen3Next:
            return kQwen3NextArchitecture;
        case ModelFamily::kQwen3_5:
        case ModelFamily::kQwen3_5Moe:
            return kQwen3_5Architecture;
    }
    return kQwen2Architecture;
}

Status load_layer(const Architecture& arch, const ModelSpec& spec, WeightLoader& loader, int64_t index,
                  const std::string& prefix, LayerWeights& out) {
    if (out.attention == AttentionKind::kLinear) {
        switch (arch.delta_net) {
            case DeltaNetLayout::kPacked:
                PAGODA_RETURN_IF_ERROR(load_delta_net_packed(spec, loader, prefix + "linear_attn.", out.delta));
                break;
            case DeltaNetLayout::kSplit:
                PAGODA_RETURN_IF_ERROR(load_delta_net_split(spec, loader, prefix + "linear_attn.", out.delta));
                break;
            case DeltaNetLayout::kNone:
                return Status::error("layer " + std::to_string(index) + " is a linear-attention layer, which " +
                                     std::string(arch.name) + " models do not have");
        }
    } else {
        AttentionOptions options;
        options.bias = arch.always_qkv_bias || spec.attention_bias;
        options.qk_norm = arch.qk_norm;
        options.output_gate = arch.output_gate;
        PAGODA_RETURN_IF_ERROR(load_attention(spec, loader, prefix + "self_attn.", options, out.attn));
    }
    if (out.mlp == MlpKind::kMoe) return load_moe(spec, loader, prefix + "mlp.", out.moe);
    if (spec.intermediate_size <= 0) {
        return Status::error("layer " + std::to_string(index) +
                             " has a dense MLP but the config gives no intermediate_size");
    }
    return load_mlp(loader, prefix + "mlp.", spec.hidden_size, spec.intermediate_size, out.dense);
}

}  // namespace pagoda::model
