// Reads the k_scale / v_scale tensors of a checkpoint calibrated for an fp8 KV cache.
#include "model/kv_cache_scales.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "tensor/dtype.h"

namespace pagoda::model {

namespace {
// One scale: F32, BF16 or F16, a single element (shape [] or [1]).
Result<float> read_scale(const TensorView& t) {
    if (t.numel() != 1)
        return Status::error(t.name + ": a KV cache scale must hold one value, not " + t.shape_string());
    float v = 0;
    if (t.dtype == StorageDType::kF32) {
        std::memcpy(&v, t.data, sizeof v);
    } else if (t.dtype == StorageDType::kBF16 || t.dtype == StorageDType::kF16) {
        uint16_t bits = 0;
        std::memcpy(&bits, t.data, sizeof bits);
        v = t.dtype == StorageDType::kBF16 ? bf16_to_f32(bits) : f16_to_f32(bits);
    } else {
        return Status::error(t.name + ": a KV cache scale must be F32, BF16 or F16, not " +
                             std::string(storage_dtype_name(t.dtype)));
    }
    if (!(std::isfinite(v) && v > 0)) return Status::error(t.name + ": a KV cache scale must be positive and finite");
    return v;
}
}  // namespace

Result<std::vector<KvScales>> read_kv_cache_scales(const ModelSpec& spec, const Checkpoint& checkpoint) {
    std::vector<KvScales> scales;
    int found = 0, layers = 0;
    for (size_t i = 0; i < spec.layers.size(); ++i) {
        if (spec.layers[i].attention != AttentionKind::kFull) continue;
        ++layers;
        const std::string base = spec.weight_prefix + "layers." + std::to_string(i) + ".self_attn.";
        const TensorView* k = checkpoint.find(base + "k_scale");
        const TensorView* v = checkpoint.find(base + "v_scale");
        if (!k && !v) continue;
        if (!k || !v) return Status::error(base + (k ? "v_scale" : "k_scale") + " is missing beside its pair");
        KvScales s;
        PAGODA_ASSIGN_OR_RETURN(s.k, read_scale(*k));
        PAGODA_ASSIGN_OR_RETURN(s.v, read_scale(*v));
        scales.push_back(s);
        ++found;
    }
    if (found > 0 && found != layers)
        return Status::error("the checkpoint has KV cache scales (self_attn.k_scale / v_scale) for " +
                             std::to_string(found) + " of " + std::to_string(layers) + " full-attention layers");
    return scales;
}

}  // namespace pagoda::model
