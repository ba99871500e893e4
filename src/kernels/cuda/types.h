// The types every CUDA launcher's args share: element types of weights and caches, and F32 activation views.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace pagoda::kernels::cuda {

enum class ElemType : uint8_t { F32, F16, BF16 };

// A [T, H, D] (or [T, D] with H = 1) F32 view: element (t, h, d) at data[t*stride_t + h*stride_h + d].
struct Rows {
    float* data = nullptr;
    int64_t stride_t = 0;
    int64_t stride_h = 0;
};

}  // namespace pagoda::kernels::cuda
