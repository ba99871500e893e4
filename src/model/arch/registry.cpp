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

Status prepare_layer(const Architecture& arch, const ModelSpec& spec, WeightLoader& loader, int64_t index,
                     const std::string& prefix, LayerWeights& out) {
    if (out.attention == AttentionKind::kLinear) {
        if (arch.delta_net == DeltaNetLayout::kNone) {
            return Status::error("layer " + std::to_string(index) + " is a linear-attention layer, which " +
                                 std::string(arch.name) + " models do not have");
        }
        PAGODA_RETURN_IF_ERROR(prepare_delta_net(spec, loader, arch.delta_net, prefix + "linear_attn.", out.delta));
    }
    if (out.mlp == MlpKind::kMoe) return prepare_moe(spec, loader, prefix + "mlp.", out.moe);
    if (spec.intermediate_size <= 0) {
        return Status::error("layer " + std::to_string(index) +
                             " has a dense MLP but the config gives no intermediate_size");
    }
    return ok_status();
}

Status visit_weights(LayerWeights& w, const ModelSpec& spec, const Architecture& arch, const std::string& p,
                     const WeightVisitor& visit) {
    const int64_t H = spec.hidden_size;
    constexpr WeightSource f32 = WeightSource::kF32;
    const WeightEntry norms[] = {
        tensor_entry(p, "input_layernorm.weight", w.input_norm, Shape{H}, f32, ShardRole::replicated()),
        tensor_entry(p, "post_attention_layernorm.weight", w.post_norm, Shape{H}, f32, ShardRole::replicated()),
    };
    PAGODA_RETURN_IF_ERROR(visit_all(norms, visit));
    if (w.attention == AttentionKind::kLinear) {
        PAGODA_RETURN_IF_ERROR(visit_weights(w.delta, spec, arch.delta_net, p + "linear_attn.", visit));
    } else {
        AttentionOptions options;
        options.bias = arch.always_qkv_bias || spec.attention_bias;
        options.qk_norm = arch.qk_norm;
        options.output_gate = arch.output_gate;
        PAGODA_RETURN_IF_ERROR(visit_weights(w.attn, spec, options, p + "self_attn.", visit));
    }
    if (w.mlp == MlpKind::kMoe) return visit_weights(w.moe, spec, p + "mlp.", visit);
    return visit_weights(w.dense, H, spec.intermediate_size, SplitUnit::kMlp, p + "mlp.", visit);
}

Status visit_weights(ModelWeights& w, const ModelSpec& spec, const WeightVisitor& visit) {
    const std::string& p = spec.weight_prefix;
    const int64_t H = spec.hidden_size, V = spec.vocab_size;
    const ShardRole vocab_rows = ShardRole::rows(SplitUnit::kVocab);
    // The LM head is not in the checkpoint when it is tied to the embedding; the loader then views the embedding.
    WeightEntry lm_head = dense_linear_entry("", "lm_head.weight", w.lm_head, Shape{V, H}, vocab_rows);
    lm_head.optional = spec.tie_word_embeddings;
    const WeightEntry top[] = {
        tensor_entry(p, "embed_tokens.weight", w.embed, Shape{V, H}, WeightSource::kView, vocab_rows),
        tensor_entry(p, "norm.weight", w.final_norm, Shape{H}, WeightSource::kF32, ShardRole::replicated()),
        lm_head,
    };
    PAGODA_RETURN_IF_ERROR(visit_all(top, visit));
    const Architecture& arch = architecture_for(spec.family);
    for (size_t i = 0; i < w.layers.size(); ++i) {
        PAGODA_RETURN_IF_ERROR(visit_weights(w.layers[i], spec, arch, p + "layers." + std::to_string(i) + ".", visit));
    }
    return ok_status();
}

ModelWeights declared_weights(const ModelSpec& spec) {
    ModelWeights w;
    w.layers.resize(spec.layers.size());
    for (size_t i = 0; i < spec.layers.size(); ++i) {
        w.layers[i].attention = spec.layers[i].attention;
        w.layers[i].mlp = spec.layers[i].mlp;
    }
    return w;
}

}  // namespace pagoda::model
