// The demo model directory loads as a Qwen3.5 model, runs, and is byte-for-byte reproducible.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "common/file.h"
#include "model/demo_model.h"
#include "model/model.h"
#include "model/runner.h"
#include "runtime/backend.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::model {
namespace {

namespace fs = std::filesystem;

class DemoModelTest : public ::testing::Test {
protected:
    void SetUp() override {
        base_ = fs::temp_directory_path() /
                ("pagoda_demo_model_test_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
        fs::remove_all(base_);
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(base_, ec);
    }
    fs::path base_;
};

TEST_F(DemoModelTest, ByteLevelDemoLoadsRunsAndIsReproducible) {
    const std::string a = (base_ / "a").string(), b = (base_ / "b").string();
    ASSERT_TRUE(write_demo_model(a, {}).ok());
    ASSERT_TRUE(write_demo_model(b, {}).ok());
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json"}) {
        auto x = read_file(a + "/" + f), y = read_file(b + "/" + f);
        ASSERT_TRUE(x.ok() && y.ok()) << f;
        EXPECT_EQ(*x, *y) << f;
    }

    auto tokenizer = Tokenizer::load_from_dir(a);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
    const std::vector<int32_t> ids = tokenizer->encode("Hi <|im_end|>");
    EXPECT_EQ(ids, (std::vector<int32_t>{'H', 'i', ' ', 258}));
    auto text = tokenizer->decode(ids);
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(*text, "Hi <|im_end|>");

    auto backend = make_cpu_backend();
    auto model = Model::load(a, *backend);
    ASSERT_TRUE(model.ok()) << model.message();
    EXPECT_EQ((*model)->spec().family, ModelFamily::kQwen3_5);
    EXPECT_EQ((*model)->spec().num_linear_attention_layers(), 3);
    auto runner = SequenceRunner::create(**model, 1, 32);
    ASSERT_TRUE(runner.ok()) << runner.message();
    auto logits = runner->feed(0, ids, true);
    ASSERT_TRUE(logits.ok()) << logits.message();
    ASSERT_EQ(logits->size(), ids.size() * static_cast<size_t>((*model)->vocab_size()));
    float spread = 0;
    for (float v : *logits) {
        ASSERT_TRUE(std::isfinite(v));
        spread = std::max(spread, std::fabs(v - (*logits)[0]));
    }
    EXPECT_GT(spread, 0.0f);  // not a constant output
}

TEST_F(DemoModelTest, UnwritableDirectoryIsAnError) {
    fs::create_directories(base_);
    const std::string file = (base_ / "plain_file").string();
    { std::FILE* f = std::fopen(file.c_str(), "w"); std::fclose(f); }
    Status s = write_demo_model(file + "/sub", {});
    EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace pagoda::model
