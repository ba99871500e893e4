// ModelSpec from config.json for every supported model_type. Expected values come from the configs
// written here (field lists of the released models) and from the defaults of transformers' config
// classes (configuration_qwen*.py); tests/oracle/model checks the same against transformers itself.
#include <gtest/gtest.h>

#include <string>

#include "common/file.h"
#include "common/json.h"
#include "model/model_spec.h"
#include "model/quantization.h"

namespace pagoda::model {
namespace {

ModelSpec parse_ok(const std::string& text) {
    auto json = Json::parse(text);
    EXPECT_TRUE(json.ok()) << json.message();
    auto spec = parse_model_spec(json.value());
    EXPECT_TRUE(spec.ok()) << spec.message();
    return spec.ok() ? spec.value() : ModelSpec{};
}

std::string parse_error(const std::string& text) {
    auto json = Json::parse(text);
    EXPECT_TRUE(json.ok()) << json.message();
    auto spec = parse_model_spec(json.value());
    EXPECT_FALSE(spec.ok());
    return spec.ok() ? std::string() : spec.message();
}

// Qwen2.5-0.5B-Instruct's fields.
const char* kQwen25 = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645,
  "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02, "intermediate_size": 4864,
  "max_position_embeddings": 32768, "max_window_layers": 21, "model_type": "qwen2", "num_attention_heads": 14,
  "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936})";

TEST(ModelSpec, Qwen2) {
    const ModelSpec s = parse_ok(kQwen25);
    EXPECT_EQ(s.family, ModelFamily::kQwen2);
    EXPECT_EQ(s.hidden_size, 896);
    EXPECT_EQ(s.num_hidden_layers, 24);
    EXPECT_EQ(s.num_attention_heads, 14);
    EXPECT_EQ(s.num_key_value_heads, 2);
    EXPECT_EQ(s.head_dim, 64);  // 896 / 14: Qwen2 has no head_dim field
    EXPECT_EQ(s.intermediate_size, 4864);
    EXPECT_TRUE(s.attention_bias);  // Qwen2Attention always has q/k/v bias
    EXPECT_FALSE(s.qk_norm);
    EXPECT_FALSE(s.zero_centered_norm);
    EXPECT_TRUE(s.tie_word_embeddings);
    EXPECT_DOUBLE_EQ(s.rope.theta, 1e6);
    EXPECT_DOUBLE_EQ(s.rope.partial_rotary_factor, 1.0);
    EXPECT_EQ(s.rope.rotary_dim, 64);
    EXPECT_EQ(s.rope.type, "default");
    EXPECT_FALSE(s.sliding_window.has_value());  // dropped when use_sliding_window is false
    EXPECT_EQ(s.dtype, "bfloat16");
    EXPECT_EQ(s.bos_token_id, 151643);
    EXPECT_EQ(s.eos_token_ids, (std::vector<int64_t>{151645}));
    EXPECT_EQ(s.weight_prefix, "model.");
    ASSERT_EQ(s.layers.size(), 24u);
    EXPECT_EQ(s.num_full_attention_layers(), 24);
    EXPECT_FALSE(s.has_moe());
    EXPECT_EQ(s.attention_plan_string(), "F x24");
    EXPECT_EQ(s.mlp_plan_string(), "dense x24");
    EXPECT_EQ(s.kv_cache_bytes_per_token(2), 24u * 2 * 2 * 64 * 2);
    EXPECT_EQ(s.linear_state_bytes_per_sequence(), 0u);
}

TEST(ModelSpec, Qwen2SlidingWindowLayers) {
    // With use_sliding_window, layers from max_window_layers on are sliding (Qwen2Config.__post_init__).
    const ModelSpec s = parse_ok(R"({"model_type":"qwen2","num_hidden_layers":4,"hidden_size":64,
        "num_attention_heads":4,"use_sliding_window":true,"sliding_window":128,"max_window_layers":2})");
    ASSERT_TRUE(s.sliding_window.has_value());
    EXPECT_EQ(*s.sliding_window, 128);
    EXPECT_FALSE(s.layers[1].sliding_window);
    EXPECT_TRUE(s.layers[2].sliding_window);
    EXPECT_EQ(s.num_key_value_heads, 4);  // None → num_attention_heads
    EXPECT_EQ(s.attention_plan_string(), "F x2, S x2");
}

TEST(ModelSpec, Qwen3) {
    const ModelSpec s = parse_ok(R"({
      "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "bos_token_id": 151643, "eos_token_id": 151645,
      "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024, "intermediate_size": 3072,
      "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3", "num_attention_heads": 16,
      "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null,
      "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
      "use_sliding_window": false, "vocab_size": 151936})");
    EXPECT_EQ(s.family, ModelFamily::kQwen3);
    EXPECT_EQ(s.head_dim, 128);  // explicit, ≠ 1024/16
    EXPECT_TRUE(s.qk_norm);
    EXPECT_FALSE(s.attention_bias);
    EXPECT_EQ(s.max_position_embeddings, 40960);
    EXPECT_DOUBLE_EQ(s.rope.theta, 1e6);
    EXPECT_EQ(s.kv_cache_bytes_per_token(2), 28u * 2 * 8 * 128 * 2);
}

TEST(ModelSpec, Qwen3ClassDefaults) {
    // Qwen3Config: head_dim defaults to 128 (not hidden/heads); rope_theta to 10000.
    const ModelSpec s =
        parse_ok(R"({"model_type":"qwen3","hidden_size":512,"num_attention_heads":8,"num_hidden_layers":2})");
    EXPECT_EQ(s.head_dim, 128);
    EXPECT_EQ(s.num_key_value_heads, 8);
    EXPECT_DOUBLE_EQ(s.rope.theta, 10000.0);
    EXPECT_EQ(s.vocab_size, 151936);
    EXPECT_EQ(s.intermediate_size, 22016);
    EXPECT_DOUBLE_EQ(s.rms_norm_eps, 1e-6);
    EXPECT_FALSE(s.tie_word_embeddings);
}

