// Row-wise elementwise ops, copies with dtype conversion, embedding gather, MoE top-k routing and argmax.
#include <cmath>

#include "common/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/internal.h"

namespace pagoda::kernels::cpu {

void launch_embedding(const EmbeddingArgs& a) {
    for (int64_t t = 0; t < a.num_tokens; ++t)
        PAGODA_CHECK_MSG(a.ids[t] >= 0 && a.ids[t] < a.vocab, "embedding: token id out of range");
    const int64_t esz = static_cast<int64_t>(dtype_size(a.table_dtype));
#pragma omp parallel for schedule(static) if (a.num_tokens * a.hidden > kParallelMinWork)
    for (int64_t t = 0; t < a.num_tokens; ++t)
        to_f32(static_cast<const char*>(a.table) + a.ids[t] * a.table_stride * esz, a.table_dtype, a.hidden,
               a.out + t * a.out_stride);
}

void launch_elementwise(const ElementwiseArgs& a) {
    PAGODA_CHECK(a.b_cols == a.N || a.b_cols == 1);
#pragma omp parallel for schedule(static) if (a.T * a.H * a.N > kParallelMinWork)
    for (int64_t row = 0; row < a.T * a.H; ++row) {
        const int64_t t = row / a.H, h = row % a.H;
        const float* x = a.a + t * a.a_stride + h * a.a_stride_h;
        const float* y = a.b + t * a.b_stride + h * a.b_stride_h;
        float* o = a.out + t * a.out_stride + h * a.out_stride_h;
        switch (a.op) {
            case ElementwiseOp::SiluMul:
                for (int64_t i = 0; i < a.N; ++i)
                    o[i] = silu(x[i]) * y[i];
                break;
            case ElementwiseOp::SigmoidMul:
                if (a.b_cols == 1) {
                    const float g = sigmoid(y[0]);
                    for (int64_t i = 0; i < a.N; ++i)
                        o[i] = x[i] * g;
                } else {
                    for (int64_t i = 0; i < a.N; ++i)
                        o[i] = x[i] * sigmoid(y[i]);
                }
                break;
            case ElementwiseOp::Add:
                for (int64_t i = 0; i < a.N; ++i)
                    o[i] = x[i] + y[i];
                break;
        }
    }
}

void launch_copy(const CopyArgs& a) {
    const int64_t ssz = static_cast<int64_t>(dtype_size(a.src_dtype));
    const int64_t dsz = static_cast<int64_t>(dtype_size(a.dst_dtype));
#pragma omp parallel for schedule(static) if (a.T * a.N > kParallelMinWork)
    for (int64_t t = 0; t < a.T; ++t) {
        const int64_t st = a.rows ? a.rows[t] : t;
        const char* src = static_cast<const char*>(a.src) + st * a.src_stride * ssz;
        char* dst = static_cast<char*>(a.dst) + t * a.dst_stride * dsz;
        if (a.dst_dtype == DType::F32) {
            to_f32(src, a.src_dtype, a.N, reinterpret_cast<float*>(dst));
        } else if (a.dst_dtype == a.src_dtype) {
            for (int64_t i = 0; i < a.N * dsz; ++i)
                dst[i] = src[i];
        } else {
            auto* d = reinterpret_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < a.N; ++i) {
                const float v = load_as_f32(src, a.src_dtype, i);
                if (a.dst_dtype == DType::BF16) {
                    d[i] = f32_to_bf16(v);
                } else {
                    PAGODA_CHECK_MSG(a.dst_dtype == DType::F16, "copy: destination must be F32, BF16 or F16");
                    d[i] = f32_to_f16(v);
                }
            }
        }
    }
}

void launch_topk_softmax(const TopkSoftmaxArgs& a) {
    PAGODA_CHECK(a.k >= 1 && a.k <= a.E);
#pragma omp parallel for schedule(static) if (a.T * a.E > kParallelMinWork)
    for (int64_t t = 0; t < a.T; ++t) {
        const float* l = a.logits + t * a.logits_stride;
        float* p = scratch(1, static_cast<size_t>(a.E));
        float mx = l[0];
        for (int64_t e = 1; e < a.E; ++e)
            mx = std::max(mx, l[e]);
        double sum = 0.0;
        for (int64_t e = 0; e < a.E; ++e) {
            p[e] = std::exp(l[e] - mx);
            sum += p[e];
        }
        const float inv = static_cast<float>(1.0 / sum);
        for (int64_t e = 0; e < a.E; ++e)
            p[e] *= inv;
        float* w = a.weights + t * a.k;
        int32_t* id = a.ids + t * a.k;
        // Selection by repeated max: k is small (<= 10 in released models).
        float chosen_sum = 0.0f;
        for (int64_t j = 0; j < a.k; ++j) {
            int64_t best = -1;
            for (int64_t e = 0; e < a.E; ++e) {
                if (p[e] < 0.0f) continue;  // already taken
                if (best < 0 || p[e] > p[best]) best = e;
            }
            w[j] = p[best];
            id[j] = static_cast<int32_t>(best);
            chosen_sum += p[best];
            p[best] = -1.0f;
        }
        if (a.normalize)
            for (int64_t j = 0; j < a.k; ++j)
                w[j] /= chosen_sum;
    }
}

void launch_argmax(const ArgmaxArgs& a) {
#pragma omp parallel for schedule(static) if (a.R * a.V > kParallelMinWork)
    for (int64_t r = 0; r < a.R; ++r) {
        const float* l = a.logits + r * a.stride;
        int64_t best = 0;
        for (int64_t v = 1; v < a.V; ++v)
            if (l[v] > l[best]) best = v;
        a.out[r] = static_cast<int32_t>(best);
    }
}

}  // namespace pagoda::kernels::cpu
