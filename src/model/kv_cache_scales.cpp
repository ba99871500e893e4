// Reads the k_scale / v_scale tensors of a checkpoint calibrated for an fp8 KV cache.
#include "model/kv_cache_scales.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "tensor/dtype.h"

namespace pagoda::model {

namespace {
// A scale tensor's values: F32, BF16 or F16; one (shape [] or [1]) or one per KV head.
Result<std::vector<float>> read_scale(const TensorView& t, int64_t num_kv_heads) {
    const int64_t n = t.numel();
    if (n != 1 && n != num_kv_heads) {
        return Status::error(t.name + ": a KV cache scale holds one value, or one per KV head (" +
                             std::to_string(num_kv_heads) + "), not " + t.shape_string());
    }
    if (t.dtype != StorageDType::kF32 && t.dtype != StorageDType::kBF16 && t.dtype != StorageDType::kF16) {
        return Status::error(t.name + ": a KV cache scale must be F32, BF16 or F16, not " +
                             std::string(storage_dtype_name(t.dtype)));
    }
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        float& v = out[static_cast<size_t>(i)];
        if (t.dtype == StorageDType::kF32) {
            std::memcpy(&v, t.data + 4 * i, sizeof v);
        } else {
            uint16_t bits = 0;
            std::memcpy(&bits, t.data + 2 * i, sizeof bits);
            v = t.dtype == StorageDType::kBF16 ? bf16_to_f32(bits) : f16_to_f32(bits);
        }
        if (!(std::isfinite(v) && v > 0))
            return Status::error(t.name + ": a KV cache scale must be positive and finite");
    }
    return out;
}

// One scale, per tensor (into `layer`) or per head (into `heads`).
Status read_into(const TensorView& t, int64_t num_kv_heads, float& layer, std::vector<float>& heads) {
    PAGODA_ASSIGN_OR_RETURN(std::vector<float> values, read_scale(t, num_kv_heads));
    if (t.numel() == 1) {
        layer = values[0];
    } else {
        heads = std::move(values);
    }
    return ok_status();
}
}  // namespace

Result<std::vector<CheckpointKvScales>> read_kv_cache_scales(const ModelSpec& spec, const Checkpoint& checkpoint) {
    std::vector<CheckpointKvScales> scales;
    int found = 0, layers = 0;
    for (size_t i = 0; i < spec.layers.size(); ++i) {
        if (spec.layers[i].attention != AttentionKind::kFull) continue;
        ++layers;
        const std::string base = spec.weight_prefix + "layers." + std::to_string(i) + ".self_attn.";
        const TensorView* k = checkpoint.find(base + "k_scale");
        const TensorView* v = checkpoint.find(base + "v_scale");
        if (!k && !v) continue;
        if (!k || !v) return Status::error(base + (k ? "v_scale" : "k_scale") + " is missing beside its pair");
        CheckpointKvScales s;
        PAGODA_RETURN_IF_ERROR(read_into(*k, spec.num_key_value_heads, s.k, s.k_heads));
        PAGODA_RETURN_IF_ERROR(read_into(*v, spec.num_key_value_heads, s.v, s.v_heads));
        scales.push_back(std::move(s));
        ++found;
    }
    if (found > 0 && found != layers)
        return Status::error("the checkpoint has KV cache scales (self_attn.k_scale / v_scale) for " +
                             std::to_string(found) + " of " + std::to_string(layers) + " full-attention layers");
    return scales;
}

}  // namespace pagoda::model