TEST(ModelSpec, Qwen3Moe) {
    const ModelSpec s = parse_ok(R"({
      "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "bos_token_id": 151643,
      "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128, "hidden_size": 2048,
      "intermediate_size": 6144, "max_position_embeddings": 40960, "mlp_only_layers": [], "model_type": "qwen3_moe",
      "moe_intermediate_size": 768, "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
      "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
      "rope_theta": 1000000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 151936})");
    EXPECT_EQ(s.family, ModelFamily::kQwen3Moe);
    EXPECT_EQ(s.head_dim, 128);
    EXPECT_EQ(s.num_experts, 128);
    EXPECT_EQ(s.num_experts_per_tok, 8);
    EXPECT_EQ(s.moe_intermediate_size, 768);
    EXPECT_EQ(s.shared_expert_intermediate_size, 0);
    EXPECT_TRUE(s.norm_topk_prob);
    EXPECT_FALSE(s.experts_fused);
    EXPECT_EQ(s.mlp_plan_string(), "moe x48");
}

TEST(ModelSpec, Qwen3MoeExpertCountUnderTransformers5Name) {
    // transformers 5 save_pretrained writes num_local_experts instead of num_experts.
    const ModelSpec s = parse_ok(R"({"model_type": "qwen3_moe", "hidden_size": 64, "num_attention_heads": 4,
      "num_key_value_heads": 2, "num_hidden_layers": 2, "num_local_experts": 8, "num_experts_per_tok": 2,
      "moe_intermediate_size": 32, "vocab_size": 1000})");
    EXPECT_EQ(s.num_experts, 8);
    EXPECT_EQ(s.mlp_plan_string(), "moe x2");
}

TEST(ModelSpec, Qwen3MoeSparseStepAndMlpOnlyLayers) {
    // A layer is MoE iff i ∉ mlp_only_layers and (i+1) % decoder_sparse_step == 0 (Qwen3MoeDecoderLayer).
    const ModelSpec s = parse_ok(R"({"model_type":"qwen3_moe","num_hidden_layers":6,"decoder_sparse_step":2,
        "mlp_only_layers":[3]})");
    EXPECT_EQ(s.head_dim, 2048 / 32);  // no head_dim: hidden / heads (class defaults 2048, 32)
    EXPECT_FALSE(s.norm_topk_prob);    // Qwen3MoeConfig default
    std::vector<MlpKind> got;
    for (const auto& l : s.layers)
        got.push_back(l.mlp);
    EXPECT_EQ(got, (std::vector<MlpKind>{MlpKind::kDense, MlpKind::kMoe, MlpKind::kDense, MlpKind::kDense,
                                         MlpKind::kDense, MlpKind::kMoe}));
    EXPECT_EQ(parse_ok(R"({"model_type":"qwen3_moe","num_hidden_layers":4,"num_experts":0})").mlp_plan_string(),
              "dense x4");
    EXPECT_NE(parse_error(R"({"model_type":"qwen3_moe","decoder_sparse_step":0})").find("decoder_sparse_step"),
              std::string::npos);
}

const char* kQwen3Next = R"({
  "architectures": ["Qwen3NextForCausalLM"], "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645,
  "full_attention_interval": 4, "head_dim": 256, "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 5120,
  "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
  "linear_value_head_dim": 128, "max_position_embeddings": 262144, "mlp_only_layers": [], "model_type": "qwen3_next",
  "moe_intermediate_size": 512, "norm_topk_prob": true, "num_attention_heads": 16, "num_experts": 512,
  "num_experts_per_tok": 10, "num_hidden_layers": 48, "num_key_value_heads": 2, "partial_rotary_factor": 0.25,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 10000000, "shared_expert_intermediate_size": 512,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 151936})";

TEST(ModelSpec, Qwen3Next) {
    const ModelSpec s = parse_ok(kQwen3Next);
    EXPECT_EQ(s.family, ModelFamily::kQwen3Next);
    EXPECT_TRUE(s.zero_centered_norm);
    EXPECT_TRUE(s.attn_output_gate);
    EXPECT_TRUE(s.qk_norm);
    EXPECT_EQ(s.head_dim, 256);
    EXPECT_DOUBLE_EQ(s.rope.theta, 1e7);
    EXPECT_DOUBLE_EQ(s.rope.partial_rotary_factor, 0.25);
    EXPECT_EQ(s.rope.rotary_dim, 64);
    EXPECT_TRUE(s.rope.mrope_section.empty());
    EXPECT_EQ(s.full_attention_interval, 4);
    // Full attention at 3, 7, 11, ... ((i+1) % 4 == 0).
    EXPECT_EQ(s.layers[2].attention, AttentionKind::kLinear);
    EXPECT_EQ(s.layers[3].attention, AttentionKind::kFull);
    EXPECT_EQ(s.attention_plan_string(), "L L L F x12");
    EXPECT_EQ(s.num_full_attention_layers(), 12);
    EXPECT_EQ(s.mlp_plan_string(), "moe x48");
    EXPECT_EQ(s.shared_expert_intermediate_size, 512);
    EXPECT_EQ(s.kv_cache_bytes_per_token(2), 12u * 2 * 2 * 256 * 2);
    // conv_dim = 2·16·128 + 32·128 = 8192, 3 past inputs; recurrent 32·128·128; fp32; 36 linear layers.
    EXPECT_EQ(s.linear_conv_state_bytes_per_layer(), 8192u * 3 * 4);
    EXPECT_EQ(s.linear_recurrent_state_bytes_per_layer(), 32u * 128 * 128 * 4);
    EXPECT_EQ(s.linear_state_bytes_per_sequence(), 36u * (8192 * 3 * 4 + 32 * 128 * 128 * 4));
}

TEST(ModelSpec, Qwen3NextDefaultsWithoutLayerFields) {
    // Neither layer_types nor full_attention_interval: the interval defaults to 4; partial_rotary_factor to 0.25.
    const ModelSpec s = parse_ok(R"({"model_type":"qwen3_next","num_hidden_layers":8})");
    EXPECT_EQ(s.attention_plan_string(), "L L L F x2");
    EXPECT_DOUBLE_EQ(s.rope.partial_rotary_factor, 0.25);
    EXPECT_EQ(s.num_experts, 512);
    EXPECT_EQ(s.num_experts_per_tok, 10);
    // An explicit interval of 2.
    EXPECT_EQ(parse_ok(R"({"model_type":"qwen3_next","num_hidden_layers":4,"full_attention_interval":2})")
                  .attention_plan_string(),
              "L F x2");
}

