// read_model_footprint over a tiny model directory written here: config.json (qwen3) and one
// safetensors file. Expected numbers follow from the config and the tensor's shape.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "tools/doctor/model_fit.h"

namespace pagoda::doctor {
namespace {

namespace fs = std::filesystem;

// A one-tensor checkpoint with this config.json, read back.
Result<ModelFootprint> footprint_with(const std::string& rope_fields) {
    // One directory per test: ctest runs this file's tests as parallel processes (a shared name raced in CI).
    const fs::path dir =
        fs::temp_directory_path() /
        ("doctor-model-footprint-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << R"({"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"],
        "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 8, "vocab_size": 10, "max_position_embeddings": 128,
        "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "torch_dtype": "bfloat16", )"
                                       << rope_fields << "}";
    const std::string header =
        R"({"model.embed_tokens.weight":{"dtype":"BF16","shape":[10,16],"data_offsets":[0,320]}})";
    {
        std::ofstream out(dir / "model.safetensors", std::ios::binary);
        uint64_t n = header.size();
        char len[8];
        std::memcpy(len, &n, 8);  // little-endian on the machines we build for
        out.write(len, 8);
        out << header;
        out << std::string(320, '\0');
    }
    auto f = read_model_footprint(dir.string());
    fs::remove_all(dir);
    return f;
}

TEST(DoctorModelFootprint, ReadsConfigAndWeights) {
    auto f = footprint_with(R"("rope_theta": 10000.0)");
    ASSERT_TRUE(f.ok()) << f.message();
    EXPECT_EQ(f->weight_bytes, 320u);                      // 10 × 16 bf16
    EXPECT_EQ(f->kv_bytes_per_token, 2u * 2 * 2 * 8 * 2);  // layers × K,V × kv heads × head_dim × 2 B
    EXPECT_EQ(f->state_bytes_per_sequence, 0u);
    EXPECT_EQ(f->num_attention_heads, 4);
    EXPECT_EQ(f->max_context_length, 128);
}

// YaRN extends the context to the original length × factor (vLLM's rule), whatever max_position_embeddings says.
TEST(DoctorModelFootprint, YarnExtendsTheContext) {
    auto f = footprint_with(
        R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 100})");
    ASSERT_TRUE(f.ok()) << f.message();
    EXPECT_EQ(f->max_context_length, 400);
}

TEST(DoctorModelFootprint, MissingDirectoryIsAnError) {
    auto f = read_model_footprint("/nonexistent/model-dir");
    EXPECT_FALSE(f.ok());
}

}  // namespace
}  // namespace pagoda::doctor
