// config.json → ModelSpec. Defaults mirror transformers' configuration_qwen{2,3,3_moe,3_next,3_5,3_5_moe}.py
// (transformers 5.x); comments name the source of each non-obvious rule.
#include "model/model_spec.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "common/file.h"
#include "common/json.h"

namespace pagoda::model {
namespace {

// Typed reads from one config object; errors name the field with its path ("text_config.hidden_size").
class Fields {
  public:
    Fields(const Json& obj, std::string prefix) : obj_(obj), prefix_(std::move(prefix)) {}

    const Json* find(std::string_view key) const {
        const Json* v = obj_.find(key);
        return (v && !v->is_null()) ? v : nullptr;
    }
    bool has(std::string_view key) const { return find(key) != nullptr; }
    bool present(std::string_view key) const { return obj_.find(key) != nullptr; }  // even when null

    Status get(std::string_view key, int64_t& out) const {
        auto r = json_get_int(obj_, key, out);
        if (!r.ok()) return error(key, "an integer", *obj_.find(key));
        out = r.value();
        return ok_status();
    }
    Status get(std::string_view key, double& out) const {
        auto r = json_get_double(obj_, key, out);
        if (!r.ok()) return error(key, "a number", *obj_.find(key));
        out = r.value();
        return ok_status();
    }
    Status get(std::string_view key, bool& out) const {
        auto r = json_get_bool(obj_, key, out);
        if (!r.ok()) return error(key, "true or false", *obj_.find(key));
        out = r.value();
        return ok_status();
    }
    Status get(std::string_view key, std::string& out) const {
        auto r = json_get_string(obj_, key, out);
        if (!r.ok()) return error(key, "a string", *obj_.find(key));
        out = r.value();
        return ok_status();
    }
    Status get(std::string_view key, std::optional<int64_t>& out) const {
        if (!has(key)) return ok_status();
        int64_t v = 0;
        PAGODA_RETURN_IF_ERROR(get(key, v));
        out = v;
        return ok_status();
    }
    Status get(std::string_view key, std::optional<double>& out) const {
        if (!has(key)) return ok_status();
        double v = 0;
        PAGODA_RETURN_IF_ERROR(get(key, v));
        out = v;
        return ok_status();
    }
    Status get(std::string_view key, std::optional<bool>& out) const {
        if (!has(key)) return ok_status();
        bool v = false;
        PAGODA_RETURN_IF_ERROR(get(key, v));
        out = v;
        return ok_status();
    }
    // A list of integers (or, with `allow_scalar`, one integer: eos_token_id is either).
    Status get_int_list(std::string_view key, std::vector<int64_t>& out, bool allow_scalar) const {
        const Json* v = find(key);
        if (!v) return ok_status();
        if (allow_scalar && v->is_int()) {
            out = {v->as_int()};
            return ok_status();
        }
        if (!v->is_array())
            return error(key, allow_scalar ? "an integer or a list of integers" : "a list of integers", *v);
        out.clear();
        for (const Json& e : v->as_array()) {
            if (!e.is_int()) return error(key, "a list of integers", *v);
            out.push_back(e.as_int());
        }
        return ok_status();
    }
    Status get_string_list(std::string_view key, std::vector<std::string>& out) const {
        const Json* v = find(key);
        if (!v) return ok_status();
        if (!v->is_array()) return error(key, "a list of strings", *v);
        out.clear();
        for (const Json& e : v->as_array()) {
            if (!e.is_string()) return error(key, "a list of strings", *v);
            out.push_back(e.as_string());
        }
        return ok_status();
    }

    Status error(std::string_view key, std::string_view expected, const Json& found) const {
        std::string shown = found.dump();
        if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
        return Status::error("field \"" + prefix_ + std::string(key) + "\" must be " + std::string(expected) +
                             ", got " + Json::type_name(found.type()) + " " + shown);
    }
    Status fail(std::string_view key, std::string_view what) const {
        return Status::error("field \"" + prefix_ + std::string(key) + "\" " + std::string(what));
    }
    const std::string& prefix() const { return prefix_; }

