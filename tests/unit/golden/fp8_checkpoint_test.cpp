// Loading fp8 checkpoints beyond what the golden test runs: the compressed-tensors spelling of the same weights
// (per-channel and per-tensor `weight_scale`) computes the same logits as the fp8 golden (whose 128x128 blocks each
// cover a whole tiny matrix, so one scale per matrix is every layout at once); missing or misshapen scales and fp8
// tensors without a quantization_config are errors naming the tensors; formats pagoda does not serve are refused
// by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "common/file.h"
#include "common/json.h"
#include "golden/checkpoint_entries.h"
#include "golden/golden_reference.h"
#include "model/model.h"
#include "model/runner.h"
#include "runtime/backend.h"

namespace pagoda::model {
namespace {

namespace fs = std::filesystem;
using test::Entry;

constexpr std::string_view kScaleInv = "weight_scale_inv";

class Fp8CheckpointTest : public ::testing::Test {
  protected:
    void SetUp() override {
        src_ = golden::dir("qwen3_fp8");
        if (!file_exists(src_ + "/model.safetensors")) GTEST_SKIP() << "no golden qwen3_fp8 checkpoint";
        dir_ = fs::temp_directory_path() /
               ("pagoda_fp8_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::create_directories(dir_);
        auto config = Json::parse(*read_file(src_ + "/config.json"));
        ASSERT_TRUE(config.ok()) << config.message();
        config_ = std::move(config).value();
        entries_ = test::read_entries(src_ + "/model.safetensors");
        backend_ = make_cpu_backend();
    }
    void TearDown() override {
        std::error_code ec;
        if (!dir_.empty()) fs::remove_all(dir_, ec);
    }
    void set_quantization(const std::string& json) {
        auto qc = Json::parse(json);
        ASSERT_TRUE(qc.ok()) << qc.message();
        config_.set("quantization_config", std::move(qc).value());
    }
    Result<std::unique_ptr<Model>> load() {
        std::ofstream(dir_ / "config.json") << config_.dump_pretty();
        test::write_entries((dir_ / "model.safetensors").string(), entries_);
        return Model::load(dir_.string(), *backend_);
    }
    // Every weight_scale_inv [1, 1] (one block per tiny matrix) renamed weight_scale and reshaped by `reshape`
    // from the weight's out features N.
    template <typename Reshape>
    void respell_scales(Reshape reshape) {
        for (Entry& e : entries_) {
            if (!e.name.ends_with(kScaleInv)) continue;
            ASSERT_EQ(e.shape, (std::vector<int64_t>{1, 1})) << e.name;
            const std::string weight = e.name.substr(0, e.name.size() - kScaleInv.size()) + "weight";
            const Entry* w = find(weight);
            ASSERT_NE(w, nullptr);
            e.name = e.name.substr(0, e.name.size() - kScaleInv.size()) + "weight_scale";
            e.shape = reshape(w->shape[0]);
            const std::string one = e.data;
            e.data.clear();
            for (int64_t i = 0; i < e.shape[0]; ++i)
                e.data += one;
        }
    }
    Entry* find(const std::string& name) {
        for (Entry& e : entries_)
            if (e.name == name) return &e;
        return nullptr;
    }
    // The prefill logits of the golden sequence against transformers' for the fp8 golden.
    void expect_golden_logits(Model& model) {
        const golden::Reference ref = golden::load(src_);
        auto runner = SequenceRunner::create(model, 1, static_cast<int32_t>(ref.rows) + 8);
        ASSERT_TRUE(runner.ok()) << runner.message();
        auto logits = runner->feed(0, ref.ids, true);
        ASSERT_TRUE(logits.ok()) << logits.message();
        EXPECT_LE(golden::max_diff(*logits, ref, 0, ref.rows), 1e-3f * ref.max_abs);
    }
    std::string error_of_load() {
        auto model = load();
        EXPECT_FALSE(model.ok());
        return model.ok() ? std::string() : model.message();
    }

    std::string src_;
    fs::path dir_;
    Json config_;
    std::vector<Entry> entries_;
    std::unique_ptr<Backend> backend_;
};

TEST_F(Fp8CheckpointTest, CompressedTensorsChannelScalesMatchTheGolden) {
    set_quantization(R"({"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
        "config_groups": {"group_0": {"targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true, "dynamic": false},
            "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": true}}}})");
    respell_scales([](int64_t n) { return std::vector<int64_t>{n, 1}; });
    auto model = load();
    ASSERT_TRUE(model.ok()) << model.message();
    expect_golden_logits(**model);
}

TEST_F(Fp8CheckpointTest, CompressedTensorsTensorScalesMatchTheGolden) {
    set_quantization(R"({"quant_method": "compressed-tensors", "format": "float-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": true}}}})");
    respell_scales([](int64_t) { return std::vector<int64_t>{1}; });
    auto model = load();
    ASSERT_TRUE(model.ok()) << model.message();
    expect_golden_logits(**model);
}

TEST_F(Fp8CheckpointTest, MissingScalesAreNamed) {
    const std::string scales = "model.layers.1.mlp.down_proj.weight_scale_inv";
    ASSERT_NE(find(scales), nullptr);
    std::erase_if(entries_, [&](const Entry& e) { return e.name == scales; });
    const std::string message = error_of_load();
    EXPECT_NE(message.find(scales), std::string::npos) << message;
    EXPECT_NE(message.find("missing"), std::string::npos) << message;
}

TEST_F(Fp8CheckpointTest, MisshapenScalesNameExpectedAndFound) {
    Entry* e = find("model.layers.0.self_attn.q_proj.weight_scale_inv");
    ASSERT_NE(e, nullptr);
    e->shape = {2, 1};
    e->data += e->data;
    const std::string message = error_of_load();
    EXPECT_NE(message.find(e->name), std::string::npos) << message;
    EXPECT_NE(message.find("[1, 1]"), std::string::npos) << message;
    EXPECT_NE(message.find("[2, 1]"), std::string::npos) << message;
}

TEST_F(Fp8CheckpointTest, Fp8TensorsNeedAQuantizationConfig) {
    std::erase_if(config_.as_object(), [](const Json::Member& m) { return m.first == "quantization_config"; });
    const std::string message = error_of_load();
    EXPECT_NE(message.find("F8_E4M3"), std::string::npos) << message;
    EXPECT_NE(message.find("quantization_config"), std::string::npos) << message;
}

// Each refusal names the format (and its variant), and says what is served.
TEST_F(Fp8CheckpointTest, UnservedFormatsAreRefusedByName) {
    const std::pair<const char*, const char*> cases[] = {
        {R"({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true, "version": "gemv"})",
         "AWQ version 'gemv'"},
        {R"({"quant_method": "gptq", "bits": 3, "group_size": 128, "sym": true, "desc_act": false})",
         "3-bit GPTQ weights are not served (4- and 8-bit are)"},
        {R"({"quant_method": "gptq", "bits": 2, "group_size": 128, "sym": true, "desc_act": true})",
         "gptq, int2, group 128, symmetric, act-order"},
        {R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "checkpoint_format": "marlin"})", "'marlin'"},
        {R"({"quant_method": "fp8", "fmt": "e5m2", "weight_block_size": [128, 128]})", "e5m2"},
        {R"({"quant_method": "fp8", "activation_scheme": "static", "weight_block_size": [128, 128]})", "static"},
        {R"({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"g": {
             "weights": {"num_bits": 2, "type": "int", "strategy": "group", "group_size": 128, "symmetric": false}}}})",
         "int weights of 4 or 8 bits are"},
        {R"({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"g": {
             "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128},
             "input_activations": {"num_bits": 8, "type": "int"}}}})",
         "8-bit int activations"},
    };
    for (const auto& [qc, named] : cases) {
        set_quantization(qc);
        const std::string message = error_of_load();
        EXPECT_NE(message.find(named), std::string::npos) << message;
        EXPECT_NE(message.find("not served"), std::string::npos) << message;
    }
}

