// WeightLoader's int4 weights (and GPTQ int8): an AWQ, GPTQ or compressed-tensors module's packed tensors checked
// against the shape the model declares and repacked (model/int4_repack.h) into owned buffers in LinearWeight's int4
// (int8) layout.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

#include "common/check.h"
#include "model/int4_repack.h"
#include "model/weights.h"

namespace pagoda::model {

bool WeightLoader::stored_int4(const std::string& name) const {
    return int4_checkpoint() && has(packed_name(name, *quantization_));
}

namespace {

// A packed tensor's int32 words (the mapping need not be 4-byte aligned).
std::vector<int32_t> words(const TensorView& t) {
    size_t n = 1;
    for (int64_t d : t.shape)
        n *= static_cast<size_t>(d);
    std::vector<int32_t> out(n);
    std::memcpy(out.data(), t.data, n * sizeof(int32_t));
    return out;
}

// The same read in place where the mapping is 4-byte aligned (safetensors' writers align each tensor to its element
// size), else copied into `copy`: the repacking then reads the mapping itself, its page faults spread over the
// threads that repack (a copy made first took them on one thread, ~1.2 GB/s).
std::span<const int32_t> mapped_words(const TensorView& t, std::vector<int32_t>& copy) {
    if (reinterpret_cast<uintptr_t>(t.data) % alignof(int32_t) == 0)
        return {reinterpret_cast<const int32_t*>(t.data), t.nbytes / sizeof(int32_t)};
    copy = words(t);
    return copy;
}

// A float tensor (F32, BF16 or F16: lookup() checked) as f32 values, not kept (scales before their repacking).
std::vector<float> floats(const TensorView& t) {
    size_t n = 1;
    for (int64_t d : t.shape)
        n *= static_cast<size_t>(d);
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i) {
        if (t.dtype == StorageDType::kF32) {
            std::memcpy(&out[i], t.data + 4 * i, 4);
        } else {
            uint16_t bits;
            std::memcpy(&bits, t.data + 2 * i, 2);
            out[i] = t.dtype == StorageDType::kBF16 ? bf16_to_f32(bits) : f16_to_f32(bits);
        }
    }
    return out;
}

// Whether a stored zero-point tensor says only what a symmetric module means: every zero 0, packed (pack_to_int32
// adds 2^(bits-1) to each value: 0x88888888 at 4 bits, 0x80808080 at 8) or as plain integers.
bool symmetric_zeros(const TensorView& z) {
    const size_t bytes = z.nbytes;
    if (z.dtype == StorageDType::kI32 || z.dtype == StorageDType::kU32) {
        for (size_t i = 0; i + 4 <= bytes; i += 4) {
            uint32_t word;
            std::memcpy(&word, z.data + i, 4);
            if (word != 0x88888888u && word != 0x80808080u && word != 0) return false;
        }
        return true;
    }
    return std::all_of(z.data, z.data + bytes, [](std::byte b) { return b == std::byte{0}; });
}

}  // namespace

Result<const TensorView*> WeightLoader::packed_words(const std::string& name, const Shape& shape) {
    PAGODA_ASSIGN_OR_RETURN(const TensorView* t, find_shaped(name, shape));
    if (t->dtype != StorageDType::kI32 && t->dtype != StorageDType::kU32) {
        return Status::error("tensor '" + name + "': expected packed int4 words (I32), found " +
                             std::string(storage_dtype_name(t->dtype)));
    }
    return t;
}

Result<WeightLoader::Int4Module> WeightLoader::int4_module(const std::string& name, const Shape& shape) {
    PAGODA_ASSIGN_OR_RETURN(const CheckpointQuantization q, int4_quantization(name));
    return int4_module(name, shape, q);
}