std::string qwen35_4b_config() {
    auto text = read_file(std::string(PAGODA_SHARED_DIR) +
                          "/qwen-tokenizers/qwen3.5-4b/variants/invokeai-qwen3_5_4b_text_config.json");
    if (!text.ok()) return "";
    return R"({"architectures":["Qwen3_5ForConditionalGeneration"],"model_type":"qwen3_5","tie_word_embeddings":true,)"
           R"("text_config":)" +
           text.value() + "}";
}

TEST(ModelSpec, Qwen3_5FromRealTextConfig) {
    const std::string config = qwen35_4b_config();
    if (config.empty()) GTEST_SKIP() << "shared Qwen3.5-4B text config not found under PAGODA_SHARED_DIR";
    const ModelSpec s = parse_ok(config);
    EXPECT_EQ(s.family, ModelFamily::kQwen3_5);
    EXPECT_EQ(s.model_type, "qwen3_5");
    EXPECT_EQ(s.text_model_type, "qwen3_5_text");
    EXPECT_EQ(s.weight_prefix, "model.language_model.");
    EXPECT_EQ(s.hidden_size, 2560);
    EXPECT_EQ(s.num_hidden_layers, 32);
    EXPECT_EQ(s.num_attention_heads, 16);
    EXPECT_EQ(s.num_key_value_heads, 4);
    EXPECT_EQ(s.head_dim, 256);
    EXPECT_EQ(s.intermediate_size, 9216);
    EXPECT_EQ(s.vocab_size, 248320);
    EXPECT_EQ(s.max_position_embeddings, 262144);
    EXPECT_TRUE(s.tie_word_embeddings);
    EXPECT_DOUBLE_EQ(s.rope.theta, 1e7);
    EXPECT_DOUBLE_EQ(s.rope.partial_rotary_factor, 0.25);
    EXPECT_EQ(s.rope.rotary_dim, 64);
    EXPECT_EQ(s.rope.mrope_section, (std::vector<int64_t>{11, 11, 10}));
    EXPECT_TRUE(s.rope.mrope_interleaved);
    EXPECT_EQ(s.linear_num_key_heads, 16);
    EXPECT_EQ(s.linear_num_value_heads, 32);
    EXPECT_EQ(s.mtp_num_hidden_layers, 1);
    EXPECT_EQ(s.dtype, "bfloat16");
    EXPECT_EQ(s.eos_token_ids, (std::vector<int64_t>{248044}));
    EXPECT_EQ(s.attention_plan_string(), "L L L F x8");
    EXPECT_EQ(s.mlp_plan_string(), "dense x32");
    EXPECT_EQ(s.kv_cache_bytes_per_token(2), 8u * 2 * 4 * 256 * 2);
}

TEST(ModelSpec, Qwen3_5TieFlagIsTopLevel) {
    // Qwen3_5ForConditionalGeneration ties by its own (top-level) config, default false.
    const ModelSpec s =
        parse_ok(R"({"model_type":"qwen3_5","text_config":{"tie_word_embeddings":true,"num_hidden_layers":4}})");
    EXPECT_FALSE(s.tie_word_embeddings);
    // The text-only config (Qwen3_5ForCausalLM) is flat with prefix "model.".
    const ModelSpec t = parse_ok(R"({"model_type":"qwen3_5_text","tie_word_embeddings":true,"num_hidden_layers":4})");
    EXPECT_TRUE(t.tie_word_embeddings);
    EXPECT_EQ(t.weight_prefix, "model.");
    EXPECT_EQ(t.family, ModelFamily::kQwen3_5);
}

TEST(ModelSpec, Qwen3_5NineBStateSizes) {
    // Qwen3.5-9B (research notes §5): 8 full layers × 2 × 4 × 256 × 2 B = 32 KiB/token (bf16);
    // recurrent state 24 × 32 × 128 × 128 × 4 B = 48 MiB per sequence.
    const ModelSpec s = parse_ok(R"({"model_type":"qwen3_5","text_config":{"hidden_size":4096,"num_hidden_layers":32,
        "num_attention_heads":16,"num_key_value_heads":4,"linear_num_value_heads":32}})");
    EXPECT_EQ(s.kv_cache_bytes_per_token(2), 32u * 1024);
    EXPECT_EQ(24 * s.linear_recurrent_state_bytes_per_layer(), 48u * 1024 * 1024);
}

TEST(ModelSpec, Qwen3_5Moe) {
    const ModelSpec s = parse_ok(R"({
      "architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe", "eos_token_id": 248046,
      "tie_word_embeddings": false,
      "text_config": {"model_type": "qwen3_5_moe_text", "hidden_size": 2048, "num_hidden_layers": 40,
        "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, "num_experts": 256,
        "num_experts_per_tok": 8, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
        "eos_token_id": 248044, "dtype": "bfloat16",
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                            "mrope_section": [11, 11, 10], "mrope_interleaved": true}}})");
    EXPECT_EQ(s.family, ModelFamily::kQwen3_5Moe);
    EXPECT_EQ(s.text_model_type, "qwen3_5_moe_text");
    EXPECT_EQ(s.num_experts, 256);
    EXPECT_EQ(s.num_experts_per_tok, 8);
    EXPECT_TRUE(s.norm_topk_prob);
    EXPECT_TRUE(s.experts_fused);
    EXPECT_EQ(s.intermediate_size, 0);
    EXPECT_EQ(s.mlp_plan_string(), "moe x40");
    EXPECT_EQ(s.attention_plan_string(), "L L L F x10");
    EXPECT_EQ(s.eos_token_ids, (std::vector<int64_t>{248046}));  // the top level's wins
    EXPECT_EQ(s.dtype, "bfloat16");
}

TEST(ModelSpec, RopeParametersWinOverTopLevel) {
    const ModelSpec s = parse_ok(R"({"model_type":"qwen3_next","num_hidden_layers":4,"rope_theta":5,
        "partial_rotary_factor":0.5,"rope_parameters":{"rope_type":"default","rope_theta":5000000,"partial_rotary_factor":0.25}})");
    EXPECT_DOUBLE_EQ(s.rope.theta, 5e6);
    EXPECT_DOUBLE_EQ(s.rope.partial_rotary_factor, 0.25);
    // Top-level only (older configs).
    const ModelSpec t = parse_ok(
        R"({"model_type":"qwen3_next","num_hidden_layers":4,"rope_theta":5000000,"partial_rotary_factor":0.5})");
    EXPECT_DOUBLE_EQ(t.rope.theta, 5e6);
    EXPECT_DOUBLE_EQ(t.rope.partial_rotary_factor, 0.5);
    EXPECT_EQ(t.rope.rotary_dim, 128);
}

