// WeightLoader's int4 weights: an AWQ, GPTQ or compressed-tensors module's packed tensors checked against the shape
// the model declares and repacked (model/int4_repack.h) into owned buffers in LinearWeight's int4 layout.
#include <cstring>

#include "model/int4_repack.h"
#include "model/weights.h"

namespace pagoda::model {

bool WeightLoader::stored_int4(const std::string& name) const {
    return quantization_ != nullptr && quantization_->format == WeightFormat::kInt4 &&
           has(packed_name(name, *quantization_));
}

Result<std::vector<int32_t>> WeightLoader::words(const std::string& name, const Shape& shape) {
    PAGODA_ASSIGN_OR_RETURN(const TensorView* t, find_shaped(name, shape));
    if (t->dtype != StorageDType::kI32 && t->dtype != StorageDType::kU32) {
        return Status::error("tensor '" + name + "': expected packed int4 words (I32), found " +
                             std::string(storage_dtype_name(t->dtype)));
    }
    std::vector<int32_t> out(static_cast<size_t>(shape.numel()));
    std::memcpy(out.data(), t->data, out.size() * sizeof(int32_t));  // the mapping need not be 4-byte aligned
    return out;
}

Result<std::vector<float>> WeightLoader::floats(const std::string& name, const Shape& shape) {
    PAGODA_ASSIGN_OR_RETURN(const TensorView* t, lookup(name, shape));
    std::vector<float> out(static_cast<size_t>(shape.numel()));
    for (size_t i = 0; i < out.size(); ++i) {
        if (t->dtype == StorageDType::kF32) {
            std::memcpy(&out[i], t->data + 4 * i, 4);
        } else {
            uint16_t bits;
            std::memcpy(&bits, t->data + 2 * i, 2);
            out[i] = t->dtype == StorageDType::kBF16 ? bf16_to_f32(bits) : f16_to_f32(bits);
        }
    }
    return out;
}

Result<LinearWeight> WeightLoader::int4_linear(const std::string& name, const Shape& shape) {
    const CheckpointQuantization& q = *quantization_;
    const std::string m = module_prefix(name);
    if (shape.rank() != 2) {
        return Status::error("tensor '" + name + "': int4 weights of shape " + shape.to_string() +
                             " (stacked experts) are not served yet");
    }
    const int64_t N = shape[0], K = shape[1], group = q.group_size > 0 ? q.group_size : K, G = K / group;
    if (N % 8 != 0 || K % 8 != 0 || K % group != 0 || group % 2 != 0) {
        return Status::error("tensor '" + name + "' " + shape.to_string() + " (" + q.describe() +
                             "): int4 weights need both dimensions multiples of 8 and the group size dividing the "
                             "input features");
    }
    Int4Layout out;
    out.N = N, out.K = K, out.group = group;
    LinearWeight w = LinearWeight::int4(allocate(DType::U8, Shape{N, K / 2}), allocate(DType::F32, Shape{N, G}),
                                        q.zero_points ? allocate(DType::F32, Shape{N, G}) : Tensor(), group);
    out.data = static_cast<uint8_t*>(w.data.data());
    out.scales = w.scales.data_as<float>();
    out.zeros = w.zeros.defined() ? w.zeros.data_as<float>() : nullptr;
    // The formats dequantise in their scales' dtype (linear_weight.h: dequant_dtype).
    const TensorView* stored_scales =
        checkpoint_.find(m + (q.packing == Int4Packing::kPackQuantized ? "weight_scale" : "scales"));
    DType scale_dtype = DType::F32;
    if (stored_scales != nullptr && to_tensor_dtype(stored_scales->dtype, scale_dtype)) w.dequant_dtype = scale_dtype;
    switch (q.packing) {
        case Int4Packing::kAwqGemm: {
            PAGODA_ASSIGN_OR_RETURN(auto qweight, words(m + "qweight", Shape{K, N / 8}));
            PAGODA_ASSIGN_OR_RETURN(auto qzeros, words(m + "qzeros", Shape{G, N / 8}));
            PAGODA_ASSIGN_OR_RETURN(auto scales, floats(m + "scales", Shape{G, N}));
            repack_awq_gemm(qweight, qzeros, scales, out);
            break;
        }
        case Int4Packing::kGptq: {
            PAGODA_ASSIGN_OR_RETURN(auto qweight, words(m + "qweight", Shape{K / 8, N}));
            PAGODA_ASSIGN_OR_RETURN(auto qzeros, words(m + "qzeros", Shape{G, N / 8}));
            PAGODA_ASSIGN_OR_RETURN(auto scales, floats(m + "scales", Shape{G, N}));
            if (has(m + "g_idx")) {
                // desc_act false writes the trivial g_idx (input k in group k / group); another one permutes the
                // inputs' groups (act-order), which the layout cannot hold.
                PAGODA_ASSIGN_OR_RETURN(auto g_idx, words(m + "g_idx", Shape{K}));
                for (int64_t k = 0; k < K; ++k) {
                    if (g_idx[static_cast<size_t>(k)] != k / group) {
                        return Status::error("tensor '" + m + "g_idx': input " + std::to_string(k) + " is in group " +
                                             std::to_string(g_idx[static_cast<size_t>(k)]) +
                                             ", not in group k / group_size: act-order GPTQ is not served yet");
                    }
                }
            }
            repack_gptq(qweight, qzeros, scales, q.zero_offset, out);
            break;
        }
        case Int4Packing::kPackQuantized: {
            if (has(m + "weight_shape")) {
                PAGODA_ASSIGN_OR_RETURN(const TensorView* t, find_shaped(m + "weight_shape", Shape{2}));
                int64_t stored[2] = {0, 0};
                if (t->dtype == StorageDType::kI64) std::memcpy(stored, t->data, sizeof stored);
                if (stored[0] != N || stored[1] != K) {
                    return Status::error("tensor '" + m + "weight_shape' does not hold [" + std::to_string(N) + ", " +
                                         std::to_string(K) + "] (I64), the shape the model declares for " + name);
                }
            }
            PAGODA_ASSIGN_OR_RETURN(auto packed, words(m + "weight_packed", Shape{N, K / 8}));
            PAGODA_ASSIGN_OR_RETURN(auto scales, floats(m + "weight_scale", Shape{N, G}));
            repack_pack_quantized(packed, scales, out);
            break;
        }
        case Int4Packing::kNone:
            return Status::error("tensor '" + name + "': not an int4 checkpoint");
    }
    return w;
}

}  // namespace pagoda::model
