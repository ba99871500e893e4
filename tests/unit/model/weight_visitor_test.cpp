// The weights structs' declarations (visit_weights, model/weight_visitor.h) against the golden checkpoints of every
// family: each tensor read by name is in the checkpoint with the declared shape, and the declared tensors hold every
// parameter of the text model (per-expert and packed tensors included, as the parts they are built into).
#include <gtest/gtest.h>

#include <string>

#include "model/arch/arch.h"
#include "model/model_dir.h"

namespace pagoda::model {
namespace {

class DeclaredWeightsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DeclaredWeightsTest, MatchTheCheckpoint) {
    auto dir = ModelDir::open(std::string(PAGODA_SOURCE_DIR) + "/tests/golden/" + GetParam(), true);
    ASSERT_TRUE(dir.ok()) << dir.message();
    const ModelSpec& spec = dir->spec;
    const Checkpoint& checkpoint = *dir->checkpoint;
    ModelWeights declared = declared_weights(spec);
    for (size_t i = 0; i < declared.layers.size(); ++i) {  // the layout prepare_moe finds
        const std::string experts = spec.weight_prefix + "layers." + std::to_string(i) + ".mlp.experts.";
        declared.layers[i].moe.per_expert_checkpoint = checkpoint.find(experts + "gate_up_proj") == nullptr;
    }
    int64_t params = 0;
    Status walked = visit_weights(declared, spec, [&](const WeightEntry& e) {
        const TensorView* t = checkpoint.find(e.name);
        if (e.source == WeightSource::kUnpacked) {
            EXPECT_EQ(t, nullptr) << e.name << " is built at load, yet the checkpoint has it";
        } else if (t == nullptr) {
            EXPECT_TRUE(e.optional) << "missing " << e.name;
            return ok_status();
        } else {
            const Shape stored = e.stored_shape.rank() > 0 ? e.stored_shape : e.shape;
            EXPECT_EQ(Shape(std::span<const int64_t>(t->shape)), stored) << e.name;
        }
        params += e.numel();
        return ok_status();
    });
    ASSERT_TRUE(walked.ok()) << walked.message();
    const WeightSummary summary = summarize_weights(spec, checkpoint);
    EXPECT_EQ(params, summary.params.embedding + summary.params.text_model);
}

INSTANTIATE_TEST_SUITE_P(Golden, DeclaredWeightsTest,
                         ::testing::Values("qwen2", "qwen2_tied", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5",
                                           "qwen3_5_moe"));

}  // namespace
}  // namespace pagoda::model