TEST(ModelSpec, YarnRopeScaling) {
    const ModelSpec s = parse_ok(R"({"model_type":"qwen3","num_hidden_layers":2,"rope_theta":1000000,
        "max_position_embeddings":40960,"rope_scaling":{"type":"yarn","factor":4.0,"original_max_position_embeddings":32768}})");
    EXPECT_EQ(s.rope.type, "yarn");
    EXPECT_DOUBLE_EQ(s.rope.factor, 4.0);
    EXPECT_EQ(s.rope.original_max_position_embeddings, 32768);
    EXPECT_DOUBLE_EQ(s.rope.theta, 1e6);
    // Without original_max_position_embeddings, yarn takes max_position_embeddings.
    const ModelSpec t = parse_ok(R"({"model_type":"qwen3","num_hidden_layers":2,"max_position_embeddings":40960,
        "rope_scaling":{"rope_type":"yarn","factor":2}})");
    EXPECT_EQ(t.rope.original_max_position_embeddings, 40960);
}

TEST(ModelSpec, UnknownModelTypeListsSupported) {
    const std::string msg = parse_error(R"({"model_type":"llama"})");
    EXPECT_NE(msg.find("\"llama\""), std::string::npos) << msg;
    for (std::string_view t : {"qwen2", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5", "qwen3_5_moe"})
        EXPECT_NE(msg.find(t), std::string::npos) << msg;
    EXPECT_NE(parse_error(R"({"hidden_size":1})").find("model_type"), std::string::npos);
    EXPECT_NE(parse_error(R"({"model_type":3})").find("model_type"), std::string::npos);
}

TEST(ModelSpec, WrongTypedFieldsAreNamed) {
    EXPECT_NE(parse_error(R"({"model_type":"qwen2","hidden_size":"big"})").find("hidden_size"), std::string::npos);
    EXPECT_NE(parse_error(R"({"model_type":"qwen3","tie_word_embeddings":1})").find("tie_word_embeddings"),
              std::string::npos);
    EXPECT_NE(parse_error(R"({"model_type":"qwen3","rms_norm_eps":"1e-6"})").find("rms_norm_eps"), std::string::npos);
    EXPECT_NE(parse_error(R"({"model_type":"qwen3_moe","mlp_only_layers":[1,"2"]})").find("mlp_only_layers"),
              std::string::npos);
    EXPECT_NE(parse_error(R"({"model_type":"qwen3","eos_token_id":"x"})").find("eos_token_id"), std::string::npos);
    EXPECT_NE(parse_error(R"({"model_type":"qwen3","rope_scaling":{"factor":"4"}})").find("rope_scaling.factor"),
              std::string::npos);
    const std::string nested = parse_error(R"({"model_type":"qwen3_5","text_config":{"num_hidden_layers":[4]}})");
    EXPECT_NE(nested.find("text_config.num_hidden_layers"), std::string::npos) << nested;
    EXPECT_NE(parse_error(R"({"model_type":"qwen3_5","text_config":[]})").find("text_config"), std::string::npos);
}

TEST(ModelSpec, InvalidValues) {
    EXPECT_NE(parse_error(R"({"model_type":"qwen3","num_attention_heads":16,"num_key_value_heads":5})")
                  .find("num_key_value_heads"),
              std::string::npos);
    EXPECT_NE(parse_error(R"({"model_type":"qwen3","hidden_size":0})").find("hidden_size"), std::string::npos);
    EXPECT_NE(parse_error(R"({"model_type":"qwen3_next","num_hidden_layers":4,"layer_types":["full_attention"]})")
                  .find("layer_types"),
              std::string::npos);
    EXPECT_NE(parse_error(R"({"model_type":"qwen3","num_hidden_layers":1,"layer_types":["linear_attention"]})")
                  .find("layer_types"),
              std::string::npos);
    EXPECT_NE(parse_error(R"({"model_type":"qwen3_next","full_attention_interval":0})").find("full_attention_interval"),
              std::string::npos);
    EXPECT_NE(parse_error(R"({"model_type":"qwen3_next","partial_rotary_factor":2})").find("partial_rotary_factor"),
              std::string::npos);
    EXPECT_NE(parse_error(R"([1])").find("not a JSON object"), std::string::npos);
}

TEST(ModelSpec, ExplicitLayerTypes) {
    const ModelSpec s = parse_ok(R"({"model_type":"qwen3_next","num_hidden_layers":3,
        "layer_types":["full_attention","linear_attention","full_attention"]})");
    EXPECT_EQ(s.attention_plan_string(), "F x1, L x1, F x1");
    EXPECT_EQ(s.num_linear_attention_layers(), 1);
}

TEST(ModelSpec, EosList) {
    const ModelSpec s = parse_ok(R"({"model_type":"qwen3","eos_token_id":[151645,151643]})");
    EXPECT_EQ(s.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
}

TEST(ModelSpec, LoadNamesThePath) {
    auto missing = load_model_spec("/nonexistent/config.json");
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.message().find("/nonexistent/config.json"), std::string::npos);
}

TEST(GenerationDefaults, ParsesQwenGenerationConfig) {
    auto json = Json::parse(R"({"bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643],
        "pad_token_id": 151643, "temperature": 0.6, "top_k": 20, "top_p": 0.95, "transformers_version": "4.51.0"})");
    ASSERT_TRUE(json.ok());
    auto g = parse_generation_defaults(json.value());
    ASSERT_TRUE(g.ok()) << g.message();
    EXPECT_EQ(g.value().eos_token_ids, (std::vector<int64_t>{151645, 151643}));
    EXPECT_EQ(g.value().bos_token_id, 151643);
    EXPECT_EQ(g.value().pad_token_id, 151643);
    EXPECT_EQ(g.value().do_sample, true);
    EXPECT_DOUBLE_EQ(*g.value().temperature, 0.6);
    EXPECT_DOUBLE_EQ(*g.value().top_p, 0.95);
    EXPECT_EQ(g.value().top_k, 20);
    EXPECT_FALSE(g.value().min_p.has_value());
    EXPECT_FALSE(g.value().repetition_penalty.has_value());

    auto single = parse_generation_defaults(Json::parse(R"({"eos_token_id": 2, "repetition_penalty": 1.05})").value());
    ASSERT_TRUE(single.ok());
    EXPECT_EQ(single.value().eos_token_ids, (std::vector<int64_t>{2}));
    EXPECT_DOUBLE_EQ(*single.value().repetition_penalty, 1.05);

    auto bad = parse_generation_defaults(Json::parse(R"({"top_k": "20"})").value());
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.message().find("top_k"), std::string::npos);
}

