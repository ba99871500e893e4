#include "runtime/weight_quantization.h"

#include <algorithm>

#include "common/check.h"
#include "kernels/cpu/cpu_kernels.h"

namespace pagoda {

LinearWeight quantize_fp8_per_channel(const LinearWeight& dense, const Tensor& data, const Tensor& scales) {
    const Tensor& w = dense.data;
    // A stack of experts [E, N, K] is quantized as the [E*N, K] matrix of its rows.
    const bool stack = w.rank() == 3;
    PAGODA_CHECK_MSG(dense.is_dense() && w.is_host() && (w.rank() == 2 || (stack && w.is_contiguous())) &&
                         w.stride(stack ? 2 : 1) == 1,
                     "quantize_fp8_per_channel takes a dense host [N, K] weight or a contiguous [E, N, K] stack");
    const int64_t K = w.dim(stack ? 2 : 1), rows = w.numel() / std::max<int64_t>(K, 1);
    PAGODA_CHECK(data.dtype() == DType::F8_E4M3 && data.is_contiguous() && data.shape() == w.shape());
    PAGODA_CHECK(scales.dtype() == DType::F32 && scales.is_contiguous() && scales.numel() == rows &&
                 scales.rank() == (stack ? 2 : 1));
    kernels::cpu::QuantizeFp8RowsArgs a;
    a.w = w.data(), a.w_dtype = w.dtype(), a.w_stride = w.stride(stack ? 1 : 0), a.N = rows, a.K = K;
    a.q = static_cast<uint8_t*>(data.data()), a.scales = scales.data_as<float>();
    kernels::cpu::launch_quantize_fp8_rows(a);
    return LinearWeight::fp8(data, scales, ScaleLayout::kPerChannel, 0, 0, dense.bias);
}

}  // namespace pagoda