// Logits of the golden sequence's prefill.
std::vector<float> prefill_logits(Model& model, const golden::Reference& ref) {
    auto runner = SequenceRunner::create(model, 1, static_cast<int32_t>(ref.rows) + 8);
    EXPECT_TRUE(runner.ok()) << runner.message();
    if (!runner.ok()) return {};
    auto logits = runner->feed(0, ref.ids, true);
    EXPECT_TRUE(logits.ok()) << logits.message();
    return logits.ok() ? std::move(logits).value() : std::vector<float>();
}

// --quantization fp8 on the bf16 qwen3 (qwen3_moe: its experts too) quantizes each projection per channel exactly as
// torch did for the qwen3_fp8_channel (qwen3_moe_fp8_channel) golden (tools/make_fp8_golden.py): the same bytes and
// scales give the same logits bit for bit, and those are transformers' for that checkpoint within the golden
// tolerance.
TEST(QuantizeAtLoad, Fp8PerChannelIsTheTorchQuantizationByteForByte) {
    for (const auto& [source, quantized] :
         {std::pair{"qwen3", "qwen3_fp8_channel"}, std::pair{"qwen3_moe", "qwen3_moe_fp8_channel"}}) {
        SCOPED_TRACE(quantized);
        const std::string bf16 = golden::dir(source), channel = golden::dir(quantized);
        if (!file_exists(channel + "/model.safetensors")) GTEST_SKIP() << "no golden " << quantized << " checkpoint";
        auto backend = make_cpu_backend();
        auto online = Model::load(bf16, *backend, single_communicator(), LoadOptions{"fp8"});
        ASSERT_TRUE(online.ok()) << online.message();
        auto stored = Model::load(channel, *backend);
        ASSERT_TRUE(stored.ok()) << stored.message();
        const golden::Reference ref = golden::load(channel);
        const std::vector<float> a = prefill_logits(**online, ref), b = prefill_logits(**stored, ref);
        ASSERT_EQ(a.size(), b.size());
        ASSERT_FALSE(a.empty());
        EXPECT_TRUE(a == b) << "max|Δ| " << golden::max_diff(a, ref, 0, ref.rows) << " vs "
                            << golden::max_diff(b, ref, 0, ref.rows);
        EXPECT_LE(golden::max_diff(a, ref, 0, ref.rows), 1e-3f * ref.max_abs);
        // Not the bf16 model's logits: the weights were quantized.
        const golden::Reference bf16_ref = golden::load(bf16);
        EXPECT_GT(golden::max_diff(a, bf16_ref, 0, bf16_ref.rows), 1e-2f * bf16_ref.max_abs);
    }
}