// quantization_config as Qwen publishes it, spliced into the Qwen2.5 config.
std::string with_quantization(const std::string& qc) {
    std::string text = kQwen25;
    return text.substr(0, text.size() - 1) + R"(, "quantization_config": )" + qc + "}";
}

TEST(ModelSpec, NotQuantizedByDefault) {
    const ModelSpec s = parse_ok(kQwen25);
    EXPECT_FALSE(s.quantization.quantized());
    EXPECT_EQ(s.quantization.describe(), "none");
}

TEST(ModelSpec, QuantizationFp8BlockScales) {  // Qwen3-8B-FP8
    const ModelSpec s = parse_ok(with_quantization(
        R"({"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]})"));
    EXPECT_EQ(s.quantization.method, "fp8");
    EXPECT_EQ(s.quantization.weight_block_size, (std::vector<int64_t>{128, 128}));
    EXPECT_EQ(s.quantization.activation_scheme, "dynamic");
    EXPECT_EQ(s.quantization.describe(), "fp8, 128x128 block scales, dynamic activation scales");
}

TEST(ModelSpec, QuantizationAwq) {  // Qwen3-8B-AWQ
    const ModelSpec s = parse_ok(with_quantization(R"({"bits": 4, "group_size": 128, "modules_to_not_convert": null,
        "quant_method": "awq", "version": "gemm", "zero_point": true})"));
    EXPECT_EQ(s.quantization.bits, 4);
    EXPECT_EQ(s.quantization.group_size, 128);
    EXPECT_TRUE(s.quantization.zero_point);
    EXPECT_EQ(s.quantization.version, "gemm");
    EXPECT_TRUE(s.quantization.ignore.empty());
    EXPECT_EQ(s.quantization.describe(), "awq, int4, group 128, zero points");
}

TEST(ModelSpec, QuantizationGptq) {  // Qwen2.5-7B-Instruct-GPTQ-Int4
    const ModelSpec s = parse_ok(with_quantization(R"({"batch_size": 1, "bits": 4, "block_name_to_quantize": null,
        "cache_block_outputs": true, "damp_percent": 0.01, "dataset": null, "desc_act": false,
        "exllama_config": {"version": 1}, "group_size": 128, "max_input_length": null, "model_seqlen": null,
        "module_name_preceding_first_block": null, "modules_in_block_to_quantize": null, "pad_token_id": null,
        "quant_method": "gptq", "sym": true, "tokenizer": null, "true_sequential": true, "use_cuda_fp16": false,
        "use_exllama": true})"));
    EXPECT_EQ(s.quantization.method, "gptq");
    EXPECT_EQ(s.quantization.bits, 4);
    EXPECT_FALSE(s.quantization.desc_act);
    EXPECT_TRUE(s.quantization.sym);
    EXPECT_EQ(s.quantization.describe(), "gptq, int4, group 128, symmetric");
}

// The bits and group size the checkpoint's quantization gives weight `name` ({0, 0} when it is refused).
std::pair<int, int64_t> module_settings(const QuantizationSpec& q, const std::string& name) {
    const auto c = checkpoint_quantization(q);
    EXPECT_TRUE(c.ok() && c->has_value()) << c.message();
    if (!c.ok() || !c->has_value()) return {0, 0};
    const auto m = (*c)->for_module(name);
    EXPECT_TRUE(m.ok()) << m.message();
    return m.ok() ? std::pair{m->bits(), m->group_size} : std::pair{0, int64_t{0}};
}

// Why the rule that decides weight `name` is one pagoda cannot serve ("" when it can, or none decides it).
std::string module_refusal(const std::string& config_json, const std::string& name) {
    const auto c = checkpoint_quantization(parse_ok(config_json).quantization);
    EXPECT_TRUE(c.ok() && c->has_value()) << c.message();
    if (!c.ok() || !c->has_value()) return "";
    const auto m = (*c)->for_module(name);
    return m.ok() ? "" : m.message();
}

