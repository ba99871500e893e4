// What pagoda serves of a checkpoint's quantization_config: how its quantized linear weights are stored (format,
// scale layout, the name of the scale tensor beside each weight), or an error naming a format it does not serve.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "model/model_spec.h"
#include "runtime/linear_weight.h"

namespace pagoda::model {

// The stored form of the checkpoint's quantized linear weights. A weight is quantized when the checkpoint stores it
// in the quantized dtype (F8_E4M3); the ones the config leaves out (modules_to_not_convert / ignore: lm_head, router
// gates, ...) are stored bf16 and load as dense weights.
struct CheckpointQuantization {
    WeightFormat format = WeightFormat::kFp8E4M3;
    ScaleLayout layout = ScaleLayout::kBlock;
    int64_t block_rows = 0, block_cols = 0;  // kBlock
    // The scale tensor of "<module>.weight" is "<module>.<scale_suffix>": a multiplier either way
    // (dequantised weight = q · scale).
    std::string scale_suffix;      // "weight_scale_inv" (fp8: Qwen, DeepSeek) / "weight_scale" (compressed-tensors)
    std::string describe() const;  // "fp8-e4m3 (128x128 block scales)"
};

// nullopt when the config has no quantization_config; an error naming the format and variant when pagoda does not
// serve it:
//  - fp8 (Qwen3-*-FP8, Qwen3.5-*-FP8): fmt e4m3, weight_block_size [r, c] (block scales) or none (per-tensor),
//    dynamic activation scales (served weight-only: activations stay f32, as transformers' dequantised CPU path);
//  - compressed-tensors float-quantized FP8 (llm-compressor W8A8-FP8 / FP8_DYNAMIC): 8-bit float weights, symmetric,
//    channel, tensor or block scales; 8-bit float activations run weight-only likewise.
Result<std::optional<CheckpointQuantization>> checkpoint_quantization(const QuantizationSpec& q);

// What loading does about quantization: read the checkpoint's quantized weights as stored, and (--quantization fp8 on
// an unquantized checkpoint) quantize its projections to fp8 e4m3 with per-channel scales at load, as vLLM does.
struct QuantizationPlan {
    std::optional<CheckpointQuantization> stored;
    bool fp8_at_load = false;
};

// `requested` is --quantization as given ("" when not: config.json decides). On a quantized checkpoint it may name the
// checkpoint's quant_method (it is then only checked); another name is an error naming both. On an unquantized
// checkpoint, "fp8" quantizes at load and any other method is an error saying which methods apply.
Result<QuantizationPlan> plan_quantization(const QuantizationSpec& q, std::string_view requested);

// The scale tensor's name for a weight "<module>.weight".
std::string scale_name(const std::string& weight_name, const CheckpointQuantization& q);

}  // namespace pagoda::model
