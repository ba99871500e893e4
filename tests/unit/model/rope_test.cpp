// rope_table_for: config.json's rope fields → the frequencies the ops apply. The expected tables were printed by
// transformers 5.25 (torch 2.15, CPU) from each family's rotary-embedding module built from the same config
// (inv_freq and attention_scaling), so the parser, the fallbacks and the YaRN arithmetic are checked together.
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <string>

#include "common/json.h"
#include "model/model_spec.h"
#include "model/rope.h"

namespace pagoda::model {
namespace {

// inv_freq as transformers printed it for the configs of the tests below.
constexpr float kQwen3Yarn[] = {
    1.00000000e+00, 8.05842221e-01, 6.49381638e-01, 5.23299158e-01, 4.21696514e-01, 3.39820832e-01, 2.73841977e-01,
    2.20673397e-01, 1.77827939e-01, 1.43301263e-01, 1.15478203e-01, 9.30572003e-02, 7.49894157e-02, 6.04296438e-02,
    4.86967526e-02, 3.92418988e-02, 3.16227786e-02, 2.54829675e-02, 2.05352511e-02, 1.65481716e-02, 1.33352149e-02,
    1.07460786e-02, 8.65964312e-03, 6.97830599e-03, 5.37532149e-03, 4.13173810e-03, 3.16842273e-03, 2.42342241e-03,
    1.84827659e-03, 1.40511245e-03, 1.06436096e-03, 8.02959781e-04, 6.02941145e-04, 4.50323569e-04, 3.34240554e-04,
    2.46258394e-04, 1.79841154e-04, 1.29931490e-04, 9.26230132e-05, 6.49039430e-05, 4.44569851e-05, 3.58253164e-05,
    2.88695483e-05, 2.32643015e-05, 1.87473561e-05, 1.51074091e-05, 1.21741887e-05, 9.81047469e-06, 7.90569356e-06,
    6.37074163e-06, 5.13381246e-06, 4.13704265e-06, 3.33380353e-06, 2.68651957e-06, 2.16491094e-06, 1.74457659e-06,
    1.40585337e-06, 1.13289593e-06, 9.12935320e-07, 7.35681795e-07, 5.92843435e-07, 4.77738240e-07, 3.84981632e-07,
    3.10234441e-07};
constexpr float kQwen3_5Yarn[] = {
    1.00000000e+00, 6.04296386e-01, 3.65174145e-01, 2.20673397e-01, 1.33352146e-01, 8.05842131e-02, 4.86967526e-02,
    2.94272732e-02, 1.77827943e-02, 1.07460786e-02, 6.49381662e-03, 3.92418960e-03, 2.37137382e-03, 1.43301266e-03,
    8.65964335e-04, 4.74239816e-04, 2.56935076e-04, 1.37349751e-04, 7.21738688e-05, 3.70722482e-05, 1.84492237e-05,
    8.75977003e-06, 3.84981604e-06, 2.32643015e-06, 1.40585337e-06, 8.49552066e-07, 5.13381224e-07, 3.10234441e-07,
    1.87473560e-07, 1.13289595e-07, 6.84604942e-08, 4.13704271e-08};
constexpr float kYarnOptionalFields[] = {1.00000000e+00, 3.88342232e-01, 1.20533988e-01, 2.22284924e-02,
                                         1.25000002e-02, 7.02926610e-03, 3.95284733e-03, 2.22284929e-03,
                                         1.24999997e-03, 7.02926656e-04, 3.95284733e-04, 2.22284929e-04,
                                         1.25000006e-04, 7.02926627e-05, 3.95284733e-05, 2.22284925e-05};
constexpr float kYarnFactorFromLengths[] = {1.00000000e+00, 2.96703994e-01, 8.33450928e-02, 2.13048290e-02,
                                            4.44569858e-03, 1.62345415e-03, 5.92843455e-04, 2.16491084e-04,
                                            7.90569466e-05, 2.88695483e-05, 1.05424133e-05, 3.84981604e-06,
                                            1.40585337e-06, 5.13381224e-07, 1.87473560e-07, 6.84604942e-08};

ModelSpec spec_of(const std::string& config) {
    auto json = Json::parse(config);
    EXPECT_TRUE(json.ok()) << json.message();
    auto spec = parse_model_spec(json.value());
    EXPECT_TRUE(spec.ok()) << spec.message();
    return spec.ok() ? spec.value() : ModelSpec{};
}

RopeTable table_of(const std::string& config) {
    auto table = rope_table_for(spec_of(config));
    EXPECT_TRUE(table.ok()) << table.message();
    return table.ok() ? table.value() : RopeTable{};
}

std::string error_of(const std::string& config) {
    auto table = rope_table_for(spec_of(config));
    EXPECT_FALSE(table.ok());
    return table.ok() ? std::string() : table.message();
}

// Within one or two fp32 ulps: torch's vectorised pow may round the last bit differently from the C library's.
void expect_table(const RopeTable& got, std::span<const float> want, double attention_factor) {
    ASSERT_EQ(got.inv_freq.size(), want.size());
    for (size_t j = 0; j < want.size(); ++j)
        EXPECT_NEAR(got.inv_freq[j], want[j], 2.5e-7 * want[j]) << "pair " << j;
    EXPECT_FLOAT_EQ(got.attention_factor, static_cast<float>(attention_factor));
}

TEST(RopeTable, Qwen3YarnAsItsModelCardSetsIt) {
    const RopeTable t = table_of(R"({"model_type":"qwen3","head_dim":128,"max_position_embeddings":40960,
        "rope_theta":1000000,"rope_scaling":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}})");
    expect_table(t, kQwen3Yarn, 1.138629436111989);
    const ModelSpec s = spec_of(R"({"model_type":"qwen3","max_position_embeddings":40960,
        "rope_scaling":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}})");
    EXPECT_EQ(max_context_length(s), 131072);  // vLLM's derived length: 32768 × 4
}

