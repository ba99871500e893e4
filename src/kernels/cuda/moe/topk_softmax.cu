// The MoE router: softmax and top-k per token, one warp per token (E is at most a thousand: a block per token would
// idle), as topk_row.cuh computes it.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/moe/moe.h"
#include "kernels/cuda/moe/topk_row.cuh"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kWarps = 4;

__global__ void __launch_bounds__(kWarps * 32) topk_softmax_kernel(MoeTopkSoftmaxArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    extern __shared__ float probs[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t t = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
    if (t >= a.T) return;
    const float* l = a.logits + t * a.logits_stride;
    topk_softmax_row([l](int e) { return l[e]; }, static_cast<int>(a.E), a.k, a.normalize, probs + warp * a.E,
                     a.weights + t * a.k, a.ids + t * a.k, lane);
}

}  // namespace

void launch_moe_topk_softmax(const MoeTopkSoftmaxArgs& a, cudaStream_t stream) {
    PAGODA_KERNEL_REQUIRE(a.E >= 1 && a.E <= kMoeMaxExperts && a.k >= 1 && a.k <= a.E,
                          "moe_topk_softmax: E or k out of range");
    if (a.T == 0) return;
    const unsigned blocks = static_cast<unsigned>((a.T + kWarps - 1) / kWarps);
    const size_t smem = static_cast<size_t>(kWarps * a.E) * sizeof(float);
    launch_kernel<topk_softmax_kernel>(blocks, kWarps * 32, smem, stream, a);
    PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::kernels::cuda