  private:
    const Json& obj_;
    std::string prefix_;
};

struct TypeEntry {
    std::string_view name;
    ModelFamily family;
    bool nested;  // the language model's fields sit under "text_config"
};

constexpr TypeEntry kTypes[] = {
    {"qwen2", ModelFamily::kQwen2, false},
    {"qwen3", ModelFamily::kQwen3, false},
    {"qwen3_moe", ModelFamily::kQwen3Moe, false},
    {"qwen3_next", ModelFamily::kQwen3Next, false},
    {"qwen3_5", ModelFamily::kQwen3_5, true},
    {"qwen3_5_moe", ModelFamily::kQwen3_5Moe, true},
    // The text-only Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM configs (prefix "model.").
    {"qwen3_5_text", ModelFamily::kQwen3_5, false},
    {"qwen3_5_moe_text", ModelFamily::kQwen3_5Moe, false},
};

std::string supported_list() {
    std::string s;
    for (std::string_view t : supported_model_types()) {
        if (!s.empty()) s += ", ";
        s += t;
    }
    return s;
}

bool is_hybrid(ModelFamily f) {
    return f == ModelFamily::kQwen3Next || f == ModelFamily::kQwen3_5 || f == ModelFamily::kQwen3_5Moe;
}

// Class defaults per family (the dataclass field defaults of each config class).
void apply_class_defaults(ModelSpec& s) {
    switch (s.family) {
        case ModelFamily::kQwen2:
            s.vocab_size = 151936, s.hidden_size = 4096, s.intermediate_size = 22016, s.num_hidden_layers = 32;
            s.num_attention_heads = 32, s.num_key_value_heads = 32, s.max_position_embeddings = 32768;
            s.sliding_window = 4096, s.max_window_layers = 28;
            break;
        case ModelFamily::kQwen3:
            s.vocab_size = 151936, s.hidden_size = 4096, s.intermediate_size = 22016, s.num_hidden_layers = 32;
            s.num_attention_heads = 32, s.num_key_value_heads = 32, s.head_dim = 128, s.max_position_embeddings = 32768;
            s.sliding_window = 4096, s.max_window_layers = 28;
            break;
        case ModelFamily::kQwen3Moe:
            s.vocab_size = 151936, s.hidden_size = 2048, s.intermediate_size = 6144, s.num_hidden_layers = 24;
            s.num_attention_heads = 32, s.num_key_value_heads = 4, s.max_position_embeddings = 32768;
            s.sliding_window = 4096;
            s.decoder_sparse_step = 1, s.moe_intermediate_size = 768, s.num_experts_per_tok = 8, s.num_experts = 128;
            s.norm_topk_prob = false;
            break;
        case ModelFamily::kQwen3Next:
            s.vocab_size = 151936, s.hidden_size = 2048, s.intermediate_size = 5632, s.num_hidden_layers = 48;
            s.num_attention_heads = 16, s.num_key_value_heads = 2, s.head_dim = 256, s.max_position_embeddings = 32768;
            s.linear_conv_kernel_dim = 4, s.linear_key_head_dim = 128, s.linear_value_head_dim = 128;
            s.linear_num_key_heads = 16, s.linear_num_value_heads = 32;
            s.decoder_sparse_step = 1, s.moe_intermediate_size = 512, s.shared_expert_intermediate_size = 512;
            s.num_experts_per_tok = 10, s.num_experts = 512, s.norm_topk_prob = true;
            break;
        case ModelFamily::kQwen3_5:
            s.vocab_size = 248320, s.hidden_size = 4096, s.intermediate_size = 12288, s.num_hidden_layers = 32;
            s.num_attention_heads = 16, s.num_key_value_heads = 4, s.head_dim = 256, s.max_position_embeddings = 32768;
            s.linear_conv_kernel_dim = 4, s.linear_key_head_dim = 128, s.linear_value_head_dim = 128;
            s.linear_num_key_heads = 16, s.linear_num_value_heads = 32;
            break;
        case ModelFamily::kQwen3_5Moe:
            s.vocab_size = 248320, s.hidden_size = 2048, s.intermediate_size = 0, s.num_hidden_layers = 40;
            s.num_attention_heads = 16, s.num_key_value_heads = 2, s.head_dim = 256, s.max_position_embeddings = 32768;
            s.linear_conv_kernel_dim = 4, s.linear_key_head_dim = 128, s.linear_value_head_dim = 128;
            s.linear_num_key_heads = 16, s.linear_num_value_heads = 32;
            s.moe_intermediate_size = 512, s.shared_expert_intermediate_size = 512, s.num_experts_per_tok = 8;
            s.num_experts = 256;
            s.norm_topk_prob = true;  // Qwen3_5MoeTopKRouter always renormalises
            s.experts_fused = true;
            break;
    }
}

Status read_rope(const Fields& f, ModelSpec& s) {
    // Priority as in transformers' convert_rope_params_to_dict: rope_scaling (if non-empty), else
    // rope_parameters; inside it rope_theta/partial_rotary_factor win over the top-level fields.
    const Json* rp = nullptr;
    const char* rp_key = "rope_parameters";
    if (const Json* rs = f.find("rope_scaling"); rs && !(rs->is_object() && rs->size() == 0)) {
        if (!rs->is_object()) return f.error("rope_scaling", "an object or null", *rs);
        rp = rs, rp_key = "rope_scaling";
    } else if (const Json* p = f.find("rope_parameters")) {
        if (!p->is_object()) return f.error("rope_parameters", "an object or null", *p);
        rp = p;
    }
    RopeSpec& r = s.rope;
    r.theta = 10000.0;  // RotaryEmbeddingConfigMixin.default_theta
    PAGODA_RETURN_IF_ERROR(f.get("rope_theta", r.theta));
    std::optional<double> prf;
    PAGODA_RETURN_IF_ERROR(f.get("partial_rotary_factor", prf));
    if (!prf && is_hybrid(s.family)) prf = 0.25;  // kwargs.setdefault("partial_rotary_factor", 0.25)
    int64_t original_max = s.max_position_embeddings;
    PAGODA_RETURN_IF_ERROR(f.get("original_max_position_embeddings", original_max));

    if (rp) {
        const Fields rf(*rp, f.prefix() + rp_key + ".");
        PAGODA_RETURN_IF_ERROR(rf.get("rope_theta", r.theta));
        PAGODA_RETURN_IF_ERROR(rf.get("partial_rotary_factor", prf));
        std::string type = "default";
        PAGODA_RETURN_IF_ERROR(rf.get("type", type));
        PAGODA_RETURN_IF_ERROR(rf.get("rope_type", type));
        r.type = type;
        PAGODA_RETURN_IF_ERROR(rf.get("factor", r.factor));
        if (r.type == "yarn" || r.type == "llama3" || r.type == "longrope") {
            // A top-level original_max_position_embeddings takes priority (standardize_rope_params).
            if (!f.has("original_max_position_embeddings")) {
                PAGODA_RETURN_IF_ERROR(rf.get("original_max_position_embeddings", original_max));
            }
            r.original_max_position_embeddings = original_max;
        } else {
            PAGODA_RETURN_IF_ERROR(rf.get("original_max_position_embeddings", r.original_max_position_embeddings));
        }
        PAGODA_RETURN_IF_ERROR(rf.get("beta_fast", r.beta_fast));
        PAGODA_RETURN_IF_ERROR(rf.get("beta_slow", r.beta_slow));
        PAGODA_RETURN_IF_ERROR(rf.get("attention_factor", r.attention_factor));
        PAGODA_RETURN_IF_ERROR(rf.get("mscale", r.mscale));
        PAGODA_RETURN_IF_ERROR(rf.get("mscale_all_dim", r.mscale_all_dim));
        PAGODA_RETURN_IF_ERROR(rf.get("truncate", r.truncate));
        PAGODA_RETURN_IF_ERROR(rf.get_int_list("mrope_section", r.mrope_section, false));
        if (is_hybrid(s.family) && s.family != ModelFamily::kQwen3Next) r.mrope_interleaved = true;
        PAGODA_RETURN_IF_ERROR(rf.get("mrope_interleaved", r.mrope_interleaved));
    } else if (is_hybrid(s.family) && s.family != ModelFamily::kQwen3Next) {
        r.mrope_interleaved = true;
    }
    // Qwen3.5 modeling: config.rope_parameters.get("mrope_section", [11, 11, 10]); it always interleaves.
    if (r.mrope_section.empty() && (s.family == ModelFamily::kQwen3_5 || s.family == ModelFamily::kQwen3_5Moe))
        r.mrope_section = {11, 11, 10};
    r.partial_rotary_factor = prf.value_or(1.0);
    if (!(r.partial_rotary_factor > 0.0 && r.partial_rotary_factor <= 1.0))
        return f.fail("partial_rotary_factor", "must be in (0, 1], got " + std::to_string(r.partial_rotary_factor));
    if (!(r.theta > 0.0)) return f.fail("rope_theta", "must be positive");
    r.rotary_dim = static_cast<int64_t>(static_cast<double>(s.head_dim) * r.partial_rotary_factor);
    return ok_status();
}

Status read_layer_plan(const Fields& f, ModelSpec& s) {
    std::vector<std::string> types;
    PAGODA_RETURN_IF_ERROR(f.get_string_list("layer_types", types));
    const auto n = static_cast<size_t>(s.num_hidden_layers);
    s.layers.assign(n, LayerSpec{});
    if (is_hybrid(s.family)) {
        s.full_attention_interval = 4;  // kwargs.pop("full_attention_interval", 4)
        PAGODA_RETURN_IF_ERROR(f.get("full_attention_interval", s.full_attention_interval));
        if (types.empty()) {
            if (s.full_attention_interval <= 0) return f.fail("full_attention_interval", "must be positive");
            for (size_t i = 0; i < n; ++i)
                s.layers[i].attention = ((i + 1) % static_cast<size_t>(s.full_attention_interval)) != 0
                                            ? AttentionKind::kLinear
                                            : AttentionKind::kFull;
        }
    } else if (types.empty()) {
        // Qwen2/Qwen3: sliding_attention for i >= max_window_layers when use_sliding_window.
        // Qwen3-MoE has no layer_types: every layer is full attention.
        for (size_t i = 0; i < n; ++i) {
            s.layers[i].sliding_window = s.family != ModelFamily::kQwen3Moe && s.sliding_window.has_value() &&
                                         static_cast<int64_t>(i) >= s.max_window_layers;
        }
    }
    if (!types.empty()) {
        if (types.size() != n)
            return f.fail("layer_types", "has " + std::to_string(types.size()) + " entries but num_hidden_layers is " +
                                             std::to_string(n));
        for (size_t i = 0; i < n; ++i) {
            const std::string& t = types[i];
            if (t == "full_attention") {
                s.layers[i].attention = AttentionKind::kFull;
            } else if (t == "linear_attention" && is_hybrid(s.family)) {
                s.layers[i].attention = AttentionKind::kLinear;
            } else if (t == "sliding_attention" && !is_hybrid(s.family)) {
                s.layers[i].sliding_window = true;
            } else {
                return f.fail("layer_types", "entry " + std::to_string(i) + " is \"" + t +
                                                 "\", which this model_type does not support");
            }
        }
    }

    // MLP plan.
    const bool per_layer_rule = s.family == ModelFamily::kQwen3Moe || s.family == ModelFamily::kQwen3Next;
    if (per_layer_rule && s.num_experts > 0 && s.decoder_sparse_step <= 0)
        return f.fail("decoder_sparse_step", "must be positive");
    for (size_t i = 0; i < n; ++i) {
        const auto idx = static_cast<int64_t>(i);
        bool moe = false;
        if (per_layer_rule) {
            // Qwen3MoeDecoderLayer / Qwen3NextDecoderLayer.
            moe = std::find(s.mlp_only_layers.begin(), s.mlp_only_layers.end(), idx) == s.mlp_only_layers.end() &&
                  s.num_experts > 0 && (idx + 1) % s.decoder_sparse_step == 0;
        } else {
            moe = s.family == ModelFamily::kQwen3_5Moe;
        }
        s.layers[i].mlp = moe ? MlpKind::kMoe : MlpKind::kDense;
    }
    return ok_status();
}

Status positive(const Fields& f, std::string_view key, int64_t v) {
    if (v <= 0) return f.fail(key, "must be positive, got " + std::to_string(v));
    return ok_status();
}

Status parse_text(const Fields& f, ModelSpec& s) {
    PAGODA_RETURN_IF_ERROR(f.get("vocab_size", s.vocab_size));
    PAGODA_RETURN_IF_ERROR(f.get("hidden_size", s.hidden_size));
    PAGODA_RETURN_IF_ERROR(f.get("intermediate_size", s.intermediate_size));
    PAGODA_RETURN_IF_ERROR(f.get("num_hidden_layers", s.num_hidden_layers));
    PAGODA_RETURN_IF_ERROR(f.get("num_attention_heads", s.num_attention_heads));
    // num_key_value_heads: None → num_attention_heads (Qwen2/Qwen3 __post_init__).
    if (f.has("num_key_value_heads")) {
        PAGODA_RETURN_IF_ERROR(f.get("num_key_value_heads", s.num_key_value_heads));
    } else if (s.family == ModelFamily::kQwen2 || s.family == ModelFamily::kQwen3) {
        s.num_key_value_heads = f.has("num_attention_heads") ? s.num_attention_heads : s.num_key_value_heads;
    }
    PAGODA_RETURN_IF_ERROR(f.get("hidden_act", s.hidden_act));
    PAGODA_RETURN_IF_ERROR(f.get("max_position_embeddings", s.max_position_embeddings));
    PAGODA_RETURN_IF_ERROR(f.get("rms_norm_eps", s.rms_norm_eps));
    PAGODA_RETURN_IF_ERROR(f.get("tie_word_embeddings", s.tie_word_embeddings));
    PAGODA_RETURN_IF_ERROR(positive(f, "hidden_size", s.hidden_size));
    PAGODA_RETURN_IF_ERROR(positive(f, "num_hidden_layers", s.num_hidden_layers));
    PAGODA_RETURN_IF_ERROR(positive(f, "num_attention_heads", s.num_attention_heads));
    PAGODA_RETURN_IF_ERROR(positive(f, "num_key_value_heads", s.num_key_value_heads));
    PAGODA_RETURN_IF_ERROR(positive(f, "vocab_size", s.vocab_size));
    if (s.num_attention_heads % s.num_key_value_heads != 0)
        return f.fail("num_key_value_heads", "(" + std::to_string(s.num_key_value_heads) +
                                                 ") must divide num_attention_heads (" +
                                                 std::to_string(s.num_attention_heads) + ")");
    if (s.num_hidden_layers > 100000) return f.fail("num_hidden_layers", "is implausibly large");

    // head_dim: a class field for qwen3 (128) and the hybrids (256); otherwise hidden / heads
    // (modeling: getattr(config, "head_dim", hidden_size // num_attention_heads)).
    if (s.head_dim == 0) s.head_dim = s.hidden_size / s.num_attention_heads;
    PAGODA_RETURN_IF_ERROR(f.get("head_dim", s.head_dim));
    PAGODA_RETURN_IF_ERROR(positive(f, "head_dim", s.head_dim));

    // Attention flavour.
    s.attention_bias = s.family == ModelFamily::kQwen2;  // Qwen2Attention: q/k/v bias=True always
    if (s.family != ModelFamily::kQwen2) PAGODA_RETURN_IF_ERROR(f.get("attention_bias", s.attention_bias));
    s.qk_norm = s.family != ModelFamily::kQwen2;
    s.zero_centered_norm = is_hybrid(s.family);
    s.attn_output_gate = is_hybrid(s.family);  // HF ignores the field: the gate is always on
    if (is_hybrid(s.family)) PAGODA_RETURN_IF_ERROR(f.get("attn_output_gate", s.attn_output_gate));

    // Sliding window: kept only when use_sliding_window (Qwen2/Qwen3/Qwen3-MoE __post_init__).
    if (!is_hybrid(s.family)) {
        PAGODA_RETURN_IF_ERROR(f.get("use_sliding_window", s.use_sliding_window));
        if (f.present("sliding_window")) {  // an explicit null means none
            if (f.has("sliding_window")) {
                int64_t w = 0;
                PAGODA_RETURN_IF_ERROR(f.get("sliding_window", w));
                s.sliding_window = w;
            } else {
                s.sliding_window.reset();
            }
        }
        PAGODA_RETURN_IF_ERROR(f.get("max_window_layers", s.max_window_layers));
        if (!s.use_sliding_window) s.sliding_window.reset();
    }

    // MoE.
    if (s.family == ModelFamily::kQwen3Moe || s.family == ModelFamily::kQwen3Next ||
        s.family == ModelFamily::kQwen3_5Moe) {
        // transformers 5 saves Qwen3-MoE's expert count as num_local_experts (its attribute map
        // reads either); released checkpoints use num_experts.
        PAGODA_RETURN_IF_ERROR(f.get(f.has("num_experts") ? "num_experts" : "num_local_experts", s.num_experts));
        PAGODA_RETURN_IF_ERROR(f.get("num_experts_per_tok", s.num_experts_per_tok));
        PAGODA_RETURN_IF_ERROR(f.get("moe_intermediate_size", s.moe_intermediate_size));
        if (s.family != ModelFamily::kQwen3Moe)
            PAGODA_RETURN_IF_ERROR(f.get("shared_expert_intermediate_size", s.shared_expert_intermediate_size));
        if (s.family != ModelFamily::kQwen3_5Moe) {
            PAGODA_RETURN_IF_ERROR(f.get("norm_topk_prob", s.norm_topk_prob));
            PAGODA_RETURN_IF_ERROR(f.get("decoder_sparse_step", s.decoder_sparse_step));
            PAGODA_RETURN_IF_ERROR(f.get_int_list("mlp_only_layers", s.mlp_only_layers, false));
        }
        if (s.num_experts < 0) return f.fail("num_experts", "must not be negative");
        if (s.num_experts > 0 && (s.num_experts_per_tok <= 0 || s.num_experts_per_tok > s.num_experts))
            return f.fail("num_experts_per_tok",
                          "must be in [1, num_experts], got " + std::to_string(s.num_experts_per_tok));
    }

    // Linear attention (Gated DeltaNet).
    if (is_hybrid(s.family)) {
        PAGODA_RETURN_IF_ERROR(f.get("linear_num_key_heads", s.linear_num_key_heads));
        PAGODA_RETURN_IF_ERROR(f.get("linear_num_value_heads", s.linear_num_value_heads));
        PAGODA_RETURN_IF_ERROR(f.get("linear_key_head_dim", s.linear_key_head_dim));
        PAGODA_RETURN_IF_ERROR(f.get("linear_value_head_dim", s.linear_value_head_dim));
        PAGODA_RETURN_IF_ERROR(f.get("linear_conv_kernel_dim", s.linear_conv_kernel_dim));
        PAGODA_RETURN_IF_ERROR(positive(f, "linear_num_key_heads", s.linear_num_key_heads));
        PAGODA_RETURN_IF_ERROR(positive(f, "linear_num_value_heads", s.linear_num_value_heads));
        PAGODA_RETURN_IF_ERROR(positive(f, "linear_key_head_dim", s.linear_key_head_dim));
        PAGODA_RETURN_IF_ERROR(positive(f, "linear_value_head_dim", s.linear_value_head_dim));
        PAGODA_RETURN_IF_ERROR(positive(f, "linear_conv_kernel_dim", s.linear_conv_kernel_dim));
        if (s.linear_num_value_heads % s.linear_num_key_heads != 0)
            return f.fail("linear_num_value_heads", "(" + std::to_string(s.linear_num_value_heads) +
                                                        ") must be a multiple of linear_num_key_heads (" +
                                                        std::to_string(s.linear_num_key_heads) + ")");
        PAGODA_RETURN_IF_ERROR(f.get("mtp_num_hidden_layers", s.mtp_num_hidden_layers));
    }

    PAGODA_RETURN_IF_ERROR(read_rope(f, s));
    PAGODA_RETURN_IF_ERROR(read_layer_plan(f, s));
    return ok_status();
}

Status read_token_ids(const Fields& f, ModelSpec& s) {
    PAGODA_RETURN_IF_ERROR(f.get("bos_token_id", s.bos_token_id));
    PAGODA_RETURN_IF_ERROR(f.get("pad_token_id", s.pad_token_id));
    PAGODA_RETURN_IF_ERROR(f.get_int_list("eos_token_id", s.eos_token_ids, true));
    std::string dtype = s.dtype;
    PAGODA_RETURN_IF_ERROR(f.get("torch_dtype", dtype));
    PAGODA_RETURN_IF_ERROR(f.get("dtype", dtype));  // transformers v5 name wins
    s.dtype = dtype;
    return ok_status();
}

std::string run_length_plan(const std::vector<std::string>& symbols) {
    // Finds the shortest period p such that the sequence is k ≥ 2 repeats of its first p symbols
    // ("L L L F x8"); otherwise lists runs ("F x3, L x2").
    const size_t n = symbols.size();
    if (n == 0) return "";
    for (size_t p = 1; p <= n / 2; ++p) {
        if (n % p) continue;
        bool ok = true;
        for (size_t i = p; i < n && ok; ++i)
            ok = symbols[i] == symbols[i - p];
        if (!ok) continue;
        std::string s;
        for (size_t i = 0; i < p; ++i)
            s += (i ? " " : "") + symbols[i];
        return s + " x" + std::to_string(n / p);
    }
    std::string s;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && symbols[j] == symbols[i])
            ++j;
        if (!s.empty()) s += ", ";
        s += symbols[i] + " x" + std::to_string(j - i);
        i = j;
    }
    return s;
}

}  // namespace