// GPTQModel's `dynamic` rules: "-:" ones only exclude modules (Qwen3.5-27B-GPTQ-Int4 keeps attention bf16 so);
// rules that give modules other settings are kept to be refused.
TEST(ModelSpec, QuantizationGptqDynamicRules) {
    const ModelSpec excluding = parse_ok(with_quantization(R"({"bits": 4, "group_size": 128, "sym": true,
        "desc_act": false, "quant_method": "gptq", "dynamic": {"-:.*attn.*": {}, ".*mlp.*": {}}})"));
    EXPECT_TRUE(excluding.quantization.module_rules.empty());  // ".*mlp.*": {} says what the checkpoint says
    const ModelSpec overriding = parse_ok(with_quantization(R"({"bits": 4, "group_size": 128, "quant_method": "gptq",
        "dynamic": {"-:.*attn.*": {}, "+:.*layers\\.0\\..*": {}, "+:.*down_proj.*": {"bits": 8, "group_size": 32}}})"));
    const auto& rules = overriding.quantization.module_rules;
    ASSERT_EQ(rules.size(), 2u);  // the rule equal to the checkpoint's is kept: it comes first, and shadows
    EXPECT_EQ(rules[0].pattern, ".*layers\\.0\\..*");
    EXPECT_EQ(rules[1].pattern, ".*down_proj.*");
    EXPECT_EQ(rules[1].bits, 8);
    EXPECT_EQ(rules[1].group_size, 32);
    EXPECT_EQ(overriding.quantization.describe(), "gptq, int4, group 128, symmetric, 2 module rules");
    // GPTQModel matches its rules from the start of the module's name (re.match), the first one winning.
    const auto settings = [&](const std::string& name) { return module_settings(overriding.quantization, name); };
    EXPECT_EQ(settings("model.layers.0.mlp.down_proj.weight"), (std::pair{4, int64_t{128}}));
    EXPECT_EQ(settings("model.layers.3.mlp.down_proj.weight"), (std::pair{8, int64_t{32}}));
    EXPECT_EQ(settings("model.layers.3.mlp.up_proj.weight"), (std::pair{4, int64_t{128}}));
    const std::string bad =
        parse_error(with_quantization(R"({"bits": 4, "quant_method": "gptq", "dynamic": ["-:.*attn.*"]})"));
    EXPECT_NE(bad.find("quantization_config.dynamic"), std::string::npos) << bad;
    // A rule pagoda cannot serve (3 bits, act-order of its own) is refused when it decides a module stored packed, as
    // vLLM looks at a rule when a layer asks; an expression std::regex cannot read (Python's named groups) is skipped,
    // as vLLM skips what Python's re refuses; Python's \\A anchors.
    const auto gptq = [](const std::string& rules) {
        return with_quantization(R"({"bits": 4, "group_size": 128, "quant_method": "gptq", "dynamic": )" + rules + "}");
    };
    const std::string down = "model.layers.0.mlp.down_proj.weight", up = "model.layers.0.mlp.up_proj.weight";
    EXPECT_NE(module_refusal(gptq(R"({"+:.*down.*": {"bits": 3}})"), down).find("gives 3-bit weights"),
              std::string::npos);
    EXPECT_EQ(module_refusal(gptq(R"({"+:.*down.*": {"bits": 3}})"), up), "");
    EXPECT_NE(module_refusal(gptq(R"({"+:.*down.*": {"desc_act": true}})"), down).find("gives desc_act true"),
              std::string::npos);
    EXPECT_EQ(module_settings(parse_ok(gptq(R"x({"+:(?P<x>down)": {"bits": 8}})x")).quantization, down),
              (std::pair{4, int64_t{128}}));
    EXPECT_EQ(
        module_settings(parse_ok(gptq(R"({"+:\\Amodel\\.layers\\.0\\.mlp\\.down_proj\\Z": {"bits": 8}})")).quantization,
                        down),
        (std::pair{8, int64_t{128}}));
    // An expression that repeats a part thousands of times (slow to search) is skipped too.
    EXPECT_EQ(module_settings(parse_ok(gptq(R"({"+:(.?){3000}down": {"bits": 8}})")).quantization, down),
              (std::pair{4, int64_t{128}}));
}

