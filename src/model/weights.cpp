#include "model/weights.h"

#include <cstring>

#include "common/check.h"
#include "runtime/weight_quantization.h"

namespace pagoda::model {

bool to_tensor_dtype(StorageDType storage, DType& out, bool fp8) {
    switch (storage) {
        case StorageDType::kF8_E4M3:
            out = DType::F8_E4M3;
            return fp8;
        case StorageDType::kF32:
            out = DType::F32;
            return true;
        case StorageDType::kBF16:
            out = DType::BF16;
            return true;
        case StorageDType::kF16:
            out = DType::F16;
            return true;
        default:
            return false;
    }
}

std::string shape_string(const Shape& shape) {
    return shape.to_string();
}

Result<std::vector<int64_t>> WeightLoader::shape_of(const std::string& name) const {
    const TensorView* t = checkpoint_.find(name);
    if (t == nullptr) return Status::error("missing tensor '" + name + "'");
    return t->shape;
}

Result<const TensorView*> WeightLoader::find_shaped(const std::string& name, const Shape& shape) {
    const TensorView* t = checkpoint_.find(name);
    if (t == nullptr) {
        return Status::error("missing tensor '" + name + "' (expected shape " + shape.to_string() + ")");
    }
    Shape found{std::span<const int64_t>(t->shape)};
    if (!(found == shape)) {
        return Status::error("tensor '" + name + "': expected shape " + shape.to_string() + ", found " +
                             found.to_string());
    }
    used_.insert(name);
    return t;
}

Result<const TensorView*> WeightLoader::lookup(const std::string& name, const Shape& shape, bool fp8) {
    PAGODA_ASSIGN_OR_RETURN(const TensorView* t, find_shaped(name, shape));
    DType dtype = DType::F32;
    if (!to_tensor_dtype(t->dtype, dtype, fp8)) {
        return Status::error("tensor '" + name + "': expected dtype BF16, F16 or F32" + (fp8 ? " (or F8_E4M3)" : "") +
                             ", found " + std::string(storage_dtype_name(t->dtype)));
    }
    return t;
}

Result<Tensor> WeightLoader::view(const std::string& name, const Shape& shape) {
    PAGODA_ASSIGN_OR_RETURN(const TensorView* t, lookup(name, shape));
    DType dtype = DType::F32;
    to_tensor_dtype(t->dtype, dtype);
    // Weights are read-only; the mapping is private and never written through this view.
    return Tensor(const_cast<std::byte*>(t->data), dtype, shape);
}

Tensor WeightLoader::allocate(DType dtype, const Shape& shape) {
    Buffer buffer = Buffer::host(static_cast<size_t>(shape.numel()) * dtype_size(dtype));
    Tensor t = buffer.view(dtype, shape);
    owned_.buffers.push_back(std::move(buffer));
    return t;
}

LinearWeight WeightLoader::quantize_fp8(const LinearWeight& dense) {
    const Tensor data = allocate(DType::F8_E4M3, dense.data.shape());
    const Tensor scales = allocate(DType::F32, dense.data.rank() == 3 ? Shape{dense.data.dim(0), dense.out_features()}
                                                                      : Shape{dense.out_features()});
    LinearWeight quantized = quantize_fp8_per_channel(dense, data, scales);
    // A stack of experts the loader made (copied out of per-expert tensors) is needed no more: its memory goes now,
    // not with the model (a projection is a view of the mapping, which owns nothing here).
    std::erase_if(owned_.buffers, [&dense](const Buffer& b) {
        return b.data() == dense.data.data() && b.size() == dense.data.nbytes();
    });
    return quantized;
}

Result<LinearWeight> WeightLoader::linear(const std::string& name, const Shape& shape) {
    if (const TensorView* t = checkpoint_.find(name); t != nullptr && t->dtype == StorageDType::kF8_E4M3)
        return fp8_linear(name, shape);
    if (stored_int4(name)) return int4_linear(name, shape);
    if (!has(name)) {
        const std::string m = module_prefix(name);
        for (const char* packed : {"qweight", "weight_packed"}) {
            if (has(m + packed)) {
                return Status::error("tensor '" + name + "' is stored packed ('" + m + packed +
                                     "') but config.json's quantization_config (" +
                                     (quantization_ ? quantization_->describe() : std::string("none")) +
                                     ") does not say it is packed that way");
            }
        }
    }
    PAGODA_ASSIGN_OR_RETURN(Tensor data, view(name, shape));
    return LinearWeight::dense(std::move(data));
}

Result<LinearWeight> WeightLoader::fp8_linear(const std::string& name, const Shape& shape) {
    if (quantization_ == nullptr) {
        return Status::error(
            "tensor '" + name +
            "' is stored as F8_E4M3 but config.json has no quantization_config saying how it is scaled");
    }
    if (quantization_->format != WeightFormat::kFp8E4M3) {
        return Status::error("tensor '" + name + "' is stored as F8_E4M3 in a " + quantization_->describe() +
                             " checkpoint");
    }
    PAGODA_ASSIGN_OR_RETURN(const TensorView* data, lookup(name, shape, /*fp8=*/true));
    LinearWeight w;
    w.format = WeightFormat::kFp8E4M3;
    w.data = Tensor(const_cast<std::byte*>(data->data), DType::F8_E4M3, shape);  // read-only, as view()
    w.scale_layout = quantization_->layout;
    w.block_rows = quantization_->block_rows, w.block_cols = quantization_->block_cols;
    const std::string scales = scale_name(name, *quantization_);
    const TensorView* s = checkpoint_.find(scales);
    const Shape want = w.expected_scales_shape();
    if (s == nullptr) {
        return Status::error("tensor '" + name + "' is F8_E4M3 (" + w.describe() + ") but its scales '" + scales +
                             "' (shape " + want.to_string() + ") are missing");
    }
    // The stored scales may carry unit dimensions the layout does not (per-channel [N, 1], per-tensor [] or [1]).
    const Shape stored{std::span<const int64_t>(s->shape)};
    if (stored.numel() != want.numel() || (w.scale_layout == ScaleLayout::kBlock && !(stored == want))) {
        return Status::error("tensor '" + scales + "': expected shape " + want.to_string() + " for the scales of " +
                             name + " " + shape.to_string() + " (" + w.describe() + "), found " + stored.to_string());
    }
    PAGODA_ASSIGN_OR_RETURN(w.scales, f32(scales, stored, want));
    return w;
}

Result<Tensor> WeightLoader::f32(const std::string& name, const Shape& shape, const Shape& as) {
    PAGODA_ASSIGN_OR_RETURN(const TensorView* t, lookup(name, shape));
    Tensor out = allocate(DType::F32, as.rank() > 0 ? as : shape);
    float* dst = out.data_as<float>();
    const int64_t n = shape.numel();
    switch (t->dtype) {
        case StorageDType::kF32:
            std::memcpy(dst, t->data, static_cast<size_t>(n) * 4);
            break;
        case StorageDType::kBF16:
        case StorageDType::kF16:
            for (int64_t i = 0; i < n; ++i) {
                uint16_t bits;
                std::memcpy(&bits, t->data + 2 * i, 2);
                dst[i] = t->dtype == StorageDType::kBF16 ? bf16_to_f32(bits) : f16_to_f32(bits);
            }
            break;
        default:
            break;  // lookup() accepted only the three float types
    }
    return out;
}

Status WeightLoader::load(const WeightEntry& e) {
    if (e.optional && !has(e.name)) return ok_status();
    switch (e.source) {
        case WeightSource::kLinear: {
            PAGODA_ASSIGN_OR_RETURN(LinearWeight w, linear(e.name, e.shape));
            w.bias = std::move(e.linear->bias);
            *e.linear = std::move(w);
            return ok_status();
        }
        case WeightSource::kView: {
            PAGODA_ASSIGN_OR_RETURN(*e.tensor, view(e.name, e.shape));
            return ok_status();
        }
        case WeightSource::kF32: {
            // f32() takes the stored shape and the shape to return.
            const bool reshaped = e.stored_shape.rank() > 0;
            PAGODA_ASSIGN_OR_RETURN(*e.tensor,
                                    f32(e.name, reshaped ? e.stored_shape : e.shape, reshaped ? e.shape : Shape()));
            return ok_status();
        }
        case WeightSource::kUnpacked:
            PAGODA_CHECK_MSG(e.data().defined(), "an unpacked weight was not built before the walk");
            return ok_status();
    }
    return ok_status();
}

Status visit_all(std::span<const WeightEntry> entries, const WeightVisitor& visit) {
    for (const WeightEntry& e : entries)
        PAGODA_RETURN_IF_ERROR(visit(e));
    return ok_status();
}

}  // namespace pagoda::model