const std::vector<std::string_view>& supported_model_types() {
    static const std::vector<std::string_view> kList = [] {
        std::vector<std::string_view> v;
        for (const auto& t : kTypes)
            v.push_back(t.name);
        return v;
    }();
    return kList;
}

std::string_view family_name(ModelFamily family) {
    switch (family) {
        case ModelFamily::kQwen2:
            return "qwen2";
        case ModelFamily::kQwen3:
            return "qwen3";
        case ModelFamily::kQwen3Moe:
            return "qwen3_moe";
        case ModelFamily::kQwen3Next:
            return "qwen3_next";
        case ModelFamily::kQwen3_5:
            return "qwen3_5";
        case ModelFamily::kQwen3_5Moe:
            return "qwen3_5_moe";
    }
    return "unknown";
}

std::string_view to_string(AttentionKind kind) {
    return kind == AttentionKind::kFull ? "full_attention" : "linear_attention";
}
std::string_view to_string(MlpKind kind) {
    return kind == MlpKind::kDense ? "dense" : "moe";
}

namespace {

// One compressed-tensors config group's settings (its own format, weights and input activations) over `q`'s.
Status read_config_group(const Fields& g, QuantizationSpec& q) {
    PAGODA_RETURN_IF_ERROR(g.get("format", q.format));  // a group's own format (newer compressed-tensors) wins
    if (const Json* w = g.find("weights")) {
        if (!w->is_object()) return g.error("weights", "an object", *w);
        const Fields wf(*w, g.prefix() + "weights.");
        PAGODA_RETURN_IF_ERROR(wf.get("num_bits", q.bits));
        PAGODA_RETURN_IF_ERROR(wf.get("type", q.weight_type));
        PAGODA_RETURN_IF_ERROR(wf.get("strategy", q.strategy));
        PAGODA_RETURN_IF_ERROR(wf.get("group_size", q.group_size));
        PAGODA_RETURN_IF_ERROR(wf.get("symmetric", q.sym));
        PAGODA_RETURN_IF_ERROR(wf.get_int_list("block_structure", q.weight_block_size, false));
    }
    if (const Json* in = g.find("input_activations")) {
        if (!in->is_object()) return g.error("input_activations", "an object or null", *in);
        const Fields af(*in, g.prefix() + "input_activations.");
        PAGODA_RETURN_IF_ERROR(af.get("num_bits", q.input_bits));
        PAGODA_RETURN_IF_ERROR(af.get("type", q.input_type));
        PAGODA_RETURN_IF_ERROR(af.get("strategy", q.input_strategy));
        PAGODA_RETURN_IF_ERROR(af.get("group_size", q.input_group_size));
        PAGODA_RETURN_IF_ERROR(af.get("dynamic", q.input_dynamic));
    }
    return ok_status();
}

// Whether two compressed-tensors config groups store their weights alike.
bool same_scheme(const QuantizationSpec& a, const QuantizationSpec& b) {
    return a.format == b.format && a.weight_type == b.weight_type && a.bits == b.bits && a.strategy == b.strategy &&
           a.group_size == b.group_size && a.sym == b.sym && a.weight_block_size == b.weight_block_size &&
           a.input_bits == b.input_bits && a.input_type == b.input_type && a.input_strategy == b.input_strategy &&
           a.input_group_size == b.input_group_size && a.input_dynamic == b.input_dynamic;
}

// compressed-tensors' config_groups as it applies them to a model: a module takes the group of the first target that
// matches it, exact names first, then the "re:" expressions (re.match) in sorted order, then the class "Linear"
// (every projection); a target listed by two groups is the later one's. The group targeting "Linear" (else the first)
// gives `q` its settings, every other target becomes a module rule carrying its group.
Status read_config_groups(const Fields& f, const Json& groups, QuantizationSpec& q) {
    if (!groups.is_object() || groups.size() == 0)
        return f.error("config_groups", "an object of quantization groups", groups);
    std::vector<std::shared_ptr<QuantizationSpec>> specs;
    std::map<std::string, size_t> target_group;  // (sorted as compressed-tensors sorts its targets)
    size_t base = 0;
    for (const auto& [name, group] : groups.as_object()) {
        if (!group.is_object()) return f.error("config_groups", "an object of quantization groups", group);
        const Fields g(group, f.prefix() + "config_groups." + name + ".");
        auto spec = std::make_shared<QuantizationSpec>(q);
        spec->module_rules.clear();
        PAGODA_RETURN_IF_ERROR(read_config_group(g, *spec));
        std::vector<std::string> targets;
        PAGODA_RETURN_IF_ERROR(g.get_string_list("targets", targets));
        for (const std::string& t : targets) {
            if (t == "Linear") base = specs.size();
            target_group[t] = specs.size();
        }
        specs.push_back(std::move(spec));
    }
    std::vector<QuantizationSpec::ModuleRule> rules;
    if (specs.size() > 1) {
        for (const auto& [target, index] : target_group) {
            if (target == "Linear") continue;
            const bool regex = target.rfind("re:", 0) == 0;
            QuantizationSpec::ModuleRule r;
            r.pattern = regex ? target.substr(3) : target;
            r.match =
                regex ? QuantizationSpec::ModuleRule::Match::kFromStart : QuantizationSpec::ModuleRule::Match::kExact;
            r.group = specs[index];
            rules.push_back(std::move(r));
        }
    }
    q = *specs[base];
    q.module_rules = std::move(rules);
    return ok_status();
}

Status parse_quantization(const Fields& parent, QuantizationSpec& q) {
    const Json* qc = parent.find("quantization_config");
    if (!qc) return ok_status();
    if (!qc->is_object()) return parent.error("quantization_config", "an object", *qc);
    const Fields f(*qc, parent.prefix() + "quantization_config.");
    PAGODA_RETURN_IF_ERROR(f.get("quant_method", q.method));
    if (q.method.empty()) return f.fail("quant_method", "is missing");
    PAGODA_RETURN_IF_ERROR(f.get_int_list("weight_block_size", q.weight_block_size, false));
    PAGODA_RETURN_IF_ERROR(f.get("activation_scheme", q.activation_scheme));
    PAGODA_RETURN_IF_ERROR(f.get("fmt", q.fmt));
    PAGODA_RETURN_IF_ERROR(f.get("bits", q.bits));
    PAGODA_RETURN_IF_ERROR(f.get("w_bit", q.bits));  // AutoAWQ's spelling
    PAGODA_RETURN_IF_ERROR(f.get("group_size", q.group_size));
    PAGODA_RETURN_IF_ERROR(f.get("q_group_size", q.group_size));
    PAGODA_RETURN_IF_ERROR(f.get("zero_point", q.zero_point));
    PAGODA_RETURN_IF_ERROR(f.get("version", q.version));
    PAGODA_RETURN_IF_ERROR(f.get("desc_act", q.desc_act));
    PAGODA_RETURN_IF_ERROR(f.get("sym", q.sym));
    PAGODA_RETURN_IF_ERROR(f.get("format", q.format));
    PAGODA_RETURN_IF_ERROR(f.get("checkpoint_format", q.checkpoint_format));
    PAGODA_RETURN_IF_ERROR(f.get_string_list("modules_to_not_convert", q.ignore));
    if (f.has("ignore")) PAGODA_RETURN_IF_ERROR(f.get_string_list("ignore", q.ignore));
    const bool auto_round = q.method == "auto-round";
    if (auto_round) {
        PAGODA_RETURN_IF_ERROR(f.get("data_type", q.data_type));
        PAGODA_RETURN_IF_ERROR(f.get("packing_format", q.packing_format));
        PAGODA_RETURN_IF_ERROR(f.get("act_bits", q.act_bits));
    }
    if (const Json* groups = f.find("config_groups")) PAGODA_RETURN_IF_ERROR(read_config_groups(f, *groups, q));
    // A rule's settings over the checkpoint's (what it leaves out is the checkpoint's).
    using Rule = QuantizationSpec::ModuleRule;
    const auto rule_of = [&q](const Fields& m, std::string pattern, Rule::Match match) -> Result<Rule> {
        Rule r{std::move(pattern), match, q.bits, q.group_size, q.act_bits, q.sym, q.desc_act, q.data_type, nullptr};
        PAGODA_RETURN_IF_ERROR(m.get("bits", r.bits));
        PAGODA_RETURN_IF_ERROR(m.get("group_size", r.group_size));
        PAGODA_RETURN_IF_ERROR(m.get("act_bits", r.act_bits));
        PAGODA_RETURN_IF_ERROR(m.get("sym", r.sym));
        PAGODA_RETURN_IF_ERROR(m.get("desc_act", r.desc_act));
        PAGODA_RETURN_IF_ERROR(m.get("data_type", r.data_type));
        return r;
    };
    if (const Json* dynamic = f.find("dynamic"); dynamic && !dynamic->is_null()) {
        if (!dynamic->is_object()) return f.error("dynamic", "an object of module rules", *dynamic);
        for (const auto& [rule, settings] : dynamic->as_object()) {
            if (rule.rfind("-:", 0) == 0) continue;  // leaves modules unquantized
            if (!settings.is_object()) return f.error("dynamic", "an object of module settings", settings);
            const std::string pattern = rule.rfind("+:", 0) == 0 ? rule.substr(2) : rule;
            PAGODA_ASSIGN_OR_RETURN(Rule r, rule_of(Fields(settings, f.prefix() + "dynamic." + rule + "."), pattern,
                                                    Rule::Match::kFromStart));
            if (r.bits < 16) q.module_rules.push_back(std::move(r));
        }
    }
    if (const Json* extra = auto_round ? f.find("extra_config") : nullptr; extra && !extra->is_null()) {
        if (!extra->is_object()) return f.error("extra_config", "an object of module settings", *extra);
        std::vector<Rule> exact, searched;  // (vLLM's order: an exact name first, then the expressions)
        for (const auto& [module, settings] : extra->as_object()) {
            if (!settings.is_object()) return f.error("extra_config", "an object of module settings", settings);
            const bool regex = module.find_first_of("*+?^$()[]{}|\\") != std::string::npos;
            PAGODA_ASSIGN_OR_RETURN(Rule r, rule_of(Fields(settings, f.prefix() + "extra_config." + module + "."),
                                                    module, regex ? Rule::Match::kSearch : Rule::Match::kExact));
            if (r.bits < 16) (regex ? searched : exact).push_back(std::move(r));
        }
        q.module_rules.insert(q.module_rules.end(), exact.begin(), exact.end());
        q.module_rules.insert(q.module_rules.end(), searched.begin(), searched.end());
    }
    const auto int_or = &QuantizationSpec::data_type_or_int;
    const bool all_default = std::all_of(q.module_rules.begin(), q.module_rules.end(), [&](const Rule& r) {
        if (r.group) return same_scheme(*r.group, q);
        return r.bits == q.bits && r.group_size == q.group_size && r.act_bits == q.act_bits && r.sym == q.sym &&
               r.desc_act == q.desc_act && int_or(r.data_type) == int_or(q.data_type);
    });
    if (all_default) q.module_rules.clear();
    return ok_status();
}

}  // namespace

