// Dynamic fp8 activation quantization for fp8 weights whose checkpoint quantizes activations on the fly (W8A8:
// runtime/linear_weight.h, input_quant_group): each token's inputs in groups, each group rounded to e4m3 with the
// scale max(amax / 448, 1e-12), exactly as the CPU's launch_quantize_fp8_activations (kernels/cpu/cpu_kernels.h)
// rounds them: the same f32 operations (IEEE division, round to nearest even, saturating at ±448).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pagoda::kernels::cuda {

struct QuantizeFp8ActivationsArgs {
    const float* x = nullptr;  // [T, K], row stride x_stride
    int64_t x_stride = 0;
    int64_t T = 0, K = 0;
    int64_t group = 0;  // inputs a group (the last may be shorter); <= 0: the whole row
    // Either or both outputs:
    float* qdq = nullptr;     // [T, K] contiguous: e4m3(x / scale) · scale, the values the product takes
    uint8_t* q = nullptr;     // [T, K] contiguous e4m3 bytes, for an fp8 GEMM ...
    float* scales = nullptr;  // ... and their scales, scale of (token t, group g) at scales[g * scale_ld + t]
    int64_t scale_ld = 0;     // >= padded_T
    // With q: rows [T, padded_T) of q and scales are written as zero inputs (bytes 0, scales 1e-12), for a GEMM whose
    // token count must be a multiple of 4. 0: T.
    int64_t padded_T = 0;
};
void launch_quantize_fp8_activations(const QuantizeFp8ActivationsArgs& a, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
