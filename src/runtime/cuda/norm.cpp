// CudaOps' RMSNorm family: per row, fused with the residual add, and per head (QK-norm).
#include "runtime/cuda/cuda_ops.h"

namespace pagoda {

void CudaOps::rms_norm(const Tensor& x, const Tensor& weight, float eps, NormKind kind, const Tensor& out) {
    norm_impl("rms_norm", Tensor(), x, weight, eps, kind, out);
}

void CudaOps::add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& weight, float eps, NormKind kind,
                           const Tensor& out) {
    ops_checks::expect_mat(residual, kHere, "add_rms_norm", "residual");
    expect(residual.shape() == x.shape(), "add_rms_norm", "residual and x shapes differ");
    norm_impl("add_rms_norm", residual, x, weight, eps, kind, out);
}

void CudaOps::head_rms_norm(const Tensor& x, const Tensor& weight, float eps, NormKind kind) {
    const auto profile = profiler_.scope("head_rms_norm");
    ops_checks::expect_heads(x, kHere, "head_rms_norm", "x");
    ops_checks::expect_vec(weight, x.dim(2), kHere, "head_rms_norm", "weight");
    kcu::RmsNormArgs a{};
    a.x = a.out = rows3(x);
    a.T = x.dim(0), a.H = x.dim(1), a.D = x.dim(2);
    a.weight = weight.data(), a.weight_type = elem_type(weight.dtype(), "head_rms_norm"), a.eps = eps;
    a.zero_centred = kind == NormKind::ZeroCentred, a.early_loads = early_loads_;
    kcu::launch_rms_norm(a, stream_);
    invalidate_converted();
}

void CudaOps::norm_impl(const char* op, const Tensor& residual, const Tensor& x, const Tensor& weight, float eps,
                        NormKind kind, const Tensor& out) {
    const auto profile = profiler_.scope("rms_norm");
    ops_checks::expect_mat(x, kHere, op, "x");
    ops_checks::expect_mat(out, kHere, op, "out");
    expect(x.shape() == out.shape(), op, "x " + x.to_string() + " and out " + out.to_string() + " differ");
    ops_checks::expect_vec(weight, x.dim(1), kHere, op, "weight");
    kcu::RmsNormArgs a{};
    a.x = rows2(x), a.out = rows2(out);
    if (residual.defined()) a.residual = rows2(residual);
    a.T = x.dim(0), a.H = 1, a.D = x.dim(1);
    a.weight = weight.data(), a.weight_type = elem_type(weight.dtype(), op), a.eps = eps;
    a.zero_centred = kind == NormKind::ZeroCentred, a.early_loads = early_loads_;
    // Over more tokens than the GEMV takes, the GEMMs that read out next (q/k/v, gate/up, the router) take it in bf16:
    // hand it to them (elementwise.cpp's silu_mul says how).
    a.out_bf16 = hand_off_bf16(out, bf16_handoff() && a.T > kcu::kGemvTokens);
    kcu::launch_rms_norm(a, stream_);
}

}  // namespace pagoda