std::string QuantizationSpec::describe() const {
    if (method.empty()) return "none";
    std::string s = method;
    auto add = [&](const std::string& part) { s += ", " + part; };
    auto group = [&] { return group_size > 0 ? "group " + std::to_string(group_size) : std::string("per-channel"); };
    if (method == "fp8") {
        if (!fmt.empty() && fmt != "e4m3") add(fmt);  // e4m3 is what every fp8 checkpoint Qwen publishes has
        if (weight_block_size.size() == 2)
            add(std::to_string(weight_block_size[0]) + "x" + std::to_string(weight_block_size[1]) + " block scales");
        else
            add("per-tensor scales");
        if (!activation_scheme.empty()) add(activation_scheme + " activation scales");
    } else if (method == "awq") {
        add("int" + std::to_string(bits)), add(group()), add(zero_point ? "zero points" : "symmetric");
    } else if (method == "gptq") {
        add("int" + std::to_string(bits)), add(group()), add(sym ? "symmetric" : "zero points");
        if (desc_act) add("act-order");
    } else if (method == "auto-round") {
        add((data_type.empty() ? "int" : data_type) + std::to_string(bits)), add(group());
        add(sym ? "symmetric" : "zero points"), add(packing_format.empty() ? "auto_round:auto_gptq" : packing_format);
    } else if (method == "compressed-tensors") {
        if (!format.empty()) add(format);
        add((weight_type.empty() ? "int" : weight_type) + std::to_string(bits) + " weights");
        if (!strategy.empty()) add(strategy == "group" ? group() : strategy + " scales");
        if (weight_type == "int") add(sym ? "symmetric" : "zero points");
        if (input_bits > 0) add(input_type + std::to_string(input_bits) + " activations");
    }
    if (!module_rules.empty())
        add(std::to_string(module_rules.size()) + (module_rules.size() == 1 ? " module rule" : " module rules"));
    return s;
}

