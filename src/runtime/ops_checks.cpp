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

void unsupported_format(const LinearWeight& w, const char* backend, const char* op) {
    fail(op, "weight format " + w.describe() + " is not run by the " + backend + " backend yet");
}

}  // namespace pagoda::ops_checks