// Partial rotary (64 of 256 dims): the correction range is counted in rotary dims, as transformers counts it.
TEST(RopeTable, Qwen3_5YarnOverPartialRotaryDims) {
    const RopeTable t = table_of(R"({"model_type":"qwen3_5","text_config":{"model_type":"qwen3_5_text",
        "head_dim":256,"max_position_embeddings":262144,"rope_parameters":{"rope_type":"yarn","factor":4.0,
        "original_max_position_embeddings":262144,"rope_theta":10000000,"partial_rotary_factor":0.25,
        "mrope_section":[11,11,10],"mrope_interleaved":true}}})");
    expect_table(t, kQwen3_5Yarn, 1.138629436111989);
}

// The optional fields: beta_fast/beta_slow, truncate false (a fractional ramp), and mscale/mscale_all_dim, whose
// ratio is the attention factor when none is given.
TEST(RopeTable, YarnOptionalFields) {
    const RopeTable t = table_of(R"({"model_type":"qwen2","hidden_size":256,"num_attention_heads":8,
        "max_position_embeddings":512,"rope_theta":10000.0,"rope_scaling":{"type":"yarn","factor":8,
        "original_max_position_embeddings":64,"beta_fast":16,"beta_slow":2,"mscale":0.9,"mscale_all_dim":0.5,
        "truncate":false}})");
    expect_table(t, kYarnOptionalFields, 1.0753439904810793);
    const RopeTable given = table_of(R"({"model_type":"qwen2","hidden_size":256,"num_attention_heads":8,
        "rope_scaling":{"type":"yarn","factor":8,"original_max_position_embeddings":64,"attention_factor":0.75}})");
    EXPECT_FLOAT_EQ(given.attention_factor, 0.75f);
}

// factor null: max_position_embeddings / original_max_position_embeddings, as transformers falls back.
TEST(RopeTable, YarnFactorFromTheTwoLengths) {
    const RopeTable t = table_of(R"({"model_type":"qwen3_next","head_dim":64,"max_position_embeddings":1024,
        "partial_rotary_factor":0.5,"rope_parameters":{"rope_type":"yarn","factor":null,
        "original_max_position_embeddings":256,"rope_theta":10000000,"partial_rotary_factor":0.5}})");
    expect_table(t, kYarnFactorFromLengths, 1.138629436111989);
}

// Without scaling the table is theta^(-2j/rot) in fp32 and the factor 1: what the kernels computed themselves before.
TEST(RopeTable, DefaultIsPlainRope) {
    const ModelSpec s = spec_of(R"({"model_type":"qwen3","head_dim":64,"rope_theta":1000000,
        "max_position_embeddings":4096})");
    const RopeTable t = table_of(R"({"model_type":"qwen3","head_dim":64,"rope_theta":1000000})");
    ASSERT_EQ(t.rotary_dim(), 64);
    for (int j = 0; j < 32; ++j)
        EXPECT_EQ(t.inv_freq[j], 1.0f / std::pow(1e6f, static_cast<float>(2 * j) / 64.0f));
    EXPECT_EQ(t.attention_factor, 1.0f);
    EXPECT_EQ(max_context_length(s), 4096);
}

TEST(RopeTable, OtherScalingsAreRefusedByName) {
    for (const char* type : {"linear", "dynamic", "longrope", "llama3"}) {
        const std::string msg = error_of(std::string(R"({"model_type":"qwen3","rope_scaling":{"rope_type":")") + type +
                                         R"(","factor":2.0,"original_max_position_embeddings":4096}})");
        EXPECT_NE(msg.find(std::string("'") + type + "' is not supported"), std::string::npos) << msg;
        EXPECT_NE(msg.find("yarn"), std::string::npos) << msg;
    }
    EXPECT_NE(error_of(R"({"model_type":"qwen3","head_dim":100,"partial_rotary_factor":0.25})").find("must be even"),
              std::string::npos);
}

}  // namespace
}  // namespace pagoda::model
