// Qwen3-MoE: Qwen3 attention; MoE (softmax top-k, optional renormalisation, no shared expert) on the layers that
// decoder_sparse_step / mlp_only_layers select (ModelSpec::layers), a dense SwiGLU on the others.
#include "model/arch/arch.h"

namespace pagoda::model {
namespace {

Status load_qwen3_moe_layer(const ModelSpec& spec, WeightLoader& loader, int64_t index, const std::string& prefix,
                            LayerWeights& out) {
    AttentionOptions options;
    options.bias = spec.attention_bias;
    options.qk_norm = true;
    PAGODA_RETURN_IF_ERROR(load_attention(spec, loader, prefix + "self_attn.", options, out.attn));
    return load_layer_mlp(spec, loader, index, prefix, out);
}

}  // namespace

const Architecture kQwen3MoeArchitecture{"qwen3_moe", &load_qwen3_moe_layer};

}  // namespace pagoda::model
