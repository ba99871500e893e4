// The MoE router: softmax and top-k per token, one warp per token (E is at most a thousand: a block per token would
// idle). Written as the CPU kernel computes it (kernels/cpu/elementwise.cpp): max, exp, a sum in double, one fp32
// reciprocal, then k rounds of "largest remaining, lowest id on ties", so the ids match the CPU's exactly.
#include <climits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/moe/moe.h"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kWarps = 4;

__global__ void __launch_bounds__(kWarps * 32) topk_softmax_kernel(MoeTopkSoftmaxArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    // Lane l owns the experts e with e % 32 == l: no other lane reads its probabilities, so no syncs are needed.
    extern __shared__ float probs[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t t = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
    if (t >= a.T) return;
    const int E = static_cast<int>(a.E);
    float* p = probs + warp * E;
    const float* l = a.logits + t * a.logits_stride;
    float mx = -INFINITY;
    for (int e = lane; e < E; e += 32)
        mx = fmaxf(mx, l[e]);
    mx = warp_max(mx);
    double sum = 0.0;
    for (int e = lane; e < E; e += 32) {
        p[e] = expf(l[e] - mx);
        sum += p[e];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
    const float inv = static_cast<float>(1.0 / sum);
    for (int e = lane; e < E; e += 32)
        p[e] *= inv;

    float* w = a.weights + t * a.k;
    int32_t* ids = a.ids + t * a.k;
    float chosen_sum = 0.0f;
    for (int64_t j = 0; j < a.k; ++j) {
        float best = -1.0f;  // taken experts hold -1, every other probability is >= 0
        int best_e = INT_MAX;
        for (int e = lane; e < E; e += 32)
            if (p[e] > best) best = p[e], best_e = e;  // ascending e: the lowest id of equal values stays
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ob = __shfl_xor_sync(0xffffffffu, best, o);
            const int oe = __shfl_xor_sync(0xffffffffu, best_e, o);
            if (ob > best || (ob == best && oe < best_e)) best = ob, best_e = oe;
        }
        if (lane == 0) w[j] = best, ids[j] = best_e;
        if (lane == best_e % 32) p[best_e] = -1.0f;
        chosen_sum += best;
    }
    if (a.normalize && lane == 0)  // lane 0 rereads only what it wrote
        for (int64_t j = 0; j < a.k; ++j)
            w[j] /= chosen_sum;
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
