// NodeLoraCache: the adapters of a node other than node 0 of a multi-node group (executor/lora_manager.h). Node 0 names
// each adapter before its first step; the node reads it then, keeps up to --max-cpu-loras in host memory, and reads a
// dropped one again from its directory when a step needs it. Names it was never given, and adapters it cannot read,
// are errors that say which.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "common/file.h"
#include "executor/lora_manager.h"
#include "golden/golden_reference.h"
#include "model/model.h"
#include "runtime/backend.h"

namespace pagoda::executor {
namespace {

namespace fs = std::filesystem;

class NodeLoraCacheTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!file_exists(golden::dir("lora/qwen3/attn/adapter_config.json"))) GTEST_SKIP() << "no LoRA golden data";
        auto m = model::Model::load(golden::dir("qwen3"), *backend_);
        ASSERT_TRUE(m.ok()) << m.message();
        model_ = std::move(m).value();
        ASSERT_TRUE(model_->enable_lora(2, 8).ok());
        // Copies of two adapters, so that one can be taken away.
        dir_ = fs::temp_directory_path() / ("pagoda_node_lora_" + std::to_string(::getpid()));
        fs::remove_all(dir_);
        for (const char* a : {"attn", "mlp_rslora"}) {
            fs::create_directories(dir_ / a);
            fs::copy(golden::dir(std::string("lora/qwen3/") + a), dir_ / a, fs::copy_options::recursive);
        }
    }
    void TearDown() override {
        if (!dir_.empty()) fs::remove_all(dir_);
    }
    std::string path(const char* adapter) const { return (dir_ / adapter).string(); }

    std::unique_ptr<Backend> backend_ = make_cpu_backend();
    std::unique_ptr<model::Model> model_;
    fs::path dir_;
};

TEST_F(NodeLoraCacheTest, KeepsMaxCpuAdaptersAndReadsADroppedOneAgain) {
    NodeLoraCache cache(*model_, /*max_cpu=*/1);
    ASSERT_TRUE(cache.add(1, path("attn")).ok());
    auto first = cache.weights(1);
    ASSERT_TRUE(first.ok()) << first.message();
    EXPECT_EQ((*first)->path, path("attn"));
    EXPECT_EQ(cache.weights(1)->get(), first->get()) << "an adapter held in host memory is not read again";
    // A second adapter takes the one host place: the first is dropped, and read again when a step needs it.
    ASSERT_TRUE(cache.add(2, path("mlp_rslora")).ok());
    auto again = cache.weights(1);
    ASSERT_TRUE(again.ok()) << again.message();
    EXPECT_NE(again->get(), first->get()) << "a dropped adapter must be read again from its directory";
    EXPECT_EQ((*again)->path, path("attn"));
    EXPECT_EQ((*again)->modules.size(), (*first)->modules.size());
    // Now the second one was dropped; with its directory gone, reading it again fails and says so.
    fs::remove_all(dir_ / "mlp_rslora");
    auto gone = cache.weights(2);
    ASSERT_FALSE(gone.ok());
    EXPECT_NE(gone.message().find("LoRA adapter 2 read again"), std::string::npos) << gone.message();
}

TEST_F(NodeLoraCacheTest, TwoPlacesKeepBoth) {
    NodeLoraCache cache(*model_, /*max_cpu=*/2);
    ASSERT_TRUE(cache.add(1, path("attn")).ok());
    ASSERT_TRUE(cache.add(2, path("mlp_rslora")).ok());
    auto a = cache.weights(1), b = cache.weights(2);
    ASSERT_TRUE(a.ok() && b.ok());
    fs::remove_all(dir_);  // nothing is read from disk any more
    EXPECT_EQ(cache.weights(1)->get(), a->get());
    EXPECT_EQ(cache.weights(2)->get(), b->get());
}

TEST_F(NodeLoraCacheTest, UnnamedAndUnreadableAdaptersAreErrors) {
    NodeLoraCache cache(*model_, 2);
    auto unnamed = cache.weights(7);
    ASSERT_FALSE(unnamed.ok());
    EXPECT_NE(unnamed.message().find("LoRA adapter id 7 was not named by node 0"), std::string::npos)
        << unnamed.message();
    const Status bad = cache.add(3, path("no_such_adapter"));
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.message().find("LoRA adapter 3 at " + path("no_such_adapter")), std::string::npos) << bad.message();
    EXPECT_FALSE(cache.weights(3).ok()) << "an adapter that could not be read is not named";
}

}  // namespace
}  // namespace pagoda::executor
