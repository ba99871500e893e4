// Each weights struct declares its tensors once, in one visit function (visit_weights in arch/blocks.h and
// arch/arch.h): the checkpoint name, the shape, how the loader reads it, how tensor parallelism cuts it, and the member
// that holds it. Loading, device upload, tensor-parallel sharding and `pagoda inspect` walk these declarations, so a
// new weight is one line in its struct's visit function.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "common/status.h"
#include "model/shard_plan.h"
#include "runtime/linear_weight.h"
#include "tensor/tensor.h"

namespace pagoda::model {

// How the loader fills the member.
enum class WeightSource : uint8_t {
    kLinear,    // a LinearWeight: a view of the checkpoint tensor, whose dtype gives the format
    kView,      // a Tensor: a view as stored (the embedding)
    kF32,       // a Tensor: a contiguous F32 copy, of `shape` (stored as `stored_shape` when that is given)
    kUnpacked,  // built by the block's loader before the walk from checkpoint tensors of another layout (Qwen3-Next's
                // packed in_proj_qkvz / in_proj_ba, Qwen3-MoE's per-expert tensors); `name` is then the tensor
                // the split layout would have, which that checkpoint does not hold
};

// One tensor of a weights struct, as its visit function declares it.
struct WeightEntry {
    std::string name;    // the full checkpoint name: "model.layers.3.self_attn.q_proj.weight"
    Shape shape;         // the shape the model holds (the whole, unsplit tensor)
    Shape stored_shape;  // the checkpoint's shape when it differs (conv1d's [C, 1, K]); empty otherwise
    WeightSource source = WeightSource::kLinear;
    ShardRole role;
    LinearWeight* linear = nullptr;  // a LinearWeight member (its bias, if any, is an entry of its own)
    Tensor* tensor = nullptr;        // a Tensor member (kView, kF32)
    bool optional = false;           // may be absent from the checkpoint; the member then stays undefined
    // A projection `--quantization fp8` quantizes at load; false for the linear weights quantized checkpoints leave
    // in bf16 (lm_head, MoE router and shared-expert gates).
    bool quantizable = true;

    // The tensor that holds the entry's data (a LinearWeight's data).
    Tensor& data() const { return linear != nullptr ? linear->data : *tensor; }
    int64_t numel() const { return shape.numel(); }
};

// Called once per declared tensor, in declaration order; an error stops the walk and is returned. The walks run at
// load time, never per step, so a std::function costs nothing that matters.
using WeightVisitor = std::function<Status(const WeightEntry&)>;

// Declaration helpers for the visit functions: the checkpoint name is `prefix + suffix`.
inline WeightEntry linear_entry(const std::string& prefix, const char* suffix, LinearWeight& w, Shape shape,
                                ShardRole role) {
    WeightEntry e;
    e.name = prefix + suffix, e.shape = std::move(shape), e.source = WeightSource::kLinear, e.role = role;
    e.linear = &w;
    return e;
}
// A LinearWeight that stays as stored under --quantization fp8 (WeightEntry::quantizable).
inline WeightEntry dense_linear_entry(const std::string& prefix, const char* suffix, LinearWeight& w, Shape shape,
                                      ShardRole role) {
    WeightEntry e = linear_entry(prefix, suffix, w, std::move(shape), role);
    e.quantizable = false;
    return e;
}
inline WeightEntry tensor_entry(const std::string& prefix, const char* suffix, Tensor& t, Shape shape,
                                WeightSource source, ShardRole role, Shape stored_shape = Shape()) {
    WeightEntry e;
    e.name = prefix + suffix, e.shape = std::move(shape), e.stored_shape = std::move(stored_shape);
    e.source = source, e.role = role, e.tensor = &t;
    return e;
}
// A LinearWeight the block's loader builds from another checkpoint layout (WeightSource::kUnpacked).
inline WeightEntry unpacked_entry(const std::string& prefix, const char* suffix, LinearWeight& w, Shape shape,
                                  ShardRole role) {
    WeightEntry e = linear_entry(prefix, suffix, w, std::move(shape), role);
    e.source = WeightSource::kUnpacked;
    return e;
}

// Visits each entry in order; the first error stops the walk.
Status visit_all(std::span<const WeightEntry> entries, const WeightVisitor& visit);

}  // namespace pagoda::model
