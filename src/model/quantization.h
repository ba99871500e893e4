// What pagoda serves of a checkpoint's quantization_config: how its quantized linear weights are stored (format,
// scale layout, the name of the scale tensor beside each weight), or an error naming a format it does not serve.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/model_spec.h"
#include "runtime/linear_weight.h"

namespace pagoda::model {

// How an int4 (GPTQ: or int8) checkpoint packs its weights (model/int4_repack.h has each layout).
enum class Int4Packing : uint8_t {
    kNone,           // not int4
    kAwqGemm,        // AutoAWQ version "gemm": <module>.qweight [K, N/8], .qzeros, .scales [K/group, N]
    kGptq,           // GPTQ: <module>.qweight [K/8, N] (8 bits: [K/4, N]), .qzeros (stored zero - 1 in the v1
                     // format), .scales, .g_idx
    kPackQuantized,  // compressed-tensors pack-quantized: <module>.weight_packed [N, K/8] (8 bits: [N, K/4]),
                     // .weight_scale, .weight_shape, and with zero points .weight_zero_point [N/8, K/group] ([N/4, ..])
};

// The stored form of the checkpoint's quantized linear weights. A weight is quantized when the checkpoint stores it
// in the quantized form (F8_E4M3 data; for int4 the packed tensors beside the module); the ones the config leaves out
// (modules_to_not_convert / ignore: lm_head, router gates, ...) are stored bf16 and load as dense weights.
struct CheckpointQuantization {
    WeightFormat format = WeightFormat::kFp8E4M3;
    ScaleLayout layout = ScaleLayout::kBlock;
    int64_t block_rows = 0, block_cols = 0;  // kBlock
    // The scale tensor of "<module>.weight" is "<module>.<scale_suffix>": a multiplier either way
    // (dequantised weight = q · scale).
    std::string scale_suffix;  // "weight_scale_inv" (fp8: Qwen, DeepSeek) / "weight_scale" (compressed-tensors)
    // int4 (format kInt4, layout kGroup), and 8-bit GPTQ / compressed-tensors (format kInt8: the same fields, one
    // value a byte)
    Int4Packing packing = Int4Packing::kNone;
    int64_t group_size = 0;        // inputs per scale; 0: one group per row (per channel)
    bool zero_points = false;      // asymmetric (AWQ, GPTQ sym false, compressed-tensors symmetric false)
    int32_t zero_offset = 0;       // added to each stored zero (1 for GPTQ's v1 format)
    std::string describe() const;  // "fp8-e4m3 (128x128 block scales)", "int4 (group 128, zero points), AWQ GEMM"
    int bits() const { return grouped_int_bits(format); }  // 4, 8 (grouped integer formats); 0 for fp8

    // Modules stored with other bits, groups (or zero points) than the checkpoint's (auto-round's extra_config,
    // GPTQModel's dynamic rules, compressed-tensors' other config groups: QuantizationSpec::module_rules): exact module
    // names, then expressions in the order they apply.
    struct ModuleOverride {
        WeightFormat format = WeightFormat::kInt4;
        int64_t group_size = 0;
        bool zero_points = false;
        std::string refusal;  // a rule pagoda cannot serve: an error once it decides a module that is stored packed
    };
    struct ModuleOverrides;                            // (quantization.cpp)
    std::shared_ptr<const ModuleOverrides> overrides;  // null: none (shared: for_module copies the rest)
    // The settings of weight `name` ("<module>.weight"): those of the rule that decides the module (its name as stored,
    // and without the "language_model." of a multimodal checkpoint, the names such rules are written with), else the
    // checkpoint's; an error when that rule is one pagoda cannot serve.
    Result<CheckpointQuantization> for_module(const std::string& name) const;
};

// The input quantization group (LinearWeight::input_quant_group) the checkpoint computes its fp8 weight `w` with: its
// activations quantized dynamically to fp8 (quant_method fp8 with activation_scheme dynamic: groups of the
// checkpoint's weight_block_size width, or per token without blocks; compressed-tensors' dynamic float8 input
// activations: per token, or the checkpoint's groups), else 0 (weight-only: static or no activation quantization).
int64_t dynamic_activation_group(const QuantizationSpec& q, const LinearWeight& w);

// nullopt when the config has no quantization_config; an error naming the format and variant when pagoda does not
// serve it:
//  - fp8 (Qwen3-*-FP8, Qwen3.5-*-FP8): fmt e4m3, weight_block_size [r, c] (block scales) or none (per-tensor),
//    dynamic activation scales (served weight-only: activations stay f32, as transformers' dequantised CPU path);
//  - compressed-tensors float-quantized FP8 (llm-compressor W8A8-FP8 / FP8_DYNAMIC): 8-bit float weights, symmetric,
//    channel, tensor or block scales; 8-bit float activations run weight-only likewise;
//  - awq (Qwen*-AWQ, AutoAWQ): 4 bits, version gemm, zero points, groups;
//  - gptq (Qwen*-GPTQ-Int4 and -Int8, GPTQModel / AutoGPTQ): 4 or 8 bits, sym or not, groups or per channel,
//    desc_act false or true (act-order: the loader reads g_idx), checkpoint format gptq (v1) or gptq_v2;
//  - compressed-tensors pack-quantized W4A16 (llm-compressor): 4-bit int weights, symmetric, group or channel
//    scales, no activation quantization;
//  - auto-round (Intel's AutoRound): int weights, 4 or 8 bits in the GPTQ packings (auto_round:auto_gptq, auto_round,
//    auto_round:gptqmodel), 4 in the AWQ one (auto_round:auto_awq);
// and the modules' own bits and groups within those limits: gptq's dynamic, auto-round's extra_config,
// compressed-tensors' config groups (integer ones beside integer ones; symmetric or not).
Result<std::optional<CheckpointQuantization>> checkpoint_quantization(const QuantizationSpec& q);

// What loading does about quantization: read the checkpoint's quantized weights as stored, and (--quantization fp8 on
// an unquantized checkpoint) quantize its projections to fp8 e4m3 with per-channel scales at load, as vLLM does.
struct QuantizationPlan {
    std::optional<CheckpointQuantization> stored;
    bool fp8_at_load = false;
};

// `requested` is --quantization as given ("" when not: config.json decides). On a quantized checkpoint it may name the
// checkpoint's quant_method (it is then only checked; vLLM's awq_marlin and gptq_marlin count as awq and gptq);
// another name is an error naming both. On an unquantized
// checkpoint, "fp8" quantizes at load and any other method is an error saying which methods apply.
Result<QuantizationPlan> plan_quantization(const QuantizationSpec& q, std::string_view requested);

// "<module>." for a weight "<module>.weight" (the prefix of the tensors a quantized module stores beside it).
std::string module_prefix(const std::string& weight_name);
// The name of the tensor an int4 (or GPTQ int8) checkpoint packs the weight "<module>.weight" in: "<module>.qweight"
// (AWQ, GPTQ) or
// "<module>.weight_packed" (compressed-tensors).
std::string packed_name(const std::string& weight_name, const CheckpointQuantization& q);

// The scale tensor's name for a weight "<module>.weight".
std::string scale_name(const std::string& weight_name, const CheckpointQuantization& q);

}  // namespace pagoda::model