Result<ModelSpec> parse_model_spec(const Json& config) {
    if (!config.is_object()) return Status::error("config is not a JSON object");
    const Fields top(config, "");
    std::string model_type;
    PAGODA_RETURN_IF_ERROR(top.get("model_type", model_type));
    if (model_type.empty())
        return Status::error("config has no \"model_type\"; supported model types: " + supported_list());
    const TypeEntry* entry = nullptr;
    for (const auto& t : kTypes)
        if (t.name == model_type) entry = &t;
    if (!entry)
        return Status::error("unsupported model_type \"" + model_type +
                             "\"; supported model types: " + supported_list());

    ModelSpec s;
    s.family = entry->family;
    s.model_type = model_type;
    s.text_model_type = model_type;
    PAGODA_RETURN_IF_ERROR(top.get_string_list("architectures", s.architectures));
    apply_class_defaults(s);

    if (entry->nested) {
        s.weight_prefix = "model.language_model.";
        static const Json kEmpty = Json::object();
        const Json* text = top.find("text_config");
        if (text && !text->is_object()) return top.error("text_config", "an object", *text);
        const Fields tf(text ? *text : kEmpty, "text_config.");
        std::string text_type = s.family == ModelFamily::kQwen3_5 ? "qwen3_5_text" : "qwen3_5_moe_text";
        PAGODA_RETURN_IF_ERROR(tf.get("model_type", text_type));
        s.text_model_type = text_type;
        PAGODA_RETURN_IF_ERROR(parse_text(tf, s));
        // The language model's tie flag is the top-level one (the lm_head belongs to the
        // ForConditionalGeneration model, whose config is the top level; default false).
        s.tie_word_embeddings = false;
        PAGODA_RETURN_IF_ERROR(top.get("tie_word_embeddings", s.tie_word_embeddings));
        // Token ids: text_config's, overridden by the top level's (the chat end token sits there).
        PAGODA_RETURN_IF_ERROR(read_token_ids(tf, s));
        PAGODA_RETURN_IF_ERROR(read_token_ids(top, s));
        PAGODA_RETURN_IF_ERROR(parse_quantization(tf, s.quantization));
        PAGODA_RETURN_IF_ERROR(parse_quantization(top, s.quantization));  // the top level's wins
    } else {
        PAGODA_RETURN_IF_ERROR(parse_text(top, s));
        PAGODA_RETURN_IF_ERROR(read_token_ids(top, s));
        PAGODA_RETURN_IF_ERROR(parse_quantization(top, s.quantization));
    }
    return s;
}

