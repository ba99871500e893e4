// LinearWeight: the weight of one linear layer as Ops::linear takes it: the data, an optional bias, and the format
// that decides which kernel runs it (per layer, as TurboMind's LinearWeight and vLLM's per-layer QuantizeMethod do).
// Dense formats (bf16/f16/f32), fp8-e4m3, int4 and int8 (weight-only: dequantised by the kernel). AWQ, GPTQ and
// compressed-tensors checkpoints are repacked into the one int4 (GPTQ 8-bit: int8) layout below at load
// (model/int4_repack.h), so every kernel reads one layout. Knows nothing about models.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tensor/tensor.h"

namespace pagoda {

enum class WeightFormat : uint8_t {
    kBf16,     // data BF16 [N, K]
    kF16,      // data F16 [N, K]
    kF32,      // data F32 [N, K]
    kFp8E4M3,  // data F8_E4M3 [N, K]; scales F32 as `scale_layout` says; value = q · scale (the scale is a multiplier,
               // what Qwen's checkpoints call weight_scale_inv and compressed-tensors weight_scale)
    kInt4,     // data U8 [N, K/2], two unsigned values (0..15) per byte, the element of even k in the low nibble;
               // scales and (asymmetric) zero points per group of `group_size` inputs: scales F32 [N, K/group_size],
               // zeros F32 of the same shape (whole numbers, already unpacked) or undefined (symmetric: zero 8);
               // value = (q - zero) · scale, rounded to `dequant_dtype`. When that is F16 or BF16 the scales are
               // values of it (the checkpoint's stored scales): the CUDA GEMV computes in it (gemm/int4_dequant.cuh)
    kInt8,     // data U8 [N, K], one unsigned value (0..255) per byte; scales, zeros and dequant_dtype as kInt4
               // (symmetric: zero 128). The same group layout with one value a byte: GPTQ 8-bit checkpoints
};

// Bits of one stored value of a grouped integer format (kInt4: 4, kInt8: 8), 0 for the others.
int grouped_int_bits(WeightFormat format);

// How the scales of a quantized weight cover it.
enum class ScaleLayout : uint8_t {
    kNone,        // dense formats
    kPerTensor,   // scales [1]
    kPerChannel,  // scales [N]: one per output feature
    kBlock,       // scales [ceil(N / block_rows), ceil(K / block_cols)] (fp8 "weight_block_size": 128x128)
    kGroup,       // scales [N, K / group_size]: one per output feature and group of inputs (int4)
};

std::string_view format_name(WeightFormat format);  // "bf16", "fp8-e4m3", "int4"
std::string_view scale_layout_name(ScaleLayout layout);

// The LoRA adapters of one projection (one low-rank A·B pair per loaded adapter). Declared only: multi-LoRA is not
// built yet; its loader will define this type and fill LinearWeight::lora.
struct LoraAdapterSet;

// Where the scale of weight (n, k) of an fp8 weight lies, whatever its layout: scales[(n / rows) * stride + k / cols].
// Per tensor: one block covering everything (stride 0); per channel: blocks of one row; block: the 128x128 grid. One
// formula lets every kernel take every layout.
struct ScaleBlocks {
    int64_t rows = 0, cols = 0, stride = 0;
};

struct LinearWeight {
    // [N, K] (out_features, in_features), last dim contiguous. Stacked experts: [E, N, K], one [N, K] per expert.
    // For int4 the last dim holds K/2 bytes.
    Tensor data;
    Tensor bias;  // [N] (any float dtype), or undefined
    WeightFormat format = WeightFormat::kBf16;

