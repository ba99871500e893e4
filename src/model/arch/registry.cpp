#include "model/arch/arch.h"

namespace pagoda::model {

const Architecture& architecture_for(ModelFamily family) {
    switch (family) {
        case ModelFamily::kQwen2: return kQwen2Architecture;
        case ModelFamily::kQwen3: return kQwen3Architecture;
        case ModelFamily::kQwen3Moe: return kQwen3MoeArchitecture;
        case ModelFamily::kQwen3Next: return kQwen3NextArchitecture;
        case ModelFamily::kQwen3_5:
        case ModelFamily::kQwen3_5Moe: return kQwen3_5Architecture;
    }
    return kQwen2Architecture;
}

Status load_layer_mlp(const ModelSpec& spec, WeightLoader& loader, int64_t index, const std::string& prefix,
                      LayerWeights& out) {
    if (out.mlp == MlpKind::kMoe) return load_moe(spec, loader, prefix + "mlp.", out.moe);
    if (spec.intermediate_size <= 0) {
        return Status::error("layer " + std::to_string(index) +
                             " has a dense MLP but the config gives no intermediate_size");
    }
    return load_mlp(loader, prefix + "mlp.", spec.hidden_size, spec.intermediate_size, out.dense);
}

}  // namespace pagoda::model