Result<WeightLoader::Int4Module> WeightLoader::int4_module(const std::string& name, const Shape& shape,
                                                           const CheckpointQuantization& q) {
    const std::string m = module_prefix(name);
    if (shape.rank() != 2) {
        return Status::error("tensor '" + name + "': int4 weights of shape " + shape.to_string() +
                             " (fused experts) are not served yet");
    }
    Int4Module out;
    out.name = name;
    out.bits = q.bits();
    out.zero_points = q.zero_points;
    const int64_t per_word = 32 / out.bits;  // values an int32 packs
    const int64_t N = shape[0], K = shape[1], group = q.group_size > 0 ? q.group_size : K, G = K / group;
    if (N % 8 != 0 || K % 8 != 0 || K % group != 0 || group % 2 != 0) {
        return Status::error("tensor '" + name + "' " + shape.to_string() + " (" + q.describe() +
                             "): int4 weights need both dimensions multiples of 8 and the group size dividing the "
                             "input features");
    }
    out.N = N, out.K = K, out.group = group;
    switch (q.packing) {
        case Int4Packing::kAwqGemm: {
            PAGODA_ASSIGN_OR_RETURN(out.qweight, packed_words(m + "qweight", Shape{K, N / 8}));
            PAGODA_ASSIGN_OR_RETURN(out.qzeros, packed_words(m + "qzeros", Shape{G, N / 8}));
            PAGODA_ASSIGN_OR_RETURN(out.scales, lookup(m + "scales", Shape{G, N}));
            break;
        }
        case Int4Packing::kGptq: {
            PAGODA_ASSIGN_OR_RETURN(out.qweight, packed_words(m + "qweight", Shape{K / per_word, N}));
            PAGODA_ASSIGN_OR_RETURN(out.qzeros, packed_words(m + "qzeros", Shape{G, N / per_word}));
            PAGODA_ASSIGN_OR_RETURN(out.scales, lookup(m + "scales", Shape{G, N}));
            if (has(m + "g_idx")) {
                // desc_act false writes the trivial g_idx (input k in group k / group). Another one (act-order, which
                // the g_idx itself tells whatever desc_act says) groups the inputs in the order GPTQ processed
                // them: the repack sorts the inputs by group and the layer gathers its input in that order.
                PAGODA_ASSIGN_OR_RETURN(const TensorView* t, packed_words(m + "g_idx", Shape{K}));
                const std::vector<int32_t> g_idx = words(*t);
                bool trivial = true;
                for (int64_t k = 0; k < K && trivial; ++k)
                    trivial = g_idx[static_cast<size_t>(k)] == k / group;
                if (!trivial) {
                    std::string why;
                    out.input_perm = act_order_permutation(g_idx, group, G, why);
                    if (out.input_perm.empty()) {
                        return Status::error("tensor '" + m + "g_idx' (act-order GPTQ, " + q.describe() + "): " + why +
                                             "; such a checkpoint is not served");
                    }
                }
            }
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
            PAGODA_ASSIGN_OR_RETURN(out.qweight, packed_words(m + "weight_packed", Shape{N, K / per_word}));
            PAGODA_ASSIGN_OR_RETURN(out.scales, lookup(m + "weight_scale", Shape{N, G}));
            if (q.zero_points) {
                PAGODA_ASSIGN_OR_RETURN(out.qzeros, packed_words(m + "weight_zero_point", Shape{N / per_word, G}));
            } else if (const TensorView* z = checkpoint_.find(m + "weight_zero_point"); z && !symmetric_zeros(*z)) {
                // Settings of no zero points for a module that stores some: its config group is not the one the
                // checkpoint was written with (reading it so would drop the zero points).
                return Status::error("tensor '" + m + "weight_zero_point' holds zero points, but the quantization " +
                                     "config gives " + name + " " + q.describe());
            }
            break;
        }
        case Int4Packing::kNone:
            return Status::error("tensor '" + name + "': not an int4 checkpoint");
    }
    // The formats dequantise in their scales' dtype (linear_weight.h: dequant_dtype).
    to_tensor_dtype(out.scales->dtype, out.dequant_dtype);
    return out;
}

void WeightLoader::repack_int4(const Int4Module& m, const Int4Layout& out, unsigned threads) const {
    PAGODA_CHECK(out.N == m.N && out.K == m.K && out.group == m.group && out.bits == m.bits);
    std::vector<int32_t> copy;
    switch (quantization_->packing) {
        case Int4Packing::kAwqGemm:
            repack_awq_gemm(mapped_words(*m.qweight, copy), words(*m.qzeros), floats(*m.scales), out, threads);
            break;
        case Int4Packing::kGptq:
            repack_gptq(mapped_words(*m.qweight, copy), words(*m.qzeros), floats(*m.scales), quantization_->zero_offset,
                        out, m.input_perm, threads);
            break;
        case Int4Packing::kPackQuantized:
            repack_pack_quantized(words(*m.qweight), floats(*m.scales),
                                  m.qzeros ? words(*m.qzeros) : std::vector<int32_t>(), out);
            break;
        case Int4Packing::kNone:
            PAGODA_CHECK_MSG(false, "repack_int4 of a checkpoint that is not int4");
    }
}

Result<LinearWeight> WeightLoader::int4_linear(const std::string& name, const Shape& shape) {
    PAGODA_ASSIGN_OR_RETURN(const Int4Module m, int4_module(name, shape));
    const int64_t G = m.K / m.group;
    LinearWeight w = LinearWeight::grouped_int(m.bits, allocate(DType::U8, Shape{m.N, m.K * m.bits / 8}),
                                               allocate(DType::F32, Shape{m.N, G}),
                                               m.zero_points ? allocate(DType::F32, Shape{m.N, G}) : Tensor(), m.group);
    w.dequant_dtype = m.dequant_dtype;
    Int4Layout out;
    out.N = m.N, out.K = m.K, out.group = m.group, out.bits = m.bits;
    out.data = static_cast<uint8_t*>(w.data.data());
    out.scales = w.scales.data_as<float>();
    out.zeros = w.zeros.defined() ? w.zeros.data_as<float>() : nullptr;
    repack_int4(m, out, /*threads=*/0);  // one module at a time: its rows over every core
    if (!m.input_perm.empty()) {
        w.input_perm = allocate(DType::I32, Shape{m.K});
        std::memcpy(w.input_perm.data(), m.input_perm.data(), m.input_perm.size() * sizeof(int32_t));
    }
    return w;
}

}  // namespace pagoda::model
