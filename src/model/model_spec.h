// ModelSpec: the typed form of a Hugging Face config.json for the Qwen families, with defaults
// exactly as transformers' config classes define them, plus generation_config.json defaults.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pagoda {
class Json;
}

namespace pagoda::model {

enum class ModelFamily { kQwen2, kQwen3, kQwen3Moe, kQwen3Next, kQwen3_5, kQwen3_5Moe };

enum class AttentionKind { kFull, kLinear };  // softmax attention with a KV cache / Gated DeltaNet
enum class MlpKind { kDense, kMoe };

struct LayerSpec {
    AttentionKind attention = AttentionKind::kFull;
    MlpKind mlp = MlpKind::kDense;
    bool sliding_window = false;  // full attention limited to ModelSpec::sliding_window ("sliding_attention")
};

struct RopeSpec {
    std::string type = "default";        // rope_type ("default", "yarn", "linear", "dynamic", ...)
    double theta = 10000.0;              // rope_theta
    double partial_rotary_factor = 1.0;  // fraction of head_dim that rotates
    int64_t rotary_dim = 0;              // head_dim * partial_rotary_factor (even)
    // Scaling (present for yarn/linear/dynamic; 0 when absent).
    double factor = 0.0;
    int64_t original_max_position_embeddings = 0;
    std::optional<double> beta_fast, beta_slow, attention_factor;  // yarn, when given
    std::optional<double> mscale, mscale_all_dim;                  // yarn: attention_factor's inputs, when given
    bool truncate = true;                                          // yarn: whole-dim correction range
    // Multimodal RoPE (Qwen3.5): sections per position stream; text-only input is plain RoPE.
    std::vector<int64_t> mrope_section;
    bool mrope_interleaved = false;
};

// config.json's quantization_config (top level, or under text_config for Qwen3.5), as Qwen publishes its quantized
// checkpoints: fp8 (Qwen3-*-FP8), awq (Qwen*-AWQ), gptq (Qwen*-GPTQ-Int4/Int8), compressed-tensors (llm-compressor).
struct QuantizationSpec {
    std::string method;  // quant_method as written; empty: not quantized
    // fp8
    std::string fmt;                         // "e4m3" (Qwen's checkpoints) / "e5m2"; empty: not given (e4m3)
    std::vector<int64_t> weight_block_size;  // [128, 128]: block scales; empty: per-tensor (or per-channel) scales
    std::string activation_scheme;           // "dynamic" / "static"
    // awq, gptq, and compressed-tensors' weights
    int64_t bits = 0;
    int64_t group_size = 0;         // -1 or 0: per output channel
    bool zero_point = false;        // awq: asymmetric with zero points
    std::string version;            // awq kernel layout: "gemm" / "gemv"
    bool desc_act = false;          // gptq: act-order (columns permuted by g_idx)
    bool sym = true;                // gptq / compressed-tensors: symmetric
    std::string checkpoint_format;  // gptq: "gptq" (zeros stored minus one) / "gptq_v2"; empty: not given (gptq)
    // compressed-tensors: the config group that targets every Linear (else the first group); the others are
    // module_rules
    std::string format;               // "float-quantized", "pack-quantized", "int-quantized", ...
    std::string weight_type;          // "int" / "float"
    std::string strategy;             // "tensor", "channel", "group", "block"
    int64_t input_bits = 0;           // input_activations.num_bits; 0: weight-only
    std::string input_type;           // input_activations.type
    std::string input_strategy;       // input_activations.strategy: "token", "group", "tensor"
    int64_t input_group_size = 0;     // input_activations.group_size (strategy group)
    bool input_dynamic = false;       // input_activations.dynamic: scales computed on the fly
    std::vector<std::string> ignore;  // modules_to_not_convert / ignore: layers left unquantized
    // auto-round (Intel's AutoRound): the weights' data type ("int") and how they are packed ("auto_round:auto_gptq",
    // "auto_round:auto_awq", ...).
    std::string data_type;
    std::string packing_format;
    int64_t act_bits = 0;  // its activations' bits (16 or not given: weight-only)
    // Rules that give the modules they match their own settings, in the order they apply (the first that matches a
    // module wins): auto-round's extra_config entries (exact module names first, then the keys with regular
    // expression characters, searched for in the name) and GPTQModel's `dynamic` rules ("+:regex" or a bare regex,
    // matched from the name's start), and compressed-tensors' other config groups (each target a rule: exact names,
    // then the "re:" ones in their sorted order, matched from the start; the base group's "Linear" decides the rest).
    // Rules of 16 bits or more, and dynamic's "-:regex" ones, only leave modules unquantized (Qwen's Qwen3.5 GPTQ
    // releases: "-:.*attn.*"; auto-round: routers, shared experts), which the stored tensors show by themselves: they
    // are not kept. Empty when every rule says what the checkpoint says.
    struct ModuleRule {
        enum class Match : uint8_t { kExact, kSearch, kFromStart };
        std::string pattern;
        Match match = Match::kExact;
        int64_t bits = 0, group_size = 0, act_bits = 0;
        bool sym = true, desc_act = false;
        std::string data_type;
        // compressed-tensors: the rule's config group whole (its format, weights and activations as the base's
        // fields), which decides the module instead of the fields above (left at their defaults).
        std::shared_ptr<const QuantizationSpec> group;
    };
    std::vector<ModuleRule> module_rules;
    // A data type as auto-round means it: unset is int.
    static std::string data_type_or_int(const std::string& t) { return t.empty() ? "int" : t; }

