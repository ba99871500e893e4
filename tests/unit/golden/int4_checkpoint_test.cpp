// Loading int4 checkpoints beyond what the golden test runs: each format's packed tensors broken or mislabelled one way
// at a time (a missing zero-point tensor, an act-order g_idx, packed tensors without a quantization_config, a
// weight_shape that disagrees with the config, an int4 expert missing or of another format) is an error naming the
// tensor and what is wrong; and the layout pagoda holds after repacking reads what inspect counts.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/file.h"
#include "common/json.h"
#include "golden/checkpoint_entries.h"
#include "golden/golden_reference.h"
#include "model/model.h"
#include "runtime/backend.h"

namespace pagoda::model {
namespace {

namespace fs = std::filesystem;
using test::Entry;

// Swaps the groups of inputs 0 and `first_of_group_1` in `module`'s g_idx (0 -> group 1, that input -> group 0): a
// permutation of whole groups, i.e. an act-order checkpoint.
void swap_groups(std::vector<Entry>& entries, const std::string& module, int64_t first_of_group_1) {
    for (Entry& e : entries) {
        if (e.name != module + ".g_idx") continue;
        const int32_t one = 1, zero = 0;
        std::memcpy(e.data.data(), &one, 4);
        std::memcpy(e.data.data() + 4 * first_of_group_1, &zero, 4);
    }
}

// Loads golden `name` after `edit` changed its tensors and config.json; the error message, or "" when it loaded.
std::string load_edited(const std::string& name, const std::function<void(std::vector<Entry>&, Json&)>& edit) {
    const std::string src = golden::dir(name);
    if (!file_exists(src + "/model.safetensors")) return "skip";
    const fs::path dir = fs::temp_directory_path() / ("pagoda_int4_test_" + name + "_" +
                                                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
    std::vector<Entry> entries = test::read_entries(src + "/model.safetensors");
    auto config = Json::parse(*read_file(src + "/config.json"));
    EXPECT_TRUE(config.ok());
    edit(entries, *config);
    std::ofstream(dir / "config.json") << config->dump_pretty();
    test::write_entries((dir / "model.safetensors").string(), entries);
    auto backend = make_cpu_backend();
    auto model = Model::load(dir.string(), *backend);
    std::error_code ec;
    fs::remove_all(dir, ec);
    return model.ok() ? std::string() : model.message();
}

void drop_tensor(std::vector<Entry>& entries, const std::string& name) {
    std::erase_if(entries, [&](const Entry& e) { return e.name == name; });
}

TEST(Int4Checkpoint, TheGoldensLoadUnedited) {
    for (const char* name : {"qwen3_awq",
                             "qwen3_gptq",
                             "qwen2_gptq",
                             "qwen3_w4a16",
                             "qwen3_moe_gptq",
                             "qwen3_moe_awq",
                             "qwen3_moe_w4a16",
                             "qwen3_next_gptq",
                             "qwen2_gptq_int8",
                             "qwen2_gptq_int8_asym",
                             "qwen3_gptq_actorder",
                             "qwen3_w4a16_asym",
                             "qwen2_w8a16",
                             "qwen3_autoround",
                             "qwen3_autoround_asym",
                             "qwen2_autoround_awq",
                             "qwen3_5_moe_autoround",
                             "qwen3_autoround_mixed",
                             "qwen3_gptq_dynamic",
                             "qwen3_w4a16_mixed"}) {
        const std::string message = load_edited(name, [](std::vector<Entry>&, Json&) {});
        if (message == "skip") GTEST_SKIP() << "no golden " << name;
        EXPECT_EQ(message, "") << name;
    }
}

TEST(Int4Checkpoint, MissingZeroPointsAreNamed) {
    const std::string message = load_edited(
        "qwen3_awq", [](auto& entries, Json&) { drop_tensor(entries, "model.layers.1.mlp.up_proj.qzeros"); });
    if (message == "skip") GTEST_SKIP();
    EXPECT_NE(message.find("missing tensor 'model.layers.1.mlp.up_proj.qzeros'"), std::string::npos) << message;
}

// compressed-tensors config groups that do not describe the stored modules: the group with zero points (layer 1's
// attention, layer 0's down_proj) relabelled symmetric would read those modules without their zero points, which the
// loader refuses naming the tensor; a target expression this server cannot read refuses the checkpoint (skipping it
// would read its modules with another group's settings).
TEST(Int4Checkpoint, ConfigGroupsThatDoNotDescribeTheModulesAreRefused) {
    const auto group = [](Json& config, const char* name) {
        return config.find("quantization_config")->find("config_groups")->find(name);
    };
    const std::string symmetric = load_edited("qwen3_w4a16_mixed", [&](auto&, Json& config) {
        group(config, "group_2")->find("weights")->set("symmetric", Json(true));
    });
    if (symmetric == "skip") GTEST_SKIP();
    EXPECT_NE(symmetric.find("weight_zero_point' holds zero points"), std::string::npos) << symmetric;
    const std::string unreadable = load_edited("qwen3_w4a16_mixed", [&](auto&, Json& config) {
        Json targets = Json::array();
        targets.push_back(Json(std::string("re:.*(?P<x>mlp)\\.down_proj$")));
        group(config, "group_1")->set("targets", std::move(targets));
    });
    EXPECT_NE(unreadable.find("does not read"), std::string::npos) << unreadable;
}

// GPTQ 8-bit experts: the expert kernels read 4-bit values only, so a Qwen3-MoE GPTQ-Int8 checkpoint is refused by
// name (the golden's int4 experts relabelled 8-bit: the refusal comes before any tensor is read).
TEST(Int4Checkpoint, EightBitExpertsAreRefused) {
    const std::string message = load_edited(
        "qwen3_moe_gptq", [](auto&, Json& config) { config.find("quantization_config")->set("bits", Json(8)); });
    if (message == "skip") GTEST_SKIP();
    EXPECT_NE(message.find("8-bit MoE experts are not served"), std::string::npos) << message;
}

// A g_idx that cannot be sorted into the layout's contiguous groups (q_proj's 64 inputs are one group of 64, and
// input 0 is moved to a group 1 that does not exist) is refused naming the tensor and the input.
TEST(Int4Checkpoint, ActOrderGroupsThatAreNotWholeAreRefused) {
    const std::string message = load_edited("qwen3_gptq", [](auto& entries, Json&) {
        for (Entry& e : entries) {
            if (e.name != "model.layers.0.self_attn.q_proj.g_idx") continue;
            int32_t first;
            std::memcpy(&first, e.data.data(), 4);
            first = 1;  // input 0 in group 1
            std::memcpy(e.data.data(), &first, 4);
        }
    });
    if (message == "skip") GTEST_SKIP();
    EXPECT_NE(message.find("model.layers.0.self_attn.q_proj.g_idx"), std::string::npos) << message;
    EXPECT_NE(message.find("act-order"), std::string::npos) << message;
    EXPECT_NE(message.find("input 0 is in group 1, outside [0, 1)"), std::string::npos) << message;
}

// g_idx, not desc_act, tells: a checkpoint that says desc_act false but whose g_idx permutes whole groups (inputs 0 and
// 64 of o_proj swapped between its groups 0 and 1) loads as act-order.
TEST(Int4Checkpoint, ActOrderIsReadFromTheGroupIndex) {
    const std::string message = load_edited(
        "qwen3_gptq", [](auto& entries, Json&) { swap_groups(entries, "model.layers.0.self_attn.o_proj", 64); });
    if (message == "skip") GTEST_SKIP();
    EXPECT_EQ(message, "");
}

// The grouped expert kernels take no input permutation: act-order experts are refused by name (one expert's g_idx made
// a permutation of whole groups: inputs 0 and 32 swapped between groups 0 and 1; layer 1 is a dense MLP layer).
TEST(Int4Checkpoint, ActOrderExpertsAreRefused) {
    const std::string message = load_edited("qwen3_moe_gptq", [](auto& entries, Json&) {
        swap_groups(entries, "model.layers.2.mlp.experts.3.up_proj", 32);
    });
    if (message == "skip") GTEST_SKIP();
    EXPECT_NE(message.find("model.layers.2.mlp.experts.3.up_proj.weight"), std::string::npos) << message;
    EXPECT_NE(message.find("act-order GPTQ MoE experts"), std::string::npos) << message;
}

TEST(Int4Checkpoint, PackedTensorsNeedTheirQuantizationConfig) {
    const std::string message = load_edited("qwen3_w4a16", [](auto&, Json& config) {
        std::erase_if(config.as_object(), [](const Json::Member& m) { return m.first == "quantization_config"; });
    });
    if (message == "skip") GTEST_SKIP();
    EXPECT_NE(message.find("weight_packed"), std::string::npos) << message;
    EXPECT_NE(message.find("quantization_config"), std::string::npos) << message;
}

TEST(Int4Checkpoint, WeightShapeMustAgreeWithTheConfig) {
    const std::string message = load_edited("qwen3_w4a16", [](auto& entries, Json&) {
        for (Entry& e : entries) {
            if (e.name != "model.layers.2.self_attn.o_proj.weight_shape") continue;
            const int64_t wrong[2] = {64, 64};
            e.data.assign(reinterpret_cast<const char*>(wrong), sizeof wrong);
        }
    });
    if (message == "skip") GTEST_SKIP();
    EXPECT_NE(message.find("model.layers.2.self_attn.o_proj.weight_shape"), std::string::npos) << message;
}

// A group size that does not divide a projection's inputs (qwen3's K = 64 against groups of 128).
TEST(Int4Checkpoint, GroupsThatDoNotDivideTheInputsAreNamed) {
    const std::string message = load_edited("qwen3_gptq", [](auto&, Json& config) {
        Json qc = *config.find("quantization_config");
        qc.set("group_size", Json(int64_t{128}));
        config.set("quantization_config", qc);
    });
    if (message == "skip") GTEST_SKIP();
    EXPECT_NE(message.find("group size dividing the input features"), std::string::npos) << message;
}

// int4 experts are stacked from every expert's packed tensors: one missing is named, and an expert of another format
// than expert 0 (here its packed weight gone) is refused naming it, not stacked with garbage.
TEST(Int4Checkpoint, AnExpertsMissingTensorIsNamed) {
    const std::string missing = load_edited("qwen3_moe_gptq", [](auto& entries, Json&) {
        drop_tensor(entries, "model.layers.2.mlp.experts.7.down_proj.scales");
    });
    if (missing == "skip") GTEST_SKIP();
    EXPECT_NE(missing.find("missing tensor 'model.layers.2.mlp.experts.7.down_proj.scales'"), std::string::npos)
        << missing;
}

TEST(Int4Checkpoint, AnExpertOfAnotherFormatIsNamed) {
    const std::string other = load_edited("qwen3_moe_awq", [](auto& entries, Json&) {
        drop_tensor(entries, "model.layers.0.mlp.experts.5.up_proj.qweight");
    });
    if (other == "skip") GTEST_SKIP();
    EXPECT_NE(other.find("experts.5.up_proj.weight: experts of one layer must share one format"), std::string::npos)
        << other;
}

// Experts whose first expert has no tensors at all (as when a checkpoint stores them fused under other names): refused
// saying which layouts are served, not a bare missing tensor.
TEST(Int4Checkpoint, ExpertsNotStoredOneByOneAreRefused) {
    const std::string message = load_edited("qwen3_moe_w4a16", [](auto& entries, Json&) {
        std::erase_if(entries,
                      [](const Entry& e) { return e.name.starts_with("model.layers.0.mlp.experts.0.gate_proj."); });
    });
    if (message == "skip") GTEST_SKIP();
    EXPECT_NE(message.find("model.layers.0.mlp.experts.0.gate_proj: neither packed int4 tensors nor a weight"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("not fused"), std::string::npos) << message;
}

}  // namespace
}  // namespace pagoda::model
