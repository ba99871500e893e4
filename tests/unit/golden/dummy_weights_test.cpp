// --load-format dummy: random weights for a config alone. The tensors it makes are named and shaped as the golden
// checkpoints (made by transformers) hold them, a model of each family loads from config.json alone and runs, the
// weights are the same on every load, and what it cannot make is refused by name.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "common/file.h"
#include "model/dummy_checkpoint.h"
#include "model/model.h"
#include "model/model_dir.h"
#include "model/runner.h"
#include "runtime/backend.h"

namespace pagoda::model {
namespace {

namespace fs = std::filesystem;

LoadOptions dummy_options(std::string quantization = "") {
    LoadOptions o;
    o.quantization = std::move(quantization), o.dummy_weights = true;
    return o;
}

std::string golden(const std::string& name) {
    return std::string(PAGODA_SOURCE_DIR) + "/tests/golden/" + name;
}

// A directory holding only `name`'s config.json: no weights to read. Named by the process and a count: ctest runs
// each test in a process of its own, two at a time, and a name from gtest's random seed (the clock's milliseconds)
// once let one test's directory be removed under another's (CI, session 41).
class ConfigOnly {
  public:
    explicit ConfigOnly(const std::string& name) {
        static int made = 0;
        dir_ = fs::temp_directory_path() /
               ("pagoda_dummy_" + name + "_" + std::to_string(::getpid()) + "_" + std::to_string(made++));
        fs::create_directories(dir_);
        fs::copy_file(golden(name) + "/config.json", dir_ / "config.json", fs::copy_options::overwrite_existing);
    }
    ~ConfigOnly() {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    std::string path() const { return dir_.string(); }

  private:
    fs::path dir_;
};

Result<std::vector<float>> dummy_logits(const std::string& dir, Backend& backend) {
    PAGODA_ASSIGN_OR_RETURN(auto model, Model::load(dir, backend, single_communicator(), dummy_options()));
    PAGODA_ASSIGN_OR_RETURN(auto runner, SequenceRunner::create(*model, 1, 16));
    const std::vector<int32_t> ids = {1, 7, 42, 3, 100, 5, 9, 11};
    return runner.feed(0, ids, true);
}

class DummyWeightsTest : public ::testing::TestWithParam<std::string> {};

// Every tensor the dummy checkpoint holds is in transformers' checkpoint of the family, with the same shape (its
// expert stacks in Qwen3.5-MoE's fused layout: against a per-expert checkpoint, qwen3_moe's and qwen3_next's, the
// stack of its experts' tensors), and the tied LM head is left out as there.
TEST_P(DummyWeightsTest, TensorsAreTheCheckpointsOwn) {
    const std::string name = GetParam();
    if (!file_exists(golden(name) + "/model.safetensors") &&
        !file_exists(golden(name) + "/model.safetensors.index.json"))
        GTEST_SKIP() << "no golden " << name << " checkpoint";
    auto real = ModelDir::open(golden(name), true);
    ASSERT_TRUE(real.ok()) << real.message();
    auto dummy = dummy_checkpoint(real->spec);
    ASSERT_TRUE(dummy.ok()) << dummy.message();
    ASSERT_FALSE(dummy->tensors().empty());
    size_t compared = 0;
    for (const TensorView* t : dummy->tensors()) {
        EXPECT_EQ(t->dtype, StorageDType::kBF16) << t->name;
        EXPECT_EQ(t->nbytes, static_cast<size_t>(t->numel()) * 2) << t->name;
        const TensorView* r = real->checkpoint->find(t->name);
        if (const size_t at = t->name.find("experts."); r == nullptr && at != std::string::npos) {
            // A per-expert checkpoint (qwen3_moe, qwen3_next): expert 0's tensor of the stack's kind is there.
            const bool gate_up = t->name.ends_with("gate_up_proj");
            const std::string expert0 =
                t->name.substr(0, at) + "experts.0." + (gate_up ? "gate_proj" : "down_proj") + ".weight";
            const TensorView* e0 = real->checkpoint->find(expert0);
            ASSERT_NE(e0, nullptr) << name << ": neither " << t->name << " nor " << expert0;
            const int64_t rows = gate_up ? 2 * e0->shape[0] : e0->shape[0];
            EXPECT_EQ(t->shape, (std::vector<int64_t>{real->spec.num_experts, rows, e0->shape[1]})) << t->name;
            continue;
        }
        ASSERT_NE(r, nullptr) << name << ": " << t->name << " is not in transformers' checkpoint";
        EXPECT_EQ(t->shape, r->shape) << name << ": " << t->name;
        ++compared;
    }
    EXPECT_GT(compared, 10u);
    EXPECT_EQ(dummy->find("lm_head.weight") != nullptr, real->checkpoint->find("lm_head.weight") != nullptr) << name;
}

// From config.json alone: the model loads and gives finite logits, the same on a second load.
TEST_P(DummyWeightsTest, ConfigAloneLoadsAndRunsTheSameTwice) {
    const std::string name = GetParam();
    const ConfigOnly dir(name);
    auto backend = make_cpu_backend();
    auto first = dummy_logits(dir.path(), *backend);
    ASSERT_TRUE(first.ok()) << first.message();
    ASSERT_FALSE(first->empty());
    for (const float x : *first)
        ASSERT_TRUE(std::isfinite(x)) << name;
    auto second = dummy_logits(dir.path(), *backend);
    ASSERT_TRUE(second.ok()) << second.message();
    EXPECT_EQ(*first, *second) << name;
}

INSTANTIATE_TEST_SUITE_P(Families, DummyWeightsTest,
                         ::testing::Values("qwen2", "qwen2_tied", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5",
                                           "qwen3_5_moe"),
                         [](const auto& info) { return info.param; });

// Without the flag a config alone is an error (no weights), as before.
TEST(DummyWeightsFlagTest, WithoutItAConfigAloneHasNoWeights) {
    const ConfigOnly dir("qwen3");
    auto backend = make_cpu_backend();
    EXPECT_FALSE(Model::load(dir.path(), *backend).ok());
}

// A quantized config's weights are not bf16: refused, saying so; --quantization fp8 quantizes dummy weights.
TEST(DummyWeightsFlagTest, QuantizedConfigIsRefusedAndFp8AtLoadWorks) {
    const ConfigOnly fp8("qwen3_fp8");
    auto backend = make_cpu_backend();
    auto refused = Model::load(fp8.path(), *backend, single_communicator(), dummy_options());
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.message().find("quantization_config"), std::string::npos) << refused.message();
    const ConfigOnly bf16("qwen3");
    auto quantized = Model::load(bf16.path(), *backend, single_communicator(), dummy_options("fp8"));
    EXPECT_TRUE(quantized.ok()) << quantized.message();
}

TEST(DummyWeightsFlagTest, LoadFormatNames) {
    EXPECT_FALSE(*parse_load_format("auto"));
    EXPECT_FALSE(*parse_load_format("safetensors"));
    EXPECT_TRUE(*parse_load_format("dummy"));
    auto bad = parse_load_format("pt");
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.message().find("auto, safetensors or dummy"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace pagoda::model
