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
#include "model/int4_repack.h"
#include "model/quantization.h"
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
    // `quantization`: how the checkpoint's quantized weights are stored (checkpoint_quantization), or null when it
    // has none; it must outlive the loader.
    WeightLoader(const Checkpoint& checkpoint, OwnedWeights& owned,
                 const CheckpointQuantization* quantization = nullptr)
        : checkpoint_(checkpoint), owned_(owned), quantization_(quantization) {}

    bool has(std::string_view name) const { return checkpoint_.find(name) != nullptr; }
    // Whether `name` is stored as F8_E4M3 (for the layouts that only take dense weights yet, to say so).
    bool stored_fp8(std::string_view name) const {
        const TensorView* t = checkpoint_.find(name);
        return t != nullptr && t->dtype == StorageDType::kF8_E4M3;
    }
    // Whether the weight `name` ("<module>.weight") is stored packed as int4 (GPTQ: or int8) by the checkpoint's
    // quantization_config (<module>.qweight or <module>.weight_packed beside it).
    bool stored_int4(const std::string& name) const;
    // Shape of a tensor, or an error naming it when absent.
    Result<std::vector<int64_t>> shape_of(const std::string& name) const;

    // A zero-copy view of a floating-point tensor (F32, BF16 or F16) of exactly `shape`.
    Result<Tensor> view(const std::string& name, const Shape& shape);
    // A linear weight of `shape` as stored: a view of a float tensor as a dense weight (its dtype gives the format),
    // or of an F8_E4M3 tensor as an fp8 weight with its scale tensor (an F32 copy in the layout the
    // quantization_config gives; an error naming both tensors when it is missing or of the wrong shape), or of an int4
    // checkpoint's packed tensors (AWQ, GPTQ, compressed-tensors) repacked into LinearWeight's int4 layout.
    Result<LinearWeight> linear(const std::string& name, const Shape& shape);
    // A contiguous F32 copy (norm weights, biases, gate parameters, conv kernels): any float dtype in the file.
    // `shape` is the expected stored shape; `as` (optional) the shape of the returned tensor (same element count).
    Result<Tensor> f32(const std::string& name, const Shape& shape, const Shape& as = Shape());
    // A dense [N, K] weight quantized to fp8 e4m3 with per-channel scales, in owned buffers (bias kept).
    LinearWeight quantize_fp8(const LinearWeight& dense);
    // An uninitialised owned host tensor for weights the loader builds itself.
    Tensor allocate(DType dtype, const Shape& shape);
    // Reads one declared tensor into its member as entry.source says (an absent optional one is left undefined;
    // a kUnpacked one must have been built already). A LinearWeight keeps the bias it has.
    Status load(const WeightEntry& entry);
    // load() as a visitor, for a visit_weights walk.
    WeightVisitor visitor() {
        return [this](const WeightEntry& e) { return load(e); };
    }

    // One int4 module's packed tensors, found and checked (int4_module), for a repack into memory the caller owns:
    // stacks of experts repack each expert into its rows of one buffer, many experts at once.
    struct Int4Module {
        std::string name;  // "<module>.weight"
        int64_t N = 0, K = 0, group = 0;
        int bits = 4;                         // 4, or 8 (GPTQ / compressed-tensors int8: LinearWeight's kInt8)
        bool zero_points = false;             // the module's format has zero points (else the symmetric 2^(bits-1))
        const TensorView* qweight = nullptr;  // qweight (AWQ, GPTQ) or weight_packed (compressed-tensors)
        const TensorView* qzeros = nullptr;   // qzeros (AWQ, GPTQ), weight_zero_point (compressed-tensors asymmetric)
        const TensorView* scales = nullptr;
        DType dequant_dtype = DType::F32;  // LinearWeight::dequant_dtype: the stored scales' dtype
        // GPTQ act-order: the inputs sorted by their group (act_order_permutation, LinearWeight::input_perm), which
        // the repack applies; empty for every other module.
        std::vector<int32_t> input_perm;
    };
    // The packed tensors of the int4 weight `name` of `shape` [N, K] (marked used), checked as int4_linear checks
    // them (shapes, dtypes, a g_idx of whole groups, a matching weight_shape). Not thread-safe.
    Result<Int4Module> int4_module(const std::string& name, const Shape& shape);
    // The same with the module's quantization already resolved (int4_quantization).
    Result<Int4Module> int4_module(const std::string& name, const Shape& shape, const CheckpointQuantization& q);
    // Whether the checkpoint is an int4 (or GPTQ int8) one (its quantization_config).
    bool int4_checkpoint() const { return quantization_ != nullptr && quantization_->bits() != 0; }
    // The quantization of the int4 / int8 weight `name`: its module's own where a quantization rule gives it some
    // (an error where that rule is one pagoda cannot serve).
    Result<CheckpointQuantization> int4_quantization(const std::string& name) const {
        return quantization_->for_module(name);
    }
    // Expert parallelism: a rank stacks only the routed experts it holds, [first, first + count) (a per-expert
    // checkpoint's stacks are then this rank's shard already). count < 0: every expert.
    void hold_experts(int64_t first, int64_t count) { experts_first_ = first, experts_count_ = count; }
    int64_t experts_first() const { return experts_first_; }
    int64_t experts_count(int64_t all) const { return experts_count_ < 0 ? all : experts_count_; }
    // Tensor parallelism by features: a rank stacks only its features [first, first + count) of each routed expert
    // (gate and up rows, down columns) where the experts are dense (quantized ones are stacked whole, then cut with
    // their scales). count < 0: every feature.
    void hold_expert_features(int64_t first, int64_t count) { features_first_ = first, features_count_ = count; }
    int64_t expert_features_first() const { return features_first_; }
    int64_t expert_features_count(int64_t all) const { return features_count_ < 0 ? all : features_count_; }
    // Repacks a found module into `out` (N, K and group as the module's) on up to `threads` threads (0: every core).
    // Thread-safe: reads the mapping only.
    void repack_int4(const Int4Module& m, const Int4Layout& out, unsigned threads = 1) const;

    // Names handed out so far (for reports of what was ignored).
    const std::unordered_set<std::string>& used() const { return used_; }

  private:
    // The stored tensor `name` of exactly `shape`, of a float dtype (F32, BF16, F16; also F8_E4M3 when `fp8`).
    Result<const TensorView*> lookup(const std::string& name, const Shape& shape, bool fp8 = false);
    Result<LinearWeight> fp8_linear(const std::string& name, const Shape& shape);
    Result<LinearWeight> int4_linear(const std::string& name, const Shape& shape);
    // The stored tensor `name` of exactly `shape`, whatever its dtype (marked used).
    Result<const TensorView*> find_shaped(const std::string& name, const Shape& shape);
    // The stored tensor `name` of `shape` holding packed int4 words (I32, or U32 as some packers write).
    Result<const TensorView*> packed_words(const std::string& name, const Shape& shape);

    const Checkpoint& checkpoint_;
    OwnedWeights& owned_;
    const CheckpointQuantization* quantization_;
    std::unordered_set<std::string> used_;
    int64_t experts_first_ = 0, experts_count_ = -1;
    int64_t features_first_ = 0, features_count_ = -1;
};

// Maps a safetensors element type to a tensor dtype (F32, BF16, F16; F8_E4M3 too when `fp8`).
bool to_tensor_dtype(StorageDType storage, DType& out, bool fp8 = false);
std::string shape_string(const Shape& shape);

}  // namespace pagoda::model