// Intel's AutoRound, as its exporter writes the config (auto-round 0.16): the packing decides the layout and how zero
// points are stored (auto_gptq: minus one, as GPTQ's v1; plain auto_round and gptqmodel: as they are; auto_awq: AWQ's
// GEMM layout); extra_config entries of 16 bits leave modules unquantized, others that differ are refused by name.
TEST(ModelSpec, QuantizationAutoRound) {
    const auto config = [](const std::string& packing, const std::string& extra) {
        return with_quantization(R"({"autoround_version": "0.16.1", "bits": 4, "data_type": "int", "group_size": 128,
            "iters": 0, "quant_method": "auto-round", "sym": true, "block_name_to_quantize": "model.layers",
            "packing_format": ")" +
                                 packing + R"(", "extra_config": )" + extra + "}");
    };
    const std::string kept_bf16 = R"({"model.layers.0.linear_attn.in_proj_a": {"bits": 16, "data_type": "float"},
        "model.layers.1.mlp.down_proj": {"bits": 4, "group_size": 128, "sym": true}})";
    struct Want {
        std::string packing;
        Int4Packing layout;
        int32_t zero_offset;
    };
    for (const Want& w :
         {Want{"auto_round:auto_gptq", Int4Packing::kGptq, 1}, Want{"auto_round", Int4Packing::kGptq, 0},
          Want{"auto_round:gptqmodel", Int4Packing::kGptq, 0}, Want{"auto_round:auto_awq", Int4Packing::kAwqGemm, 0}}) {
        SCOPED_TRACE(w.packing);
        const ModelSpec s = parse_ok(config(w.packing, kept_bf16));
        EXPECT_EQ(s.quantization.describe(), "auto-round, int4, group 128, symmetric, " + w.packing);
        EXPECT_TRUE(s.quantization.module_rules.empty());  // a 16-bit entry, and one that says the checkpoint's
        const auto c = checkpoint_quantization(s.quantization);
        ASSERT_TRUE(c.ok()) << c.message();
        ASSERT_TRUE(c->has_value());
        EXPECT_EQ((*c)->packing, w.layout);
        EXPECT_EQ((*c)->zero_offset, w.zero_offset);
        EXPECT_EQ((*c)->group_size, 128);
        EXPECT_TRUE((*c)->zero_points);  // both layouts store zero points, symmetric or not
    }
    // A missing packing_format is auto_gptq's (vLLM's default too).
    const ModelSpec plain = parse_ok(with_quantization(
        R"({"bits": 8, "group_size": 32, "quant_method": "auto-round", "sym": false, "data_type": "int"})"));
    const auto eight = checkpoint_quantization(plain.quantization);
    ASSERT_TRUE(eight.ok() && eight->has_value()) << eight.message();
    EXPECT_EQ((*eight)->format, WeightFormat::kInt8);
    EXPECT_EQ((*eight)->zero_offset, 1);
    // Modules of their own bits and groups (auto-round's mixed recipes): an exact name (also under a multimodal
    // checkpoint's language_model), before the regular expressions, searched for anywhere in the name.
    const ModelSpec mixed = parse_ok(config("auto_round:auto_gptq", R"({".*down_proj": {"bits": 8},
        "model.layers.2.mlp.down_proj": {"group_size": 64}, "model.layers.1.self_attn.o_proj": {"bits": 16},
        "model.layers.0.mlp.up_proj": {"bits": 4, "group_size": 128}})"));
    ASSERT_EQ(mixed.quantization.module_rules.size(), 3u);
    const auto settings = [&](const std::string& name) { return module_settings(mixed.quantization, name); };
    EXPECT_EQ(settings("model.layers.2.mlp.down_proj.weight"), (std::pair{4, int64_t{64}}));
    EXPECT_EQ(settings("model.language_model.layers.2.mlp.down_proj.weight"), (std::pair{4, int64_t{64}}));
    EXPECT_EQ(settings("model.layers.5.mlp.down_proj.weight"), (std::pair{8, int64_t{128}}));
    EXPECT_EQ(settings("model.layers.0.mlp.up_proj.weight"), (std::pair{4, int64_t{128}}));
    EXPECT_EQ(settings("model.layers.0.mlp.gate_proj.weight"), (std::pair{4, int64_t{128}}));
    EXPECT_EQ((*checkpoint_quantization(mixed.quantization))->for_module("model.layers.5.mlp.down_proj.weight")->format,
              WeightFormat::kInt8);
    // Refused, saying why: a module rule pagoda cannot serve, another data type, a packing not served, 8-bit AWQ
    // packing.
    const auto refusal = [&](const std::string& json) {
        const auto c = checkpoint_quantization(parse_ok(json).quantization);
        EXPECT_FALSE(c.ok());
        return c.ok() ? std::string() : c.message();
    };
    EXPECT_NE(module_refusal(config("auto_round:auto_gptq", R"({"model.layers.2.mlp.down_proj": {"bits": 2}})"),
                             "model.layers.2.mlp.down_proj.weight")
                  .find("the rule for 'model.layers.2.mlp.down_proj' gives 2-bit weights"),
              std::string::npos);
    EXPECT_NE(module_refusal(config("auto_round:auto_awq", R"({"lm_head": {"bits": 8}})"), "lm_head.weight")
                  .find("the rule for 'lm_head'"),
              std::string::npos);
    EXPECT_NE(module_refusal(config("auto_round:auto_gptq", R"({"model.layers.1.mlp.up_proj": {"act_bits": 8}})"),
                             "model.layers.1.mlp.up_proj.weight")
                  .find("gives 8-bit activations"),
              std::string::npos);
    EXPECT_NE(refusal(with_quantization(R"({"bits": 4, "group_size": 32, "quant_method": "auto-round",
                  "act_bits": 8})"))
                  .find("act_bits 8"),
              std::string::npos);
    // A data_type left out is int: a rule saying int is the checkpoint's.
    EXPECT_TRUE(parse_ok(with_quantization(R"({"bits": 4, "group_size": 32, "quant_method": "auto-round",
                    "extra_config": {"model.layers.0.mlp.up_proj": {"bits": 4, "data_type": "int"}}})"))
                    .quantization.module_rules.empty());
    EXPECT_NE(refusal(with_quantization(R"({"bits": 4, "group_size": 32, "quant_method": "auto-round",
                  "data_type": "mx_fp", "packing_format": "auto_round"})"))
                  .find("data_type 'mx_fp'"),
              std::string::npos);
    EXPECT_NE(refusal(config("auto_round:llm_compressor", "{}")).find("packing_format 'auto_round:llm_compressor'"),
              std::string::npos);
    EXPECT_NE(refusal(with_quantization(R"({"bits": 8, "group_size": 32, "quant_method": "auto-round",
                  "packing_format": "auto_round:auto_awq"})"))
                  .find("8-bit AWQ-packed"),
              std::string::npos);
    // vLLM's newer name for the method passes --quantization.
    EXPECT_TRUE(plan_quantization(plain.quantization, "inc").ok());
    EXPECT_TRUE(plan_quantization(plain.quantization, "auto-round").ok());
    EXPECT_FALSE(plan_quantization(plain.quantization, "gptq").ok());
    EXPECT_NE(parse_error(config("auto_round", "[]")).find("quantization_config.extra_config"), std::string::npos);
}

TEST(ModelSpec, QuantizationCompressedTensors) {  // llm-compressor FP8 dynamic, lm_head left out
    const ModelSpec s = parse_ok(with_quantization(R"({"config_groups": {"group_0": {
        "input_activations": {"dynamic": true, "num_bits": 8, "strategy": "token", "symmetric": true, "type": "float"},
        "targets": ["Linear"],
        "weights": {"dynamic": false, "num_bits": 8, "strategy": "channel", "symmetric": true, "type": "float"}}},
        "format": "float-quantized", "ignore": ["lm_head"], "quant_method": "compressed-tensors",
        "quantization_status": "compressed"})"));
    const QuantizationSpec& q = s.quantization;
    EXPECT_EQ(q.method, "compressed-tensors");
    EXPECT_EQ(q.format, "float-quantized");
    EXPECT_EQ(q.bits, 8);
    EXPECT_EQ(q.weight_type, "float");
    EXPECT_EQ(q.strategy, "channel");
    EXPECT_EQ(q.input_bits, 8);
    EXPECT_EQ(q.ignore, (std::vector<std::string>{"lm_head"}));
    EXPECT_EQ(q.describe(), "compressed-tensors, float-quantized, float8 weights, channel scales, float8 activations");
}

