// Weights of one model as backend tensors: checked lookups of checkpoint tensors by name (zero-copy views of the
// memory-mapped files where the layout allows it), and the buffers the loader had to create (fp32 copies of small
// vectors, re-ordered packed projections).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "common/status.h"
#include "model/safetensors.h"
#include "model/weight_visitor.h"
#include "runtime/linear_weight.h"
#include "tensor/buffer.h"
#include "tensor/tensor.h"

namespace pagoda::model {

// Memory the loader allocated; lives as long as the model.
struct OwnedWeights {
    std::vector<Buffer> buffers;
};

// Looks tensors up in a checkpoint and checks them. Every error names the tensor and, for a shape mismatch, the
// expected and the found shape. Tensors that are never asked for (vision tower, MTP head) are simply not loaded.
class WeightLoader {
  public:
    WeightLoader(const Checkpoint& checkpoint, OwnedWeights& owned) : checkpoint_(checkpoint), owned_(owned) {}

    bool has(std::string_view name) const { return checkpoint_.find(name) != nullptr; }
    // Shape of a tensor, or an error naming it when absent.
    Result<std::vector<int64_t>> shape_of(const std::string& name) const;

    // A zero-copy view of a floating-point tensor (F32, BF16 or F16) of exactly `shape`.
    Result<Tensor> view(const std::string& name, const Shape& shape);
    // A dense linear weight: view() of `name` as LinearWeight data (its dtype gives the format).
    Result<LinearWeight> linear(const std::string& name, const Shape& shape);
    // A contiguous F32 copy (norm weights, biases, gate parameters, conv kernels): any float dtype in the file.
    // `shape` is the expected stored shape; `as` (optional) the shape of the returned tensor (same element count).
    Result<Tensor> f32(const std::string& name, const Shape& shape, const Shape& as = Shape());
    // An uninitialised owned host tensor for weights the loader builds itself.
    Tensor allocate(DType dtype, const Shape& shape);
    // Reads one declared tensor into its member as entry.source says (an absent optional one is left undefined;
    // a kUnpacked one must have been built already). A LinearWeight keeps the bias it has.
    Status load(const WeightEntry& entry);
    // load() as a visitor, for a visit_weights walk.
    WeightVisitor visitor() {
        return [this](const WeightEntry& e) { return load(e); };
    }

    // Names handed out so far (for reports of what was ignored).
    const std::unordered_set<std::string>& used() const { return used_; }

  private:
    Result<const TensorView*> lookup(const std::string& name, const Shape& shape);

    const Checkpoint& checkpoint_;
    OwnedWeights& owned_;
    std::unordered_set<std::string> used_;
};

// Maps a safetensors element type to a tensor dtype (floating-point types only).
bool to_tensor_dtype(StorageDType storage, DType& out);
std::string shape_string(const Shape& shape);

}  // namespace pagoda::model