Result<ModelSpec> load_model_spec(const std::string& path) {
    auto text = read_file(path);
    if (!text.ok()) return text.status();
    auto json = Json::parse(text.value());
    if (!json.ok()) return Status::error(path + ": " + json.message());
    auto spec = parse_model_spec(json.value());
    if (!spec.ok()) return spec.status().with_context(path);
    return spec;
}

bool ModelSpec::has_linear_attention() const {
    return num_linear_attention_layers() > 0;
}

bool ModelSpec::has_moe() const {
    return std::any_of(layers.begin(), layers.end(), [](const LayerSpec& l) { return l.mlp == MlpKind::kMoe; });
}

int64_t ModelSpec::num_full_attention_layers() const {
    return std::count_if(layers.begin(), layers.end(),
                         [](const LayerSpec& l) { return l.attention == AttentionKind::kFull; });
}

int64_t ModelSpec::num_linear_attention_layers() const {
    return static_cast<int64_t>(layers.size()) - num_full_attention_layers();
}

size_t ModelSpec::kv_cache_bytes_per_token(size_t elem_bytes) const {
    return static_cast<size_t>(num_full_attention_layers()) * 2 * static_cast<size_t>(num_key_value_heads) *
           static_cast<size_t>(head_dim) * elem_bytes;
}

