// Routed experts of a MoE layer, grouped by expert: each selected expert's weights are read once per call and
// applied to all the tokens routed to it (GEMV for decode, the tiled GEMM for prefill; fp8 and int4 experts through
// their linears, which dequantise them first).
#include <algorithm>
#include <cstddef>
#include <vector>

#include "common/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/internal.h"

namespace pagoda::kernels::cpu {

namespace {

// l.y = l.x · (rows [row0, row0 + l.N) of expert e's weight)ᵀ, through the dense, the fp8 or the int4 linear.
void expert_linear(LinearArgs l, const StackedWeight& w, int64_t e, int64_t row0) {
    const auto* rows = static_cast<const std::byte*>(w.data) +
                       static_cast<size_t>(e * w.expert_stride + row0 * w.row_stride) * dtype_size(w.dtype);
    if (w.dtype == DType::U8) {  // int4: row_stride bytes a row, the scales and zeros of each row one group row
        LinearInt4Args f;
        f.x = l.x, f.x_stride = l.x_stride;
        f.w = w.int4;
        f.w.data = reinterpret_cast<const uint8_t*>(rows), f.w.row_bytes = w.row_stride;
        const int64_t scale_offset = e * w.scale_expert_stride + row0 * w.int4.groups;
        f.w.scales += scale_offset;
        if (f.w.zeros != nullptr) f.w.zeros += scale_offset;
        f.y = l.y, f.y_stride = l.y_stride;
        f.T = l.T, f.N = l.N, f.K = l.K;
        return launch_linear_int4(f);
    }
    if (w.dtype != DType::F8_E4M3) {
        l.w = rows, l.w_dtype = w.dtype, l.w_stride = w.row_stride;
        return launch_linear(l);
    }
    PAGODA_CHECK_MSG(row0 % w.scales.block_rows == 0 || w.scales.stride == 0, "moe: a half not at a scale block row");
    LinearFp8Args f;
    f.x = l.x, f.x_stride = l.x_stride;
    f.w = reinterpret_cast<const uint8_t*>(rows), f.w_stride = w.row_stride;
    f.scales = w.scales;
    f.scales.data += e * w.scale_expert_stride + row0 / w.scales.block_rows * w.scales.stride;
    f.y = l.y, f.y_stride = l.y_stride;
    f.T = l.T, f.N = l.N, f.K = l.K;
    launch_linear_fp8(f);
}

}  // namespace

void launch_moe_experts(const MoeExpertsArgs& a) {
    const int64_t T = a.T, H = a.H, I = a.I;
    for (int64_t t = 0; t < T; ++t)
        std::fill(a.out + t * a.out_stride, a.out + t * a.out_stride + H, 0.0f);
    // Bucket (token, weight) pairs per expert held here; counts first so the buckets are one flat array.
    const int64_t num_experts = a.num_experts > 0 ? a.num_experts : a.E;
    PAGODA_CHECK_MSG(a.first_expert >= 0 && a.first_expert + a.E <= num_experts,
                     "moe: the stacks' experts are out of range");
    const auto local = [&a](int32_t id) { return static_cast<int64_t>(id) - a.first_expert; };
    const auto here = [&a, &local](int32_t id) { return local(id) >= 0 && local(id) < a.E; };
    thread_local std::vector<int32_t> count, start, order;
    count.assign(static_cast<size_t>(a.E) + 1, 0);
    for (int64_t i = 0; i < T * a.k; ++i) {
        PAGODA_CHECK_MSG(a.topk_ids[i] >= 0 && a.topk_ids[i] < num_experts, "moe: expert id out of range");
        if (here(a.topk_ids[i])) ++count[static_cast<size_t>(local(a.topk_ids[i]))];
    }
    start.assign(static_cast<size_t>(a.E) + 1, 0);
    for (int64_t e = 0; e < a.E; ++e)
        start[e + 1] = start[e] + count[e];
    order.resize(static_cast<size_t>(start[a.E]));
    std::vector<int32_t>& fill = count;
    std::fill(fill.begin(), fill.end(), 0);
    for (int64_t i = 0; i < T * a.k; ++i) {
        if (!here(a.topk_ids[i])) continue;  // another rank's expert (expert parallelism)
        const int64_t e = local(a.topk_ids[i]);
        order[static_cast<size_t>(start[e] + fill[e]++)] = static_cast<int32_t>(i);  // i = t*k + j
    }

    for (int64_t e = 0; e < a.E; ++e) {
        const int64_t n = start[e + 1] - start[e];
        if (n == 0) continue;
        float* xe = scratch(3, static_cast<size_t>(n * H));
        float* g = scratch(4, static_cast<size_t>(n * I));
        float* u = scratch(5, static_cast<size_t>(n * I));
        float* d = scratch(6, static_cast<size_t>(n * H));
        for (int64_t r = 0; r < n; ++r) {
            const int64_t t = order[start[e] + r] / a.k;
            std::copy(a.x + t * a.x_stride, a.x + t * a.x_stride + H, xe + r * H);
        }
        LinearArgs l;
        l.x = xe;
        l.x_stride = H;
        l.T = n;
        l.K = H;
        l.N = I;
        l.y_stride = I;
        l.y = g;
        expert_linear(l, a.gate_up, e, 0);
        l.y = u;
        expert_linear(l, a.gate_up, e, I);
        for (int64_t i = 0; i < n * I; ++i)
            g[i] = silu(g[i]) * u[i];
        l.x = g;
        l.x_stride = I;
        l.K = I;
        l.N = H;
        l.y_stride = H;
        l.y = d;
        expert_linear(l, a.down, e, 0);
        for (int64_t r = 0; r < n; ++r) {
            const int64_t i = order[start[e] + r];
            const float w = a.topk_weights[i];
            float* o = a.out + (i / a.k) * a.out_stride;
            for (int64_t c = 0; c < H; ++c)
                o[c] += w * d[r * H + c];
        }
    }
}

}  // namespace pagoda::kernels::cpu
