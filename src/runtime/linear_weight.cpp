#include "runtime/linear_weight.h"

#include <algorithm>
#include <string>
#include <utility>

#include "common/check.h"

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
        case WeightFormat::kInt8:
            return "int8";
    }
    return "unknown";
}

int grouped_int_bits(WeightFormat format) {
    return format == WeightFormat::kInt4 ? 4 : format == WeightFormat::kInt8 ? 8 : 0;
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

LinearWeight LinearWeight::fp8(Tensor data, Tensor scales, ScaleLayout layout, int64_t block_rows, int64_t block_cols,
                               Tensor bias) {
    LinearWeight w;
    w.format = WeightFormat::kFp8E4M3;
    w.data = std::move(data);
    w.scales = std::move(scales);
    w.scale_layout = layout;
    if (layout == ScaleLayout::kBlock) w.block_rows = block_rows, w.block_cols = block_cols;
    w.bias = std::move(bias);
    return w;
}

LinearWeight LinearWeight::int4(Tensor data, Tensor scales, Tensor zeros, int64_t group_size, Tensor bias) {
    return grouped_int(4, std::move(data), std::move(scales), std::move(zeros), group_size, std::move(bias));
}

LinearWeight LinearWeight::grouped_int(int bits, Tensor data, Tensor scales, Tensor zeros, int64_t group_size,
                                       Tensor bias) {
    PAGODA_CHECK_MSG(bits == 4 || bits == 8, "grouped integer weights are 4- or 8-bit");
    LinearWeight w;
    w.format = bits == 8 ? WeightFormat::kInt8 : WeightFormat::kInt4;
    w.data = std::move(data);
    w.scales = std::move(scales);
    w.zeros = std::move(zeros);
    w.scale_layout = ScaleLayout::kGroup;
    w.group_size = group_size;
    w.bias = std::move(bias);
    return w;
}

namespace {
int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}
}  // namespace

ScaleBlocks LinearWeight::scale_blocks() const {
    const int64_t N = out_features(), K = in_features();
    switch (scale_layout) {
        case ScaleLayout::kPerTensor:
            return {std::max<int64_t>(N, 1), std::max<int64_t>(K, 1), 0};
        case ScaleLayout::kPerChannel:
            return {1, std::max<int64_t>(K, 1), 1};
        case ScaleLayout::kBlock:
            return {block_rows, block_cols, ceil_div(K, block_cols)};
        case ScaleLayout::kNone:
        case ScaleLayout::kGroup:
            break;
    }
    return {};
}

Shape LinearWeight::expected_scales_shape() const {
    const int64_t N = out_features(), K = in_features();
    Shape per_matrix;
    switch (scale_layout) {
        case ScaleLayout::kNone:
            return Shape();
        case ScaleLayout::kPerTensor:
            per_matrix = Shape{1};
            break;
        case ScaleLayout::kPerChannel:
            per_matrix = Shape{N};
            break;
        case ScaleLayout::kBlock:
            if (block_rows <= 0 || block_cols <= 0) return Shape();
            per_matrix = Shape{ceil_div(N, block_rows), ceil_div(K, block_cols)};
            break;
        case ScaleLayout::kGroup:
            if (group_size <= 0) return Shape();
            per_matrix = Shape{N, K / group_size};
            break;
    }
    if (data.rank() != 3) return per_matrix;
    // Stacked experts: one grid per expert.
    if (per_matrix.rank() == 1) return Shape{data.dim(0), per_matrix[0]};
    return Shape{data.dim(0), per_matrix[0], per_matrix[1]};
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
        case WeightFormat::kInt8:
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
            s += " (group " + std::to_string(group_size) + (zeros.defined() ? ", zero points" : ", symmetric") +
                 (input_perm.defined() ? ", act-order)" : ")");
            break;
    }
    if (input_quant_group != 0) {
        s += input_quant_group > 0 ? ", fp8 activations per " + std::to_string(input_quant_group) + " inputs"
                                   : std::string(", fp8 activations per token");
    }
    return s;
}

}  // namespace pagoda