    // Quantized formats only.
    ScaleLayout scale_layout = ScaleLayout::kNone;
    Tensor scales;
    Tensor zeros;                            // int4 with zero points; undefined when symmetric
    int64_t block_rows = 0, block_cols = 0;  // kBlock: the block of weights one scale covers (128 x 128)
    int64_t group_size = 0;                  // kGroup: inputs per scale (128)
    // int4: the type each dequantised weight (q - zero) · scale is rounded to, as the format's own dequantisation
    // computes it in the dtype of its stored scales (F16 for AWQ and GPTQ, the model's dtype for compressed-tensors);
    // F32: not rounded.
    DType dequant_dtype = DType::F32;
    // int4/int8 of a GPTQ act-order checkpoint: I32 [K] on the weight's device, or undefined. The layout's input k
    // is the layer's input input_perm[k] (the inputs sorted by their group, so that each group is contiguous), and
    // y = data · x[:, input_perm]: the backends gather x's columns before the kernel. Kept beside the weight so that
    // the 4-bit layout and its kernels stay as they are.
    Tensor input_perm;

    // fp8 only: dynamic activation quantization (W8A8), as an fp8 checkpoint whose activations are quantized on the fly
    // is computed (vLLM on Hopper; model::LoadOptions::fp8_activations). 0: none, the input is used as it is
    // (weight-only). > 0: each token's inputs in groups of this many (Qwen's FP8 checkpoints: 128, the weight blocks'
    // width); -1: one group per token. Each group is rounded to e4m3 with the scale max(amax / 448, 1e-12) (the
    // weights' rule) before the product: y = qdq(x) · wᵀ, on every backend and for every token count
    // (kernels/cpu/cpu_kernels.h: QuantizeFp8ActivationsArgs says it exactly).
    int64_t input_quant_group = 0;

    // Adapters whose low-rank deltas a request may add to this projection's output; null (always, for now) when
    // there are none. A pointer into a per-layer set owned beside the model, so loading an adapter changes no weight
    // and the base weights stay shared by every adapter.
    const LoraAdapterSet* lora = nullptr;

    // A dense weight of data's dtype (BF16, F16 or F32; another dtype gives a weight no backend accepts).
    static LinearWeight dense(Tensor data, Tensor bias = Tensor());

    // An fp8 weight: data F8_E4M3 [N, K] and F32 scales of `layout` ([1], [N], or [ceil(N/block_rows),
    // ceil(K/block_cols)] for kBlock).
    static LinearWeight fp8(Tensor data, Tensor scales, ScaleLayout layout, int64_t block_rows = 0,
                            int64_t block_cols = 0, Tensor bias = Tensor());

    // An int4 weight (kInt4 above): data U8 [N, K/2], scales F32 [N, K/group_size], zeros like scales or undefined.
    static LinearWeight int4(Tensor data, Tensor scales, Tensor zeros, int64_t group_size, Tensor bias = Tensor());
    // A grouped integer weight of `bits` 4 (kInt4, as int4()) or 8 (kInt8: data U8 [N, K]).
    static LinearWeight grouped_int(int bits, Tensor data, Tensor scales, Tensor zeros, int64_t group_size,
                                    Tensor bias = Tensor());

    bool defined() const { return data.defined(); }
    bool is_dense() const {
        return format == WeightFormat::kBf16 || format == WeightFormat::kF16 || format == WeightFormat::kF32;
    }
    // int4 or int8: group scales and zero points, the kernels' one grouped layout at 4 or 8 bits a value.
    bool is_grouped_int() const { return grouped_int_bits(format) != 0; }
    // Output and input features of one [N, K] matrix (of each expert, when stacked).
    int64_t out_features() const { return data.dim(-2); }
    int64_t in_features() const { return format == WeightFormat::kInt4 ? 2 * data.dim(-1) : data.dim(-1); }
    // What the GEMM of this format wants as its input: the weights' own type for dense 16-bit weights (activations
    // are rounded to it), F32 for F32 weights, BF16 for weight-only fp8, int4 and int8 (upcast in the kernel).
    DType input_dtype() const;
    // The scale grid of a weight with scales (ScaleBlocks), for one [N, K] matrix.
    ScaleBlocks scale_blocks() const;
    // The shape `scales` must have for this weight's layout and data (an empty Shape for dense formats).
    Shape expected_scales_shape() const;
    // The format with its variant, for messages: "bf16", "fp8-e4m3 (128x128 block scales)", "int4 (group 128,
    // zero points)", "int4 (group 128, symmetric, act-order)".
    std::string describe() const;
};

}  // namespace pagoda
