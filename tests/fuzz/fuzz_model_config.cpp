// libFuzzer target: a model directory's config.json and generation_config.json on arbitrary bytes, through what pagoda
// derives from them before it reads a weight (at start-up and on every hot reload): the ModelSpec, the quantization
// plan (its per-module rules resolved for a few module names), the context length, the RoPE table and the
// tensor-parallel shard plans. Each must return an error or a value, never crash, hang, overflow or allocate without
// bound.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/json.h"
#include "model/model_spec.h"
#include "model/quantization.h"
#include "model/rope.h"
#include "model/shard_plan.h"

namespace {

void derive(const pagoda::model::ModelSpec& spec) {
    using namespace pagoda::model;
    // The module rules' expressions run against module names as the loader gives them (in polynomial time).
    if (const auto q = checkpoint_quantization(spec.quantization); q.ok() && q->has_value()) {
        for (const char* name : {"model.layers.0.mlp.down_proj.weight",
                                 "model.language_model.layers.17.mlp.experts.255.gate_proj.weight", "lm_head.weight"})
            (void)(*q)->for_module(name);
    }
    (void)plan_quantization(spec.quantization, "");
    (void)plan_quantization(spec.quantization, "fp8");
    (void)max_context_length(spec);
    (void)rope_table_for(spec);
    for (const bool expert_parallel : {false, true}) {
        for (const int size : {1, 2, 3, 4, 8}) {
            for (int rank = 0; rank < size; ++rank)
                (void)make_shard_plan(spec, size, rank, expert_parallel);
        }
        (void)valid_tensor_parallel_sizes(spec, 64, expert_parallel);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto json = pagoda::Json::parse(text);
    if (!json.ok()) return 0;
    (void)pagoda::model::parse_generation_defaults(json.value());
    auto spec = pagoda::model::parse_model_spec(json.value());
    if (spec.ok()) derive(spec.value());
    return 0;
}