// llm-compressor's mixed recipes: config groups of their own. A module takes the group of its first matching target:
// exact names, then the "re:" expressions (re.match) in sorted order, then "Linear" (the base group, wherever it
// stands); a group of its own symmetry decides whether the module stores zero points.
TEST(ModelSpec, QuantizationCompressedTensorsConfigGroups) {
    const auto group = [](const std::string& targets, int bits, const std::string& strategy, int64_t size, bool sym) {
        return R"({"format": "pack-quantized", "targets": )" + targets + R"(, "input_activations": null,
            "weights": {"num_bits": )" +
               std::to_string(bits) + R"(, "type": "int", "strategy": ")" + strategy + R"(", "group_size": )" +
               (size ? std::to_string(size) : "null") + R"(, "symmetric": )" + (sym ? "true" : "false") + "}}";
    };
    const auto config = [](const std::string& groups) {
        return with_quantization(R"({"quant_method": "compressed-tensors", "format": "mixed-precision",
            "ignore": ["lm_head"], "quantization_status": "compressed", "config_groups": {)" +
                                 groups + "}}");
    };
    const std::string json = config(
        R"("group_0": )" + group(R"(["re:.*mlp\\.down_proj$", "re:.*layers\\.1\\..*"])", 8, "channel", 0, true) +
        R"(, "group_1": )" + group(R"(["Linear"])", 4, "group", 32, true) + R"(, "group_2": )" +
        group(R"(["model.layers.0.self_attn.o_proj", "re:.*layers\\.0\\.mlp\\.down_proj$"])", 4, "group", 16, false));
    const ModelSpec s = parse_ok(json);
    EXPECT_EQ(s.quantization.bits, 4);  // the "Linear" group, though second
    EXPECT_EQ(s.quantization.group_size, 32);
    EXPECT_EQ(s.quantization.format, "pack-quantized");
    ASSERT_EQ(s.quantization.module_rules.size(), 4u);
    const auto c = checkpoint_quantization(s.quantization);
    ASSERT_TRUE(c.ok() && c->has_value()) << c.message();
    const auto module = [&](const std::string& name) {
        const auto m = (*c)->for_module(name);
        EXPECT_TRUE(m.ok()) << m.message();
        return m.ok() ? std::tuple{m->bits(), m->group_size, m->zero_points} : std::tuple{0, int64_t{0}, false};
    };
    EXPECT_EQ(module("model.layers.2.self_attn.q_proj.weight"), (std::tuple{4, int64_t{32}, false}));
    EXPECT_EQ(module("model.layers.2.mlp.down_proj.weight"), (std::tuple{8, int64_t{0}, false}));
    EXPECT_EQ(module("model.layers.1.self_attn.q_proj.weight"), (std::tuple{8, int64_t{0}, false}));
    EXPECT_EQ(module("model.layers.0.self_attn.o_proj.weight"), (std::tuple{4, int64_t{16}, true}));  // exact first
    // Both ".*layers\.0\.mlp..." (group_2) and ".*mlp\.down_proj$" (group_0) match: the first in sorted order wins.
    EXPECT_EQ(module("model.layers.0.mlp.down_proj.weight"), (std::tuple{4, int64_t{16}, true}));
    EXPECT_EQ(module("model.language_model.layers.3.mlp.down_proj.weight"), (std::tuple{8, int64_t{0}, false}));
    // A target two groups list is the later group's (compressed-tensors keeps one scheme a target, the last written);
    // a group that differs only in its symmetry is kept.
    const auto c2 = checkpoint_quantization(
        parse_ok(config(R"("group_0": )" + group(R"(["Linear"])", 4, "group", 32, true) + R"(, "group_1": )" +
                        group(R"(["re:.*down_proj$"])", 8, "channel", 0, true) + R"(, "group_2": )" +
                        group(R"(["re:.*down_proj$", "re:.*o_proj$"])", 4, "group", 32, false)))
            .quantization);
    ASSERT_TRUE(c2.ok() && c2->has_value()) << c2.message();
    for (const char* name : {"model.layers.0.mlp.down_proj.weight", "model.layers.0.self_attn.o_proj.weight"}) {
        const auto m = (*c2)->for_module(name);
        ASSERT_TRUE(m.ok()) << m.message();
        EXPECT_EQ((std::tuple{m->bits(), m->group_size, m->zero_points}), (std::tuple{4, int64_t{32}, true})) << name;
    }
    // One group only, or groups that all say the same: no rules.
    EXPECT_TRUE(parse_ok(config(R"("group_0": )" + group(R"(["Linear"])", 4, "group", 32, true) + R"(, "group_1": )" +
                                group(R"(["re:.*down_proj$"])", 4, "group", 32, true)))
                    .quantization.module_rules.empty());
    // A group pagoda cannot serve is refused when it decides a module stored packed, saying which; fp8 groups beside
    // int ones, and groups beside fp8 weights, are refused.
    const std::string activations = config(R"("group_0": )" + group(R"(["Linear"])", 4, "group", 32, true) +
                                           R"(, "group_1": {"format": "int-quantized",
        "targets": ["re:.*o_proj$"], "weights": {"num_bits": 8, "type": "int", "strategy": "channel",
        "symmetric": true}, "input_activations": {"num_bits": 8, "type": "int", "strategy": "token"}})");
    EXPECT_EQ(module_refusal(activations, "model.layers.0.self_attn.q_proj.weight"), "");
    EXPECT_NE(module_refusal(activations, "model.layers.0.self_attn.o_proj.weight").find("the rule for '.*o_proj$'"),
              std::string::npos);
    const std::string fp8_group = R"({"format": "float-quantized", "targets": ["re:.*o_proj$"],
        "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true}})";
    EXPECT_NE(module_refusal(config(R"("group_0": )" + group(R"(["Linear"])", 4, "group", 32, true) +
                                    R"(, "group_1": )" + fp8_group),
                             "model.layers.0.self_attn.o_proj.weight")
                  .find("stores fp8 weights beside the integer ones"),
              std::string::npos);
    const auto fp8_base = checkpoint_quantization(
        parse_ok(config(R"("group_0": )" + group(R"(["re:.*mlp.*"])", 4, "group", 32, true) + R"(, "group_1": )" +
                        fp8_group.substr(0, fp8_group.find("re:.*o_proj$")) + R"(Linear"],
        "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true}})"))
            .quantization);
    ASSERT_FALSE(fp8_base.ok());
    EXPECT_NE(fp8_base.message().find("beside fp8 weights"), std::string::npos);
    EXPECT_NE(parse_error(config(R"("group_0": {"targets": "Linear"})")).find("config_groups.group_0.targets"),
              std::string::npos);
}

TEST(ModelSpec, QuantizationUnderTextConfig) {  // Qwen3.5: the language model's config holds it
    const ModelSpec s = parse_ok(R"({"model_type": "qwen3_5", "text_config": {"hidden_size": 64,
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "vocab_size": 256, "intermediate_size": 128, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
        "linear_key_head_dim": 16, "linear_value_head_dim": 16,
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}})");
    EXPECT_EQ(s.quantization.describe(), "fp8, 128x128 block scales");
}

TEST(ModelSpec, QuantizationConfigErrorsNameTheField) {
    EXPECT_NE(parse_error(with_quantization(R"({"bits": 4})")).find("quantization_config.quant_method"),
              std::string::npos);
    EXPECT_NE(
        parse_error(with_quantization(R"({"quant_method": "awq", "bits": "four"})")).find("quantization_config.bits"),
        std::string::npos);
}

}  // namespace
}  // namespace pagoda::model
