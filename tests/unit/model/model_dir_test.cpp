// Model directories: file discovery, missing-file errors, and the parameter split of a checkpoint.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "model/model_dir.h"

namespace pagoda::model {
namespace {

namespace fs = std::filesystem;

class ModelDirTest : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("pagoda_md_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    void write(const std::string& name, const std::string& bytes) {
        std::ofstream f(dir_ / name, std::ios::binary);
        f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    std::string dir() const { return dir_.string(); }
    fs::path dir_;
};

// A safetensors file of F32 tensors with the given names and element counts.
std::string f32_file(const std::vector<std::pair<std::string, int64_t>>& tensors) {
    std::string header = "{";
    int64_t offset = 0;
    for (const auto& [name, n] : tensors) {
        if (header.size() > 1) header += ",";
        header += "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(n) + "],\"data_offsets\":[" +
                  std::to_string(offset) + "," + std::to_string(offset + 4 * n) + "]}";
        offset += 4 * n;
    }
    header += "}";
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i)
        out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    return out + header + std::string(static_cast<size_t>(offset), '\0');
}

TEST_F(ModelDirTest, MissingDirectoryAndConfig) {
    auto none = locate_model_files(dir() + "/absent");
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.message().find("no such model directory"), std::string::npos) << none.message();
    auto no_config = locate_model_files(dir());
    ASSERT_FALSE(no_config.ok());
    EXPECT_NE(no_config.message().find("missing config.json"), std::string::npos) << no_config.message();
    write("file", "x");
    auto not_dir = locate_model_files(dir() + "/file");
    ASSERT_FALSE(not_dir.ok());
    EXPECT_NE(not_dir.message().find("not a directory"), std::string::npos) << not_dir.message();
}

TEST_F(ModelDirTest, LocatesFiles) {
    write("config.json", R"({"model_type":"qwen3","num_hidden_layers":2})");
    write("generation_config.json", R"({"eos_token_id":[1,2],"temperature":0.7})");
    write("vocab.json", "{}");
    write("merges.txt", "");
    write("chat_template.jinja", "");
    write("tokenizer_config.json", "{}");
    auto f = locate_model_files(dir());
    ASSERT_TRUE(f.ok()) << f.message();
    EXPECT_TRUE(f.value().generation_config.has_value());
    EXPECT_FALSE(f.value().tokenizer_json.has_value());
    EXPECT_TRUE(f.value().has_tokenizer());  // vocab.json + merges.txt
    EXPECT_TRUE(f.value().chat_template.has_value());
    EXPECT_TRUE(f.value().safetensors.empty());
    auto weights = require_weights(f.value());
    ASSERT_FALSE(weights.ok());
    EXPECT_NE(weights.message().find("no safetensors weights"), std::string::npos);

    auto m = ModelDir::open(dir(), false);
    ASSERT_TRUE(m.ok()) << m.message();
    EXPECT_EQ(m.value().generation.eos_token_ids, (std::vector<int64_t>{1, 2}));
    EXPECT_FALSE(m.value().checkpoint.has_value());
    EXPECT_FALSE(ModelDir::open(dir(), true).ok());
}

// The tokenizer's eos_token (string or added-token object) found among added_tokens_decoder; none when it is not
// there or the file does not name one. The real Qwen3 file says <|im_end|> = 151645.
TEST_F(ModelDirTest, TokenizerEosToken) {
    write("config.json", R"({"model_type":"qwen3"})");
    const auto eos_of = [&](const std::string& tokenizer_config) -> std::optional<int64_t> {
        write("tokenizer_config.json", tokenizer_config);
        auto m = ModelDir::open(dir(), false);
        EXPECT_TRUE(m.ok()) << m.message();
        return m.ok() ? m.value().tokenizer_eos_token_id : std::nullopt;
    };
    const std::string added =
        R"("added_tokens_decoder":{"7":{"content":"<a>"},"9":{"content":"<end>","special":true}})";
    EXPECT_EQ(eos_of(R"({"eos_token":"<end>",)" + added + "}"), 9);
    EXPECT_EQ(eos_of(R"({"eos_token":{"content":"<a>","lstrip":false},)" + added + "}"), 7);
    EXPECT_EQ(eos_of(R"({"eos_token":"<other>",)" + added + "}"), std::nullopt);
    EXPECT_EQ(eos_of(R"({"eos_token":null,)" + added + "}"), std::nullopt);
    EXPECT_EQ(eos_of(R"({"eos_token":"<end>"})"), std::nullopt);
    EXPECT_EQ(eos_of("{not json"), std::nullopt);  // the tokenizer loader reports it

    const fs::path qwen3 = fs::path(PAGODA_SHARED_DIR) / "qwen-tokenizers/qwen3-4b/tokenizer_config.json";
    std::ifstream in(qwen3, std::ios::binary);
    if (!in) GTEST_SKIP() << qwen3 << " is not here";
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(eos_of(text), 151645);
}

TEST_F(ModelDirTest, MissingTokenizer) {
    write("config.json", R"({"model_type":"qwen3"})");
    auto f = locate_model_files(dir());
    ASSERT_TRUE(f.ok());
    auto t = require_tokenizer(f.value());
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.message().find("tokenizer.json"), std::string::npos);
}

TEST_F(ModelDirTest, BadConfigNamesTheFile) {
    write("config.json", R"({"model_type":"qwen3", "hidden_size": )");
    auto m = ModelDir::open(dir(), false);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.message().find("config.json"), std::string::npos) << m.message();
    write("config.json", R"({"model_type":"qwen3"})");
    write("generation_config.json", R"({"temperature":"hot"})");
    auto g = ModelDir::open(dir(), false);
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.message().find("generation_config.json"), std::string::npos) << g.message();
    EXPECT_NE(g.message().find("temperature"), std::string::npos) << g.message();
}

TEST_F(ModelDirTest, ParameterSplitForQwen3_5Layout) {
    write("config.json", R"({"model_type":"qwen3_5","text_config":{"num_hidden_layers":1}})");
    write("model.safetensors", f32_file({{"model.language_model.embed_tokens.weight", 100},
                                         {"lm_head.weight", 100},
                                         {"model.language_model.layers.0.mlp.up_proj.weight", 30},
                                         {"model.language_model.norm.weight", 5},
                                         {"model.visual.blocks.0.attn.qkv.weight", 7},
                                         {"mtp.fc.weight", 11}}));
    auto m = ModelDir::open(dir(), true);
    ASSERT_TRUE(m.ok()) << m.message();
    const WeightSummary w = summarize_weights(m.value().spec, *m.value().checkpoint);
    EXPECT_EQ(w.params.total, 253);
    EXPECT_EQ(w.params.embedding, 200);
    EXPECT_EQ(w.params.text_model, 35);
    EXPECT_EQ(w.params.other, 18);
    EXPECT_EQ(w.params.vision, 7);
    EXPECT_EQ(w.params.mtp, 11);
    EXPECT_EQ(w.weight_bytes, 253u * 4);
    EXPECT_EQ(w.num_tensors, 6u);
    EXPECT_EQ(w.params_by_dtype.at("F32"), 253);
}

}  // namespace
}  // namespace pagoda::model
