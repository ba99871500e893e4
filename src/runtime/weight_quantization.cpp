#include "runtime/weight_quantization.h"

#include "common/check.h"
#include "kernels/cpu/cpu_kernels.h"

namespace pagoda {

LinearWeight quantize_fp8_per_channel(const LinearWeight& dense, const Tensor& data, const Tensor& scales) {
    const Tensor& w = dense.data;
    PAGODA_CHECK_MSG(dense.is_dense() && w.is_host() && w.rank() == 2 && w.stride(1) == 1,
                     "quantize_fp8_per_channel takes a dense host [N, K] weight");
    const int64_t N = w.dim(0), K = w.dim(1);
    PAGODA_CHECK(data.dtype() == DType::F8_E4M3 && data.is_contiguous() && data.shape() == w.shape());
    PAGODA_CHECK(scales.dtype() == DType::F32 && scales.is_contiguous() && scales.shape() == (Shape{N}));
    kernels::cpu::QuantizeFp8RowsArgs a;
    a.w = w.data(), a.w_dtype = w.dtype(), a.w_stride = w.stride(0), a.N = N, a.K = K;
    a.q = static_cast<uint8_t*>(data.data()), a.scales = scales.data_as<float>();
    kernels::cpu::launch_quantize_fp8_rows(a);
    return LinearWeight::fp8(data, scales, ScaleLayout::kPerChannel, 0, 0, dense.bias);
}

}  // namespace pagoda
