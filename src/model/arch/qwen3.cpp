// Qwen3 dense: GQA attention with per-head QK RMSNorm (plain x̂·w) before RoPE, explicit head_dim, no bias.
#include "model/arch/arch.h"

namespace pagoda::model {
namespace {

Status load_qwen3_layer(const ModelSpec& spec, WeightLoader& loader, int64_t index, const std::string& prefix,
                        LayerWeights& out) {
    AttentionOptions options;
    options.bias = spec.attention_bias;
    options.qk_norm = true;
    PAGODA_RETURN_IF_ERROR(load_attention(spec, loader, prefix + "self_attn.", options, out.attn));
    return load_layer_mlp(spec, loader, index, prefix, out);
}

}  // namespace

const Architecture kQwen3Architecture{"qwen3", &load_qwen3_layer};

}  // namespace pagoda::model
