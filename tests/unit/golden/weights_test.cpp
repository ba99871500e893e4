// Bad checkpoints give a clear error naming the tensor (and expected vs found shape), never a crash; tensors the
// text model does not use (vision tower, MTP head) are skipped.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/file.h"
#include "golden/checkpoint_entries.h"
#include "model/model.h"
#include "model/runner.h"
#include "model/safetensors.h"
#include "runtime/backend.h"

namespace pagoda::model {
namespace {

namespace fs = std::filesystem;

using test::Entry;
using test::read_entries;
using test::write_entries;

class BadCheckpointTest : public ::testing::Test {
  protected:
    void SetUp() override {
        src_ = std::string(PAGODA_SOURCE_DIR) + "/tests/golden/qwen3";
        if (!file_exists(src_ + "/model.safetensors")) GTEST_SKIP() << "no golden qwen3 checkpoint";
        dir_ = fs::temp_directory_path() /
               ("pagoda_weights_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::create_directories(dir_);
        fs::copy_file(src_ + "/config.json", dir_ / "config.json", fs::copy_options::overwrite_existing);
        entries_ = read_entries(src_ + "/model.safetensors");
        backend_ = make_cpu_backend();
    }
    void TearDown() override {
        std::error_code ec;
        if (!dir_.empty()) fs::remove_all(dir_, ec);
    }
    Entry* find(const std::string& name) {
        for (Entry& e : entries_)
            if (e.name == name) return &e;
        ADD_FAILURE() << "no tensor " << name;
        return nullptr;
    }
    Result<std::unique_ptr<Model>> load() {
        write_entries((dir_ / "model.safetensors").string(), entries_);
        return Model::load(dir_.string(), *backend_);
    }

    std::string src_;
    fs::path dir_;
    std::vector<Entry> entries_;
    std::unique_ptr<Backend> backend_;
};

TEST_F(BadCheckpointTest, UnchangedCopyLoads) {
    auto model = load();
    ASSERT_TRUE(model.ok()) << model.message();
}

TEST_F(BadCheckpointTest, MissingTensorIsNamed) {
    const std::string name = "model.layers.1.mlp.up_proj.weight";
    std::erase_if(entries_, [&](const Entry& e) { return e.name == name; });
    auto model = load();
    ASSERT_FALSE(model.ok());
    EXPECT_NE(model.message().find(name), std::string::npos) << model.message();
    EXPECT_NE(model.message().find("missing"), std::string::npos) << model.message();
}

TEST_F(BadCheckpointTest, WrongShapeNamesExpectedAndFound) {
    const std::string name = "model.layers.0.self_attn.k_proj.weight";
    Entry* e = find(name);
    ASSERT_NE(e, nullptr);
    ASSERT_EQ(e->shape, (std::vector<int64_t>{64, 64}));
    e->shape = {32, 64};
    e->data.resize(e->data.size() / 2);
    auto model = load();
    ASSERT_FALSE(model.ok());
    EXPECT_NE(model.message().find(name), std::string::npos) << model.message();
    EXPECT_NE(model.message().find("[64, 64]"), std::string::npos) << model.message();
    EXPECT_NE(model.message().find("[32, 64]"), std::string::npos) << model.message();
}

TEST_F(BadCheckpointTest, WrongDtypeIsNamed) {
    const std::string name = "model.layers.2.self_attn.q_norm.weight";
    Entry* e = find(name);
    ASSERT_NE(e, nullptr);
    e->dtype = "I16";  // same size as BF16
    auto model = load();
    ASSERT_FALSE(model.ok());
    EXPECT_NE(model.message().find(name), std::string::npos) << model.message();
    EXPECT_NE(model.message().find("I16"), std::string::npos) << model.message();
}

TEST_F(BadCheckpointTest, VisionAndMtpTensorsAreIgnored) {
    entries_.push_back({"model.visual.patch_embed.proj.weight", "BF16", {2, 2}, std::string(8, '\0')});
    entries_.push_back({"mtp.fc.weight", "BF16", {3}, std::string(6, '\0')});
    auto model = load();
    ASSERT_TRUE(model.ok()) << model.message();
}

TEST_F(BadCheckpointTest, UnknownLayerTypeIsAnError) {
    auto text = read_file(src_ + "/config.json");
    ASSERT_TRUE(text.ok());
    std::string config = *text;
    const std::string from = "\"full_attention\"";
    const size_t at = config.find(from);
    ASSERT_NE(at, std::string::npos);
    config.replace(at, from.size(), "\"mamba_attention\"");
    std::ofstream(dir_ / "config.json") << config;
    auto model = load();
    ASSERT_FALSE(model.ok());
    EXPECT_FALSE(model.message().empty());
}

TEST_F(BadCheckpointTest, TokenIdOutsideTheVocabularyIsAnError) {
    auto model = load();
    ASSERT_TRUE(model.ok()) << model.message();
    auto runner = SequenceRunner::create(**model, 1, 8);
    ASSERT_TRUE(runner.ok()) << runner.message();
    const int32_t ids[] = {1, 5000};
    auto out = runner->feed(0, ids, false);
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.message().find("5000"), std::string::npos) << out.message();
}

}  // namespace
}  // namespace pagoda::model
