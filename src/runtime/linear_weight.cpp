#include "runtime/linear_weight.h"

#include <string>
#include <utility>

namespace pagoda {

std::string_view format_name(WeightFormat format) {
    switch (format) {
        case WeightFormat::kBf16:
            return "bf16";
        case WeightFormat::kF16:
            return "f16";
        case WeightFormat::kF32:
            return "f32";
        case WeightFormat::kFp8E4M3:
            return "fp8-e4m3";
        case WeightFormat::kInt4:
            return "int4";
    }
    return "unknown";
}

std::string_view scale_layout_name(ScaleLayout layout) {
    switch (layout) {
        case ScaleLayout::kNone:
            return "none";
        case ScaleLayout::kPerTensor:
            return "per-tensor";
        case ScaleLayout::kPerChannel:
            return "per-channel";
        case ScaleLayout::kBlock:
            return "block";
        case ScaleLayout::kGroup:
            return "group";
    }
    return "unknown";
}

LinearWeight LinearWeight::dense(Tensor data, Tensor bias) {
    LinearWeight w;
    switch (data.dtype()) {
        case DType::F16:
            w.format = WeightFormat::kF16;
            break;
        case DType::F32:
            w.format = WeightFormat::kF32;
            break;
        case DType::F8_E4M3:  // without scales: not a format any backend runs; refused by name there
            w.format = WeightFormat::kFp8E4M3;
            break;
        default:
            w.format = WeightFormat::kBf16;
            break;
    }
    w.data = std::move(data);
    w.bias = std::move(bias);
    return w;
}

DType LinearWeight::input_dtype() const {
    switch (format) {
        case WeightFormat::kF16:
            return DType::F16;
        case WeightFormat::kF32:
            return DType::F32;
        case WeightFormat::kBf16:
        case WeightFormat::kFp8E4M3:
        case WeightFormat::kInt4:
            return DType::BF16;
    }
    return DType::BF16;
}

std::string LinearWeight::describe() const {
    std::string s(format_name(format));
    switch (scale_layout) {
        case ScaleLayout::kNone:
            break;
        case ScaleLayout::kPerTensor:
            s += " (per-tensor scales)";
            break;
        case ScaleLayout::kPerChannel:
            s += " (per-channel scales)";
            break;
        case ScaleLayout::kBlock:
            s += " (" + std::to_string(block_rows) + "x" + std::to_string(block_cols) + " block scales)";
            break;
        case ScaleLayout::kGroup:
            s += " (group " + std::to_string(group_size) + (zeros.defined() ? ", zero points)" : ", symmetric)");
            break;
    }
    return s;
}

}  // namespace pagoda
