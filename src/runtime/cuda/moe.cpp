// CudaOps' mixture-of-experts ops: the router's softmax/top-k and the routed experts (kernels/cuda/moe/). The routing
// stays on the device, so a MoE layer records into a CUDA graph like a dense one.
#include <cstddef>
#include <string>

#include "runtime/cuda/cuda_ops.h"

namespace pagoda {

void CudaOps::moe_topk_softmax(const Tensor& router_logits, bool normalize, const Tensor& topk_weights,
                               const Tensor& topk_ids) {
    const char* op = "moe_topk_softmax";
    const auto profile = profiler_.scope(op);
    ops_checks::expect_mat(router_logits, kHere, op, "router_logits");
    expect(router_logits.rank() == 2, op, "router_logits must be [T, E], got " + router_logits.to_string());
    expect(on_gpu(topk_weights) && on_gpu(topk_ids) && topk_weights.dtype() == DType::F32 &&
               topk_weights.is_contiguous() && topk_weights.rank() == 2 && topk_ids.dtype() == DType::I32 &&
               topk_ids.is_contiguous() && topk_ids.shape() == topk_weights.shape() &&
               topk_weights.dim(0) == router_logits.dim(0),
           op, "topk_weights F32 [T, k] and topk_ids I32 [T, k], contiguous CUDA tensors");
    const int64_t E = router_logits.dim(1), k = topk_weights.dim(1);
    expect(E >= 1 && E <= kcu::kMoeMaxExperts && k >= 1 && k <= E, op,
           "needs 1 <= k <= E <= " + std::to_string(kcu::kMoeMaxExperts) + ", got E = " + std::to_string(E) +
               ", k = " + std::to_string(k));
    kcu::launch_moe_topk_softmax({router_logits.data_as<float>(), router_logits.stride(0), router_logits.dim(0), E, k,
                                  normalize, topk_weights.data_as<float>(), topk_ids.data_as<int32_t>()},
                                 stream_);
    invalidate_converted();
}

void CudaOps::moe_experts(const Tensor& x, const Tensor& topk_weights, const Tensor& topk_ids,
                          const MoeExpertWeights& experts, const Tensor& out) {
    const char* op = "moe_experts";
    const auto profile = profiler_.scope(op);
    ops_checks::expect_mat(x, kHere, op, "x");
    ops_checks::expect_mat(out, kHere, op, "out");
    expect(x.rank() == 2 && x.shape() == out.shape(), op, "x and out must be [T, H] of one shape");
    const LinearWeight& gu = experts.gate_up;
    const LinearWeight& dn = experts.down;
    expect(experts.first_expert >= 0 &&
               (experts.num_experts == 0 || experts.first_expert + gu.data.dim(0) <= experts.num_experts),
           op, "the stacks' experts are not among the model's");
    const auto quantized = [](const LinearWeight& w) {
        return w.format == WeightFormat::kFp8E4M3 || w.format == WeightFormat::kInt4;
    };
    if (quantized(gu) || quantized(dn)) {
        // fp8 experts: a few tokens' pair passes read the stacks themselves (moe.h: moe_experts_read_fp8); int4 ones
        // the pair passes and the grouped GEMV passes (moe_experts_read_int4: decode batches). Otherwise every
        // expert is dequantised to a bf16 stack, then the bf16 kernels (correct, not fast: the whole stack per call).
        if (gu.format == WeightFormat::kFp8E4M3 && dn.format == WeightFormat::kFp8E4M3) {
            ops_checks::expect_fp8(gu, kHere, op);
            ops_checks::expect_fp8(dn, kHere, op);
            kcu::MoeExpertsArgs a = moe_args(x, topk_weights, topk_ids, gu, dn, out);
            a.weight_type = kcu::ElemType::F8E4M3;
            a.first_expert = experts.first_expert;
            const auto scales = [](const LinearWeight& w) {
                const ScaleBlocks b = w.scale_blocks();
                return kcu::WeightScales{w.scales.data_as<float>(), b.rows, b.cols, b.stride};
            };
            a.gate_up_scales = scales(gu), a.down_scales = scales(dn);
            if (kcu::moe_experts_read_fp8(a)) {
                kcu::launch_moe_experts(a, stream_);
                invalidate_converted();
                return;
            }
        }
        if (gu.format == WeightFormat::kInt4 && dn.format == WeightFormat::kInt4 && gu.data.is_contiguous() &&
            dn.data.is_contiguous() && gu.dequant_dtype == dn.dequant_dtype) {
            ops_checks::expect_int4(gu, kHere, op, /*stacked=*/true);
            ops_checks::expect_int4(dn, kHere, op, /*stacked=*/true);
            kcu::MoeExpertsArgs a = moe_args(x, topk_weights, topk_ids, gu, dn, out);
            a.weight_type = kcu::ElemType::BF16, a.int4 = true;
            a.first_expert = experts.first_expert;
            a.int4_round_to = int4_round_to(gu, op);
            // Each stack's groups as one [E*N, K] matrix's: rows, scales and zeros of expert e follow expert e - 1's.
            const auto groups = [](const LinearWeight& w) {
                return kcu::WeightScales{w.scales.data_as<float>(), 1, w.group_size, w.in_features() / w.group_size};
            };
            a.gate_up_scales = groups(gu), a.down_scales = groups(dn);
            a.gate_up_zeros = gu.zeros.defined() ? gu.zeros.data_as<float>() : nullptr;
            a.down_zeros = dn.zeros.defined() ? dn.zeros.data_as<float>() : nullptr;
            if (kcu::moe_experts_read_int4(a)) {
                kcu::launch_moe_experts(a, stream_);
                invalidate_converted();
                return;
            }
        }
        // Both stacks in one scratch buffer, gate_up first, taken once (a second get could move the first stack).
        const auto bf16_bytes = [&quantized](const LinearWeight& w) {
            const auto rows = static_cast<size_t>(w.data.dim(0) * w.out_features());
            return quantized(w) ? rows * static_cast<size_t>(w.in_features()) * 2 : size_t{0};
        };
        const size_t gate_up_bytes = bf16_bytes(gu);
        auto* scratch = static_cast<std::byte*>(dequantized_weight_.get(gate_up_bytes + bf16_bytes(dn), stream_));
        const LinearWeight gu16 = dequantized_experts(gu, scratch);
        const LinearWeight dn16 = dequantized_experts(dn, scratch + gate_up_bytes);
        return moe_experts(x, topk_weights, topk_ids,
                           MoeExpertWeights{gu16, dn16, experts.first_expert, experts.num_experts}, out);
    }
    for (const LinearWeight* w : {&gu, &dn})
        if (w->format != WeightFormat::kBf16 && w->format != WeightFormat::kF16)
            ops_checks::unsupported_format(*w, "CUDA", op);
    const kcu::ElemType wt = elem_type(gu.data.dtype(), op);
    expect(wt != kcu::ElemType::F32 && dn.data.dtype() == gu.data.dtype() && gu.input_dtype() == gu.data.dtype() &&
               dn.input_dtype() == dn.data.dtype(),
           op,
           "gate_up and down must both be BF16 or both F16 and match their format, got " + gu.describe() + " " +
               gu.data.to_string() + " and " + dn.describe() + " " + dn.data.to_string());
    kcu::MoeExpertsArgs a = moe_args(x, topk_weights, topk_ids, gu, dn, out);
    a.weight_type = wt;
    a.first_expert = experts.first_expert;
    kcu::launch_moe_experts(a, stream_);
    invalidate_converted();
}

kcu::MoeExpertsArgs CudaOps::moe_args(const Tensor& x, const Tensor& topk_weights, const Tensor& topk_ids,
                                      const LinearWeight& gu, const LinearWeight& dn, const Tensor& out) {
    const char* op = "moe_experts";
    expect(on_gpu(gu.data) && on_gpu(dn.data) && gu.data.rank() == 3 && dn.data.rank() == 3 && gu.data.stride(2) == 1 &&
               dn.data.stride(2) == 1,
           op,
           "gate_up and down must be stacked CUDA tensors [E, 2I, H] and [E, H, I] with a contiguous last dim, got " +
               gu.data.to_string() + " and " + dn.data.to_string());
    const int64_t T = x.dim(0), E = gu.data.dim(0), H = x.dim(1), I = gu.data.dim(1) / 2;
    expect(E > 0 && gu.data.dim(1) == 2 * I && gu.in_features() == H && dn.data.dim(0) == E && dn.data.dim(1) == H &&
               dn.in_features() == I,
           op,
           "gate_up " + gu.data.to_string() + " and down " + dn.data.to_string() +
               " do not fit [E, 2I, H] and [E, H, I] with H = " + std::to_string(H));
    expect(E <= kcu::kMoeMaxExperts, op,
           "at most " + std::to_string(kcu::kMoeMaxExperts) + " experts on CUDA, got " + std::to_string(E));
    expect(on_gpu(topk_weights) && on_gpu(topk_ids) && topk_weights.is_contiguous() && topk_ids.is_contiguous() &&
               topk_ids.dtype() == DType::I32 && topk_weights.dtype() == DType::F32 && topk_weights.rank() == 2 &&
               topk_weights.shape() == topk_ids.shape() && topk_ids.dim(0) == T && topk_ids.dim(1) >= 1,
           op, "topk_weights/topk_ids must be contiguous CUDA [T, k] F32 and I32");
    const int64_t k = topk_ids.dim(1);
    // Sized by the largest call so far: a prefill grows it before decode steps are recorded into graphs.
    void* workspace = moe_workspace_.get(kcu::moe_experts_workspace_bytes(T, H, I, E, k), stream_);
    kcu::MoeExpertsArgs a;
    a.x = x.data_as<float>(), a.x_stride = x.stride(0);
    a.out = out.data_as<float>(), a.out_stride = out.stride(0);
    a.T = T, a.H = H, a.I = I, a.E = E, a.k = k;
    a.topk_weights = topk_weights.data_as<float>(), a.topk_ids = topk_ids.data_as<int32_t>();
    a.gate_up = {gu.data.data(), gu.data.stride(0), gu.data.stride(1)};
    a.down = {dn.data.data(), dn.data.stride(0), dn.data.stride(1)};
    a.workspace = workspace, a.early_loads = early_loads_;
    return a;
}

LinearWeight CudaOps::dequantized_experts(const LinearWeight& w, void* dst) {
    const char* op = "moe_experts";
    if (w.format == WeightFormat::kInt4) {
        ops_checks::expect_int4(w, kHere, op, /*stacked=*/true);
        expect(w.data.is_contiguous(), op, "int4 experts must be a contiguous [E, N, K/2] stack");
        // The stack as one [E*N, K] matrix: rows, scales and zeros of expert e follow those of expert e - 1.
        const int64_t rows = w.data.dim(0) * w.out_features(), K = w.in_features();
        const kcu::Int4Weight weight = int4_weight(w, w.data.stride(1), op);
        const auto profile = profiler_.scope("dequantize int4 experts");
        kcu::launch_dequantize_int4({weight, rows, K, dst}, stream_);
        return LinearWeight::dense(
            Tensor(dst, DType::BF16, Shape{w.data.dim(0), w.out_features(), K}, w.data.device()));
    }
    if (w.format != WeightFormat::kFp8E4M3) return w;
    ops_checks::expect_fp8(w, kHere, op);
    expect(w.data.rank() == 3 && w.data.is_contiguous(), op, "fp8 experts must be a contiguous [E, N, K] stack");
    const int64_t E = w.data.dim(0), N = w.data.dim(1), K = w.data.dim(2);
    // The stack as one [E*N, K] matrix: its grid is the experts' grids one above the other when N is a whole number
    // of scale blocks (the loader stacks only such experts).
    const ScaleBlocks b = w.scale_blocks();
    expect(N % b.rows == 0, op, "fp8 experts whose rows are not whole scale blocks: " + w.describe());
    const auto profile = profiler_.scope("dequantize fp8 experts");
    kcu::launch_dequantize_fp8(
        {w.data.data(), K, kcu::WeightScales{w.scales.data_as<float>(), b.rows, b.cols, b.stride}, E * N, K, dst},
        stream_);
    return LinearWeight::dense(Tensor(dst, DType::BF16, Shape{E, N, K}, w.data.device()));
}

}  // namespace pagoda
