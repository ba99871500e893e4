// Qwen2 / Qwen2.5: GQA attention with q/k/v bias, SwiGLU MLP, plain RMSNorm, tied or untied embeddings.
#include "model/arch/arch.h"

namespace pagoda::model {
namespace {

Status load_qwen2_layer(const ModelSpec& spec, WeightLoader& loader, int64_t index, const std::string& prefix,
                        LayerWeights& out) {
    AttentionOptions options;
    options.bias = true;  // Qwen2 always has q/k/v bias (the config has no switch for it)
    PAGODA_RETURN_IF_ERROR(load_attention(spec, loader, prefix + "self_attn.", options, out.attn));
    return load_layer_mlp(spec, loader, index, prefix, out);
}

}  // namespace

const Architecture kQwen2Architecture{"qwen2", &load_qwen2_layer};

}  // namespace pagoda::model
