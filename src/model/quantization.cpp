#include "model/quantization.h"

namespace pagoda::model {

namespace {

constexpr const char* kServed =
    "pagoda serves fp8 e4m3 checkpoints (quant_method fp8, or compressed-tensors float-quantized 8-bit float weights)";

Status not_served(const QuantizationSpec& q, const std::string& why) {
    return Status::error("quantized checkpoint (" + q.describe() + "): " + why + "; " + kServed);
}

Result<std::optional<CheckpointQuantization>> fp8(const QuantizationSpec& q) {
    if (!q.fmt.empty() && q.fmt != "e4m3") return not_served(q, "fp8 format '" + q.fmt + "' is not served yet");
    if (q.activation_scheme == "static") {
        // Static activation scales change the numbers (activations are quantized with the checkpoint's scale);
        // serving them weight-only would not compute what the checkpoint was calibrated for.
        return not_served(q, "static activation scales are not served yet");
    }
    CheckpointQuantization c;
    c.scale_suffix = "weight_scale_inv";
    if (q.weight_block_size.empty()) {
        c.layout = ScaleLayout::kPerTensor;
    } else if (q.weight_block_size.size() == 2 && q.weight_block_size[0] > 0 && q.weight_block_size[1] > 0) {
        c.layout = ScaleLayout::kBlock;
        c.block_rows = q.weight_block_size[0], c.block_cols = q.weight_block_size[1];
    } else {
        return not_served(q, "weight_block_size must be two positive sizes");
    }
    return std::optional<CheckpointQuantization>(c);
}

Result<std::optional<CheckpointQuantization>> compressed_tensors(const QuantizationSpec& q) {
    if (q.format != "float-quantized" || q.weight_type != "float" || q.bits != 8) {
        return not_served(q, "this variant is not served yet");
    }
    if (!q.sym) return not_served(q, "asymmetric fp8 weights are not served");
    if (q.input_bits != 0 && (q.input_bits != 8 || q.input_type != "float")) {
        return not_served(q, std::to_string(q.input_bits) + "-bit " + q.input_type + " activations are not served");
    }
    CheckpointQuantization c;
    c.scale_suffix = "weight_scale";
    if (q.strategy == "channel") {
        c.layout = ScaleLayout::kPerChannel;
    } else if (q.strategy == "tensor") {
        c.layout = ScaleLayout::kPerTensor;
    } else if (q.strategy == "block" && q.weight_block_size.size() == 2 && q.weight_block_size[0] > 0 &&
               q.weight_block_size[1] > 0) {
        c.layout = ScaleLayout::kBlock;
        c.block_rows = q.weight_block_size[0], c.block_cols = q.weight_block_size[1];
    } else {
        return not_served(q, "weight scale strategy '" + q.strategy + "' is not served yet");
    }
    return std::optional<CheckpointQuantization>(c);
}

}  // namespace

std::string CheckpointQuantization::describe() const {
    LinearWeight w;
    w.format = format, w.scale_layout = layout, w.block_rows = block_rows, w.block_cols = block_cols;
    return w.describe();
}

Result<std::optional<CheckpointQuantization>> checkpoint_quantization(const QuantizationSpec& q) {
    if (!q.quantized()) return std::optional<CheckpointQuantization>();
    if (q.method == "fp8") return fp8(q);
    if (q.method == "compressed-tensors") return compressed_tensors(q);
    return not_served(q, "quant_method '" + q.method + "' is not served yet");
}

Result<QuantizationPlan> plan_quantization(const QuantizationSpec& q, std::string_view requested) {
    QuantizationPlan plan;
    if (q.quantized()) {
        if (!requested.empty() && requested != q.method) {
            return Status::error("--quantization " + std::string(requested) +
                                 " does not match the checkpoint's quantization_config (" + q.describe() +
                                 "); leave it out or pass --quantization " + q.method);
        }
        PAGODA_ASSIGN_OR_RETURN(plan.stored, checkpoint_quantization(q));
        return plan;
    }
    if (requested.empty()) return plan;
    if (requested != "fp8") {
        return Status::error("--quantization " + std::string(requested) +
                             ": the checkpoint is not quantized (config.json has no quantization_config), and only fp8 "
                             "quantizes an unquantized checkpoint at load");
    }
    plan.fp8_at_load = true;
    return plan;
}

std::string scale_name(const std::string& weight_name, const CheckpointQuantization& q) {
    constexpr std::string_view kWeight = "weight";
    std::string module = weight_name;
    if (module.size() >= kWeight.size() && module.compare(module.size() - kWeight.size(), kWeight.size(), kWeight) == 0)
        module.resize(module.size() - kWeight.size());
    else
        module += ".";
    return module + q.scale_suffix;
}

}  // namespace pagoda::model
