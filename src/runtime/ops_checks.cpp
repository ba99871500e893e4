#include "runtime/ops_checks.h"

#include "common/check.h"

namespace pagoda::ops_checks {
namespace {

const char* device_name(DeviceKind device) {
    return device == DeviceKind::Cuda ? "CUDA" : "host";
}

void expect_float32_on(const Tensor& t, DeviceKind device, const char* op, const char* name) {
    PAGODA_OP_EXPECT(t.defined() && t.device().kind == device, op,
                     std::string(name) + " must be a defined " + device_name(device) + " tensor, got " + t.to_string());
    PAGODA_OP_EXPECT(t.dtype() == DType::F32, op, std::string(name) + " must be F32, got " + t.to_string());
}

}  // namespace

void fail(const char* op, const std::string& what) {
    const std::string m = std::string(op) + ": " + what;
    detail::check_failed(__FILE__, __LINE__, "shape/dtype/device", m.c_str());
}

void expect_mat(const Tensor& t, DeviceKind device, const char* op, const char* name) {
    expect_float32_on(t, device, op, name);
    PAGODA_OP_EXPECT(t.rank() == 2 && (t.dim(1) <= 1 || t.stride(1) == 1), op,
                     std::string(name) + " must be [T, N] with a contiguous last dim, got " + t.to_string());
}

void expect_heads(const Tensor& t, DeviceKind device, const char* op, const char* name) {
    expect_float32_on(t, device, op, name);
    PAGODA_OP_EXPECT(t.rank() == 3 && (t.dim(2) <= 1 || t.stride(2) == 1), op,
                     std::string(name) + " must be [T, H, D] with a contiguous last dim, got " + t.to_string());
}

void expect_vec(const Tensor& t, int64_t n, DeviceKind device, const char* op, const char* name) {
    PAGODA_OP_EXPECT(t.defined() && t.device().kind == device && dtype_is_float(t.dtype()), op,
                     std::string(name) + " must be a float " + device_name(device) + " tensor");
    PAGODA_OP_EXPECT(
        t.numel() == n && t.is_contiguous(), op,
        std::string(name) + " must have " + std::to_string(n) + " contiguous elements, got " + t.to_string());
}

void expect_linear(const Tensor& x, const LinearWeight& w, const Tensor& y, DeviceKind device, const char* op) {
    expect_mat(x, device, op, "x");
    expect_mat(y, device, op, "y");
    const Tensor& d = w.data;
    PAGODA_OP_EXPECT(d.defined() && d.device().kind == device && d.rank() == 2 && d.stride(1) == 1, op,
                     std::string("weight must be a ") + device_name(device) +
                         " [N, K] tensor with a contiguous last dim, got " + d.to_string());
    PAGODA_OP_EXPECT(w.in_features() == x.dim(1) && w.out_features() == y.dim(1) && x.dim(0) == y.dim(0), op,
                     "x " + x.to_string() + " · weight " + d.to_string() + "ᵀ (" + w.describe() + ") does not give y " +
                         y.to_string());
    if (w.bias.defined()) expect_vec(w.bias, w.out_features(), device, op, "bias");
}

void expect_fp8(const LinearWeight& w, DeviceKind device, const char* op) {
    PAGODA_OP_EXPECT(w.data.dtype() == DType::F8_E4M3, op,
                     "weight data " + w.data.to_string() + " does not match its format " + w.describe());
    const bool layout_ok = w.scale_layout == ScaleLayout::kPerTensor || w.scale_layout == ScaleLayout::kPerChannel ||
                           (w.scale_layout == ScaleLayout::kBlock && w.block_rows > 0 && w.block_cols > 0);
    PAGODA_OP_EXPECT(layout_ok, op, "fp8 weight with scale layout " + w.describe() + " is not one the kernels take");
    const Tensor& s = w.scales;
    PAGODA_OP_EXPECT(s.defined() && s.dtype() == DType::F32 && s.is_contiguous() && s.device().kind == device &&
                         s.shape() == w.expected_scales_shape(),
                     op,
                     "scales of " + w.describe() + " weight " + w.data.to_string() + " must be contiguous F32 " +
                         w.expected_scales_shape().to_string() + " on the weight's device, got " + s.to_string());
}

void expect_int4(const LinearWeight& w, DeviceKind device, const char* op, bool stacked) {
    PAGODA_OP_EXPECT(w.is_grouped_int() && w.data.dtype() == DType::U8 && w.data.rank() == (stacked ? 3 : 2) &&
                         w.scale_layout == ScaleLayout::kGroup,
                     op, "weight data " + w.data.to_string() + " does not match its format " + w.describe());
    const int64_t K = w.in_features();
    PAGODA_OP_EXPECT(w.group_size > 0 && K % w.group_size == 0, op,
                     std::string(format_name(w.format)) + " group size " + std::to_string(w.group_size) +
                         " does not divide K = " + std::to_string(K));
    const Shape want = w.expected_scales_shape();
    for (const Tensor* t : {&w.scales, &w.zeros}) {
        if (t == &w.zeros && !t->defined()) continue;  // symmetric
        PAGODA_OP_EXPECT(t->defined() && t->dtype() == DType::F32 && t->is_contiguous() && t->device().kind == device &&
                             t->shape() == want,
                         op,
                         std::string(t == &w.scales ? "scales" : "zeros") + " of " + w.describe() + " weight " +
                             w.data.to_string() + " must be contiguous F32 " + want.to_string() +
                             " on the weight's device, got " + t->to_string());
    }
    if (w.input_perm.defined()) {
        PAGODA_OP_EXPECT(!stacked && w.input_perm.dtype() == DType::I32 && w.input_perm.is_contiguous() &&
                             w.input_perm.device().kind == device && w.input_perm.shape() == Shape{K},
                         op,
                         "the input permutation of " + w.describe() + " weight " + w.data.to_string() +
                             " must be contiguous I32 [" + std::to_string(K) +
                             "] on the weight's device (and not of stacked experts), got " + w.input_perm.to_string());
    }
}

void unsupported_format(const LinearWeight& w, const char* backend, const char* op) {
    fail(op, "weight format " + w.describe() + " is not run by the " + backend + " backend yet");
}

void expect_binary(const Tensor& a, const Tensor& b, const Tensor& out, bool broadcast, DeviceKind device,
                   const char* op) {
    const bool heads = a.rank() == 3;
    for (const Tensor* t : {&a, &b, &out})
        heads ? expect_heads(*t, device, op, "operand") : expect_mat(*t, device, op, "operand");
    const bool one_per_row = broadcast && !heads && b.dim(1) == 1;
    PAGODA_OP_EXPECT(a.shape() == out.shape() && (a.shape() == b.shape() || (one_per_row && b.dim(0) == a.dim(0))), op,
                     "operand shapes " + a.to_string() + ", " + b.to_string() + ", " + out.to_string() + " differ");
}

void expect_seqs(const ForwardBatch& b, const char* op) {
    PAGODA_OP_EXPECT(static_cast<int32_t>(b.query_start_loc.size()) == b.num_seqs + 1 &&
                         static_cast<int32_t>(b.seq_lens.size()) == b.num_seqs &&
                         static_cast<int32_t>(b.state_slots.size()) >= b.num_seqs,
                     op, "the batch's query_start_loc/seq_lens/state_slots sizes do not match num_seqs");
}

int64_t expect_conv1d(const Tensor& x, const Tensor& weight, const Tensor& conv_state, const ForwardBatch& batch,
                      const Tensor& out, DeviceKind device) {
    const char* op = "causal_conv1d_silu";
    expect_mat(x, device, op, "x");
    expect_mat(out, device, op, "out");
    expect_seqs(batch, op);
    const int64_t C = x.dim(1);
    PAGODA_OP_EXPECT(x.shape() == out.shape() && x.dim(0) == batch.num_tokens, op,
                     "x/out must be [T, C] for the batch");
    PAGODA_OP_EXPECT(x.data() != out.data(), op, "x and out must not alias");
    PAGODA_OP_EXPECT(weight.defined() && weight.device().kind == device && dtype_is_float(weight.dtype()) &&
                         weight.is_contiguous() && weight.numel() % C == 0 && weight.dim(0) == C,
                     op, "weight must be a float [C, K] (or [C, 1, K]) tensor, got " + weight.to_string());
    const int64_t K = weight.numel() / C;
    PAGODA_OP_EXPECT(conv_state.defined() && conv_state.device().kind == device && conv_state.dtype() == DType::F32 &&
                         conv_state.is_contiguous() && conv_state.rank() == 3 && conv_state.dim(1) == C &&
                         conv_state.dim(2) == K - 1,
                     op, "conv_state must be F32 [slots, C, K-1], got " + conv_state.to_string());
    return K;
}

void expect_gdn_gating(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, const Tensor& g,
                       const Tensor& beta, DeviceKind device) {
    const char* op = "gdn_gating";
    for (const Tensor* t : {&a, &b, &g, &beta})
        expect_mat(*t, device, op, "a/b/g/beta");
    PAGODA_OP_EXPECT(a.shape() == b.shape() && a.shape() == g.shape() && a.shape() == beta.shape(), op,
                     "a, b, g, beta must all be [T, Hv]");
    expect_vec(a_log, a.dim(1), device, op, "A_log");
    expect_vec(dt_bias, a.dim(1), device, op, "dt_bias");
}

void expect_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                       const Tensor& state, const ForwardBatch& batch, const Tensor& out, DeviceKind device) {
    const char* op = "gated_delta_rule";
    expect_heads(q, device, op, "q");
    expect_heads(k, device, op, "k");
    expect_heads(v, device, op, "v");
    expect_heads(out, device, op, "out");
    expect_mat(g, device, op, "g");
    expect_mat(beta, device, op, "beta");
    expect_seqs(batch, op);
    const int64_t T = q.dim(0), Hk = q.dim(1), dk = q.dim(2), Hv = v.dim(1), dv = v.dim(2);
    PAGODA_OP_EXPECT(k.shape() == q.shape() && v.dim(0) == T && out.shape() == v.shape() && T == batch.num_tokens, op,
                     "q/k [T, Hk, dk], v/out [T, Hv, dv] for the batch's T tokens");
    PAGODA_OP_EXPECT(Hv % Hk == 0, op, "value heads must be a multiple of key heads");
    PAGODA_OP_EXPECT(g.dim(0) == T && g.dim(1) == Hv && beta.shape() == g.shape(), op, "g/beta must be [T, Hv]");
    PAGODA_OP_EXPECT(state.defined() && state.device().kind == device && state.dtype() == DType::F32 &&
                         state.is_contiguous() && state.rank() == 4 && state.dim(1) == Hv && state.dim(2) == dk &&
                         state.dim(3) == dv,
                     op, "state must be F32 [slots, Hv, dk, dv], got " + state.to_string());
}

void expect_gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, const Tensor& out,
                           DeviceKind device) {
    const char* op = "gated_rms_norm";
    expect_heads(x, device, op, "x");
    expect_heads(z, device, op, "z");
    expect_heads(out, device, op, "out");
    PAGODA_OP_EXPECT(x.shape() == z.shape() && x.shape() == out.shape(), op, "x, z, out shapes differ");
    expect_vec(weight, x.dim(2), device, op, "weight");
}

}  // namespace pagoda::ops_checks
