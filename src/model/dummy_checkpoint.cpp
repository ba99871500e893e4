#include "model/dummy_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/arch/arch.h"

namespace pagoda::model {

namespace {

constexpr size_t kSlack = size_t(16) << 20;  // offsets are spread over this much beyond the largest tensor
constexpr size_t kAlign = 64;

// bf16 values uniform in [-1/32, 1/32] from a fixed seed (splitmix64): the same buffer on every run.
std::shared_ptr<std::vector<uint16_t>> random_bf16(size_t count) {
    auto values = std::make_shared<std::vector<uint16_t>>(count);
    uint64_t state = 0x9E3779B97F4A7C15ull;
    for (uint16_t& v : *values) {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        const float x = (static_cast<float>(z >> 40) / static_cast<float>(1 << 24) - 0.5f) / 16.0f;
        uint32_t bits;
        std::memcpy(&bits, &x, sizeof bits);
        v = static_cast<uint16_t>(bits >> 16);  // truncated: within [-1/32, 1/32] still
    }
    return values;
}

}  // namespace

Result<Checkpoint> dummy_checkpoint(const ModelSpec& spec) {
    if (!spec.quantization.method.empty()) {
        return Status::error("--load-format dummy makes bf16 weights, and this config has a quantization_config (" +
                             spec.quantization.describe() +
                             "); remove it from config.json (--quantization fp8 quantizes the dummy weights at load)");
    }
    std::vector<TensorView> views;
    auto add = [&views](std::string name, std::span<const int64_t> shape) {
        TensorView t;
        t.name = std::move(name), t.dtype = StorageDType::kBF16, t.shape.assign(shape.begin(), shape.end());
        t.nbytes = static_cast<size_t>(t.numel()) * 2;
        views.push_back(std::move(t));
    };
    ModelWeights declared = declared_weights(spec);
    PAGODA_RETURN_IF_ERROR(visit_weights(declared, spec, [&](const WeightEntry& e) {
        // A tied LM head is absent from such checkpoints; the split rows of Qwen3-Next's packed projections are
        // built from the packed tensors (below).
        if (e.optional || e.source == WeightSource::kUnpacked) return ok_status();
        add(e.name, (e.stored_shape.rank() > 0 ? e.stored_shape : e.shape).dims());
        return ok_status();
    }));
    if (architecture_for(spec.family).delta_net == DeltaNetLayout::kPacked) {
        const int64_t H = spec.hidden_size, Hv = spec.linear_num_value_heads;
        const int64_t qkvz =
            2 * spec.linear_num_key_heads * spec.linear_key_head_dim + 2 * Hv * spec.linear_value_head_dim;
        for (size_t i = 0; i < spec.layers.size(); ++i) {
            if (spec.layers[i].attention != AttentionKind::kLinear) continue;
            const std::string p = spec.weight_prefix + "layers." + std::to_string(i) + ".linear_attn.";
            add(p + "in_proj_qkvz.weight", Shape{qkvz, H}.dims());
            add(p + "in_proj_ba.weight", Shape{2 * Hv, H}.dims());
        }
    }
    size_t largest = 0;
    for (const TensorView& t : views)
        largest = std::max(largest, t.nbytes);
    auto values = random_bf16((largest + kSlack) / 2);
    const auto* base = reinterpret_cast<const std::byte*>(values->data());
    for (size_t i = 0; i < views.size(); ++i)  // tensor i starts (i · 4,099 · 64) mod 16 MiB bytes in
        views[i].data = base + (i * 4099 * kAlign) % kSlack;
    return Checkpoint::from_memory(std::move(views), std::move(values));
}

Result<bool> parse_load_format(std::string_view name) {
    if (name == "auto" || name == "safetensors") return false;
    if (name == "dummy") return true;
    return Status::error("--load-format: '" + std::string(name) + "' is not auto, safetensors or dummy");
}

}  // namespace pagoda::model