size_t ModelSpec::linear_conv_state_bytes_per_layer() const {
    if (linear_conv_kernel_dim <= 0) return 0;
    // The causal conv runs over q, k and v: conv_dim = 2·Hk·Dk + Hv·Dv; it keeps kernel-1 past inputs.
    const auto conv_dim = static_cast<size_t>(2 * linear_num_key_heads * linear_key_head_dim +
                                              linear_num_value_heads * linear_value_head_dim);
    return conv_dim * static_cast<size_t>(linear_conv_kernel_dim - 1) * sizeof(float);
}

size_t ModelSpec::linear_recurrent_state_bytes_per_layer() const {
    return static_cast<size_t>(linear_num_value_heads) * static_cast<size_t>(linear_key_head_dim) *
           static_cast<size_t>(linear_value_head_dim) * sizeof(float);
}

size_t ModelSpec::linear_state_bytes_per_sequence() const {
    return static_cast<size_t>(num_linear_attention_layers()) *
           (linear_conv_state_bytes_per_layer() + linear_recurrent_state_bytes_per_layer());
}

std::string ModelSpec::attention_plan_string() const {
    std::vector<std::string> symbols;
    for (const LayerSpec& l : layers)
        symbols.push_back(l.attention == AttentionKind::kLinear ? "L" : (l.sliding_window ? "S" : "F"));
    return run_length_plan(symbols);
}