// --quantization naming the checkpoint's own method is accepted; another one, or a method that needs a quantized
// checkpoint on a bf16 one, is an error naming it.
TEST(QuantizeAtLoad, FlagIsCheckedAgainstTheCheckpoint) {
    const std::string bf16 = golden::dir("qwen3"), fp8 = golden::dir("qwen3_fp8");
    if (!file_exists(fp8 + "/model.safetensors")) GTEST_SKIP() << "no golden qwen3_fp8 checkpoint";
    auto backend = make_cpu_backend();
    auto load = [&](const std::string& dir, const char* q) {
        return Model::load(dir, *backend, single_communicator(), LoadOptions{q});
    };
    EXPECT_TRUE(load(fp8, "fp8").ok());
    auto mismatch = load(fp8, "awq");
    ASSERT_FALSE(mismatch.ok());
    EXPECT_NE(mismatch.message().find("--quantization awq does not match"), std::string::npos) << mismatch.message();
    EXPECT_NE(mismatch.message().find("fp8, 128x128 block scales"), std::string::npos) << mismatch.message();
    auto not_quantized = load(bf16, "gptq");
    ASSERT_FALSE(not_quantized.ok());
    EXPECT_NE(not_quantized.message().find("--quantization gptq"), std::string::npos) << not_quantized.message();
    EXPECT_NE(not_quantized.message().find("not quantized"), std::string::npos) << not_quantized.message();
}

// --fp8-activations: the golden fp8 checkpoint (activation_scheme dynamic) with its projections' inputs rounded to fp8
// per token in groups of 128 computes transformers' logits for the same rounding (tools/make_fp8_golden.py --w8a8: a
// forward pre-hook on each dequantised projection; w8a8_logits_last8.bin, the last 8 positions) within the golden
// tolerance, which the weight-only logits miss (this tiny random model moves its logits by 17% of their range when its
// inputs are rounded). --quantization fp8 takes the flag (per token); a bf16 checkpoint without it has nothing to
// apply it to, which is an error naming the flag.
TEST(Fp8Activations, MatchTransformersRoundingTheInputs) {
    const std::string bf16 = golden::dir("qwen3"), fp8 = golden::dir("qwen3_fp8");
    if (!file_exists(fp8 + "/w8a8_logits_last8.bin")) GTEST_SKIP() << "no golden qwen3_fp8 W8A8 logits";
    auto backend = make_cpu_backend();
    LoadOptions w8a8;
    w8a8.fp8_activations = true;
    auto rounded = Model::load(fp8, *backend, single_communicator(), w8a8);
    ASSERT_TRUE(rounded.ok()) << rounded.message();
    auto weight_only = Model::load(fp8, *backend);
    ASSERT_TRUE(weight_only.ok()) << weight_only.message();
    const golden::Reference ref = golden::load(fp8);
    const auto want = golden::read_f32(fp8 + "/w8a8_logits_last8.bin", static_cast<size_t>(8 * ref.vocab));
    ASSERT_EQ(want.size(), static_cast<size_t>(8 * ref.vocab));
    float want_max = 0.0f;
    for (float v : want)
        want_max = std::max(want_max, std::fabs(v));
    const size_t first = static_cast<size_t>((ref.rows - 8) * ref.vocab);
    for (const auto& [model, matches] : {std::pair{&*rounded, true}, std::pair{&*weight_only, false}}) {
        const std::vector<float> got = prefill_logits(**model, ref);
        ASSERT_EQ(got.size(), static_cast<size_t>(ref.rows * ref.vocab));
        float diff = 0.0f;
        for (size_t i = 0; i < want.size(); ++i)
            diff = std::max(diff, std::fabs(got[first + i] - want[i]));
        if (matches)
            EXPECT_LE(diff, 1e-3f * want_max) << "W8A8 logits against transformers'";
        else
            EXPECT_GT(diff, 1e-2f * want_max) << "the weight-only logits are not the W8A8 ones";
    }
    auto bf16_model = Model::load(bf16, *backend, single_communicator(), w8a8);
    ASSERT_FALSE(bf16_model.ok());
    EXPECT_NE(bf16_model.message().find("--fp8-activations"), std::string::npos) << bf16_model.message();
    w8a8.quantization = "fp8";
    EXPECT_TRUE(Model::load(bf16, *backend, single_communicator(), w8a8).ok());
}

}  // namespace
}  // namespace pagoda::model
