// The types every CUDA launcher's args share: element types of weights and caches, and F32 activation views.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace pagoda::kernels::cuda {

// F8E4M3 only as a linear layer's weight (GemvArgs, dequantisation), always with its WeightScales.
enum class ElemType : uint8_t { F32, F16, BF16, F8E4M3 };

// The scales of an fp8 weight: weight (n, k) is q(n, k) · data[(n / rows) * stride + k / cols] (runtime's
// ScaleBlocks: one formula for per-tensor, per-channel and 128x128 block scales). data is null for dense weights.
struct WeightScales {
    const float* data = nullptr;
    int64_t rows = 1, cols = 1, stride = 0;
};

// A [T, H, D] (or [T, D] with H = 1) F32 view: element (t, h, d) at data[t*stride_t + h*stride_h + d].
struct Rows {
    float* data = nullptr;
    int64_t stride_t = 0;
    int64_t stride_h = 0;
};

}  // namespace pagoda::kernels::cuda