std::string ModelSpec::mlp_plan_string() const {
    std::vector<std::string> symbols;
    for (const LayerSpec& l : layers)
        symbols.push_back(std::string(to_string(l.mlp)));
    return run_length_plan(symbols);
}

Result<GenerationDefaults> parse_generation_defaults(const Json& config) {
    if (!config.is_object()) return Status::error("generation config is not a JSON object");
    const Fields f(config, "");
    GenerationDefaults g;
    PAGODA_RETURN_IF_ERROR(f.get("temperature", g.temperature));
    PAGODA_RETURN_IF_ERROR(f.get("top_p", g.top_p));
    PAGODA_RETURN_IF_ERROR(f.get("top_k", g.top_k));
    PAGODA_RETURN_IF_ERROR(f.get("min_p", g.min_p));
    PAGODA_RETURN_IF_ERROR(f.get("repetition_penalty", g.repetition_penalty));
    PAGODA_RETURN_IF_ERROR(f.get("do_sample", g.do_sample));
    PAGODA_RETURN_IF_ERROR(f.get("max_new_tokens", g.max_new_tokens));
    PAGODA_RETURN_IF_ERROR(f.get("bos_token_id", g.bos_token_id));
    PAGODA_RETURN_IF_ERROR(f.get("pad_token_id", g.pad_token_id));
    PAGODA_RETURN_IF_ERROR(f.get_int_list("eos_token_id", g.eos_token_ids, true));
    return g;
}

Result<GenerationDefaults> load_generation_defaults(const std::string& path) {
    auto text = read_file(path);
    if (!text.ok()) return text.status();
    auto json = Json::parse(text.value());
    if (!json.ok()) return Status::error(path + ": " + json.message());
    auto g = parse_generation_defaults(json.value());
    if (!g.ok()) return g.status().with_context(path);
    return g;
}

}  // namespace pagoda::model