    bool quantized() const { return !method.empty(); }
    // The format and its variant, e.g. "fp8, 128x128 block scales", "awq, int4, group 128, zero points".
    std::string describe() const;
};

struct ModelSpec {
    ModelFamily family = ModelFamily::kQwen2;
    std::string model_type;       // top-level model_type ("qwen3_5")
    std::string text_model_type;  // model_type of the language model ("qwen3_5_text"); == model_type when flat
    std::vector<std::string> architectures;
    // Prefix of the language model's tensors: "model." or, for Qwen3.5 multimodal checkpoints,
    // "model.language_model.". lm_head.weight is always top level.
    std::string weight_prefix = "model.";

    int64_t hidden_size = 0;
    int64_t intermediate_size = 0;  // dense MLP width (0 where the family has none, e.g. qwen3_5_moe)
    int64_t num_hidden_layers = 0;
    int64_t num_attention_heads = 0;
    int64_t num_key_value_heads = 0;
    int64_t head_dim = 0;  // explicit, or hidden_size / num_attention_heads
    int64_t vocab_size = 0;
    double rms_norm_eps = 1e-6;
    std::string hidden_act = "silu";
    int64_t max_position_embeddings = 0;
    bool tie_word_embeddings = false;
    RopeSpec rope;

    // Attention details by family.
    bool attention_bias = false;      // q/k/v bias (qwen2: always true)
    bool qk_norm = false;             // per-head RMSNorm on q and k (qwen3 and later)
    bool attn_output_gate = false;    // gated attention: q_proj has 2x outputs (qwen3_next, qwen3_5)
    bool zero_centered_norm = false;  // RMSNorm as x̂·(1+w) (qwen3_next, qwen3_5)

    // Sliding window (Qwen2/Qwen3 configs carry these; released models leave them off).
    bool use_sliding_window = false;
    std::optional<int64_t> sliding_window;  // nullopt unless use_sliding_window (as transformers does)
    int64_t max_window_layers = 0;

    // Mixture of experts (0 / empty when dense).
    int64_t num_experts = 0;
    int64_t num_experts_per_tok = 0;
    int64_t moe_intermediate_size = 0;
    int64_t shared_expert_intermediate_size = 0;  // 0: no shared expert (qwen3_moe)
    bool norm_topk_prob = false;                  // renormalise top-k weights (always true for qwen3_5_moe)
    int64_t decoder_sparse_step = 1;
    std::vector<int64_t> mlp_only_layers;
    bool experts_fused = false;  // checkpoint stores experts.gate_up_proj / down_proj fused (qwen3_5_moe)

    // Linear attention (Gated DeltaNet; 0 when the family has none).
    int64_t linear_num_key_heads = 0;
    int64_t linear_num_value_heads = 0;
    int64_t linear_key_head_dim = 0;
    int64_t linear_value_head_dim = 0;
    int64_t linear_conv_kernel_dim = 0;
    int64_t full_attention_interval = 0;  // as given or defaulted (4); 0 for families without it
    int64_t mtp_num_hidden_layers = 0;    // multi-token-prediction layers in the checkpoint

    std::vector<LayerSpec> layers;  // one per hidden layer

    QuantizationSpec quantization;

    std::string dtype;  // torch_dtype / dtype as written ("bfloat16"); empty when absent
    std::optional<int64_t> bos_token_id;
    std::optional<int64_t> pad_token_id;
    std::vector<int64_t> eos_token_ids;  // int or list in the file

    bool has_linear_attention() const;
    bool has_moe() const;
    int64_t num_full_attention_layers() const;
    int64_t num_linear_attention_layers() const;
    // K and V for every full-attention layer: layers × 2 × kv_heads × head_dim × elem_bytes.
    size_t kv_cache_bytes_per_token(size_t elem_bytes) const;
    // Gated DeltaNet state per sequence, fp32: conv state (conv_dim × (kernel-1)) plus the
    // recurrent state (v_heads × key_dim × value_dim), summed over linear-attention layers.
    size_t linear_state_bytes_per_sequence() const;
    size_t linear_conv_state_bytes_per_layer() const;
    size_t linear_recurrent_state_bytes_per_layer() const;
    // Compact plan, e.g. "L L L F x8" (runs of a repeated pattern) or "F x28".
    std::string attention_plan_string() const;
    std::string mlp_plan_string() const;  // e.g. "dense x28", "moe x48", "dense 0, moe 1-47"
};

std::string_view family_name(ModelFamily family);  // "qwen3_next"
std::string_view to_string(AttentionKind kind);    // "full_attention" / "linear_attention"
std::string_view to_string(MlpKind kind);          // "dense" / "moe"
// The model_type values accepted at the top level of config.json.
const std::vector<std::string_view>& supported_model_types();

// Parses a config.json document. Unknown model_type: an error listing the supported ones.
// A field of the wrong type: an error naming the field.
Result<ModelSpec> parse_model_spec(const Json& config);
// Reads and parses `path` (errors are prefixed with the path).
Result<ModelSpec> load_model_spec(const std::string& path);

// generation_config.json: the model's sampling defaults. Every field is optional.
struct GenerationDefaults {
    std::optional<double> temperature;
    std::optional<double> top_p;
    std::optional<int64_t> top_k;
    std::optional<double> min_p;
    std::optional<double> repetition_penalty;
    std::optional<bool> do_sample;
    std::optional<int64_t> max_new_tokens;
    std::optional<int64_t> bos_token_id;
    std::optional<int64_t> pad_token_id;
    std::vector<int64_t> eos_token_ids;  // int or list in the file
};

Result<GenerationDefaults> parse_generation_defaults(const Json& config);
Result<GenerationDefaults> load_generation_defaults(const std::string& path);

}  // namespace pagoda::model
