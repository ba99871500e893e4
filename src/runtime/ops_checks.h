// Contract checks shared by the Ops implementations (cpu_ops.cpp, cuda_ops.cpp). A tensor that breaks an op's
// contract (ops.h) is a programmer error: the process stops with the op's name and what was wrong. The macro builds
// its message only when the check fails, since these run on every op of every step.
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace pagoda::ops_checks
