// The linear of weights stored quantized (fp8, int4) on the CPU: dequantise a chunk of weight rows to f32, multiply it
// with the f32 GEMM/GEMV, next chunk. One loop for every quantized format, so each format only says how a row reads.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "common/check.h"
#include "kernels/cpu/internal.h"

namespace pagoda::kernels::cpu {

namespace {
// Weight rows per chunk: enough for the GEMM to reuse each x row, little enough to stay a few MiB of scratch.
constexpr int64_t kChunkBytes = int64_t{8} << 20;
}  // namespace

void linear_dequantized(const LinearArgs& a,
                        const std::function<void(int64_t n0, int64_t n1, float* out)>& dequantize) {
    PAGODA_CHECK(a.x && a.y && a.K > 0);
    if (a.T == 0 || a.N == 0) return;
    thread_local std::vector<float> scratch;
    const int64_t chunk = std::clamp<int64_t>(kChunkBytes / (a.K * 4), 1, a.N);
    if (scratch.size() < static_cast<size_t>(chunk * a.K)) scratch.resize(static_cast<size_t>(chunk * a.K));
    const size_t bias_elem = a.bias ? dtype_size(a.bias_dtype) : 0;
    for (int64_t n0 = 0; n0 < a.N; n0 += chunk) {
        const int64_t n1 = std::min(a.N, n0 + chunk);
        dequantize(n0, n1, scratch.data());
        LinearArgs l;
        l.x = a.x, l.x_stride = a.x_stride;
        l.w = scratch.data(), l.w_dtype = DType::F32, l.w_stride = a.K;
        l.bias = a.bias ? static_cast<const std::byte*>(a.bias) + n0 * bias_elem : nullptr;
        l.bias_dtype = a.bias_dtype;
        l.y = a.y + n0, l.y_stride = a.y_stride;
        l.T = a.T, l.N = n1 - n0, l.K = a.K;
        launch_linear(l);
    }
}

}  // namespace pagoda::kernels::cpu
