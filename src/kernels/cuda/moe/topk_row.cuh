// The router's softmax and top-k of one token by one warp, as the CPU kernel computes it (kernels/cpu/elementwise.cpp):
// max, exp, a sum in double, one fp32 reciprocal, then k rounds of "largest remaining, lowest id on ties", so the ids
// match the CPU's exactly. Used by the top-k kernel (topk_softmax.cu).
#pragma once

#include <climits>

#include "kernels/cuda/common.cuh"

namespace pagoda::kernels::cuda {

// logit(e) for e < E; p: E floats of this warp's shared memory; w, ids: the token's k outputs. Lane l owns the experts
// e with e % 32 == l: no other lane reads its probabilities, so no syncs are needed.
template <class Logit>
__device__ __forceinline__ void topk_softmax_row(Logit&& logit, int E, int64_t k, bool normalize, float* p, float* w,
                                                 int32_t* ids, int lane) {
    float mx = -INFINITY;
    for (int e = lane; e < E; e += 32)
        mx = fmaxf(mx, logit(e));
    mx = warp_max(mx);
    double sum = 0.0;
    for (int e = lane; e < E; e += 32) {
        p[e] = expf(logit(e) - mx);
        sum += p[e];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
    const float inv = static_cast<float>(1.0 / sum);
    for (int e = lane; e < E; e += 32)
        p[e] *= inv;

    float chosen_sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
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
    if (normalize && lane == 0)  // lane 0 rereads only what it wrote
        for (int64_t j = 0; j < k; ++j)
            w[j] /= chosen_sum;
}

}  // namespace pagoda::kernels::cuda
