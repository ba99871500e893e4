// Contract checks shared by the Ops implementations (cpu_ops.cpp, cuda_ops.cpp). A tensor that breaks an op's
// contract (ops.h) is a programmer error: the process stops with the op's name and what was wrong. The macro builds
// its message only when the check fails, since these run on every op of every step.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/linear_weight.h"
#include "tensor/tensor.h"

namespace pagoda::ops_checks {

[[noreturn]] void fail(const char* op, const std::string& what);

#define PAGODA_OP_EXPECT(cond, op, what)              \
    do {                                              \
        if (!(cond)) [[unlikely]]                     \
            ::pagoda::ops_checks::fail((op), (what)); \
    } while (0)

// A defined F32 tensor on `device`: [T, N] (rank 2) or [T, H, D] (rank 3) with a contiguous last dimension.
void expect_mat(const Tensor& t, DeviceKind device, const char* op, const char* name);
void expect_heads(const Tensor& t, DeviceKind device, const char* op, const char* name);
// A float tensor on `device` of `n` contiguous elements (norm weights, biases, per-head parameters).
void expect_vec(const Tensor& t, int64_t n, DeviceKind device, const char* op, const char* name);
// linear()'s contract whatever the format: x [T, K] and y [T, N] F32 on `device`, w.data a rank-2 tensor on `device`
// with a contiguous last dim giving N and K, the bias (if any) [N].
void expect_linear(const Tensor& x, const LinearWeight& w, const Tensor& y, DeviceKind device, const char* op);
// Refuses a weight format the backend does not run, naming the format and its variant.
[[noreturn]] void unsupported_format(const LinearWeight& w, const char* backend, const char* op);

}  // namespace pagoda::ops_checks
