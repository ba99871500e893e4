// config.json's rope fields → RopeTable. The defaults and fallbacks follow transformers' modeling_rope_utils
// (_compute_yarn_parameters, yarn_get_mscale); comments name the non-obvious ones.
#include "model/rope.h"

#include <string>

namespace pagoda::model {
namespace {

bool is_yarn(const RopeSpec& r) {
    return r.type == "yarn";
}

// transformers: `factor` null → max_position_embeddings / original_max_position_embeddings (DeepSeek-V3's configs).
double yarn_factor(const ModelSpec& spec) {
    const RopeSpec& r = spec.rope;
    if (r.factor > 0.0) return r.factor;
    return static_cast<double>(spec.max_position_embeddings) / static_cast<double>(r.original_max_position_embeddings);
}

Result<RopeTable> yarn_table(const ModelSpec& spec, int rotary_dim) {
    const RopeSpec& r = spec.rope;
    if (r.original_max_position_embeddings <= 0)
        return Status::error("rope_scaling: yarn needs original_max_position_embeddings (or max_position_embeddings)");
    YarnParams p;
    p.theta = r.theta, p.rotary_dim = rotary_dim, p.factor = yarn_factor(spec);
    if (!(p.factor > 0.0)) return Status::error("rope_scaling: yarn needs a positive factor");
    p.original_max_position_embeddings = static_cast<double>(r.original_max_position_embeddings);
    // `get("beta_fast") or 32`: a 0 takes the default as well.
    p.beta_fast = r.beta_fast.value_or(0.0) != 0.0 ? *r.beta_fast : 32.0;
    p.beta_slow = r.beta_slow.value_or(0.0) != 0.0 ? *r.beta_slow : 1.0;
    p.truncate = r.truncate;
    if (r.attention_factor) {
        p.attention_factor = *r.attention_factor;
    } else if (r.mscale.value_or(0.0) != 0.0 && r.mscale_all_dim.value_or(0.0) != 0.0) {
        p.attention_factor = yarn_mscale(p.factor, *r.mscale) / yarn_mscale(p.factor, *r.mscale_all_dim);
    } else {
        p.attention_factor = yarn_mscale(p.factor);
    }
    return yarn_rope_table(p);
}

}  // namespace

Result<RopeTable> rope_table_for(const ModelSpec& spec) {
    const RopeSpec& r = spec.rope;
    // transformers: dim = int(head_dim * partial_rotary_factor), and the table has one entry per pair.
    const int64_t rotary_dim = r.rotary_dim > 0
                                   ? r.rotary_dim
                                   : static_cast<int64_t>(static_cast<double>(spec.head_dim) * r.partial_rotary_factor);
    if (rotary_dim <= 0 || rotary_dim % 2 != 0 || rotary_dim > spec.head_dim) {
        return Status::error("rotary dimension " + std::to_string(rotary_dim) + " (head_dim " +
                             std::to_string(spec.head_dim) + " × partial_rotary_factor) must be even and positive");
    }
    const int dim = static_cast<int>(rotary_dim);
    if (r.type.empty() || r.type == "default") return default_rope_table(static_cast<float>(r.theta), dim);
    if (is_yarn(r)) return yarn_table(spec, dim);
    return Status::error("rope_type '" + r.type + "' is not supported (pagoda runs the default RoPE and yarn)");
}

int64_t max_context_length(const ModelSpec& spec) {
    const RopeSpec& r = spec.rope;
    if (is_yarn(r) && r.original_max_position_embeddings > 0)
        return static_cast<int64_t>(static_cast<double>(r.original_max_position_embeddings) * yarn_factor(spec));
    return spec.max_position_embeddings;
}

}  // namespace pagoda::model
