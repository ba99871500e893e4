// Contract checks shared by the Ops implementations (cpu_ops.cpp, cuda_ops.cpp). A tensor that breaks an op's
// contract (ops.h) is a programmer error: the process stops with the op's name and what was wrong. The macro builds
// its message only when the check fails, since these run on every op of every step.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/forward_batch.h"
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
// An fp8-e4m3 weight: F8_E4M3 data and contiguous F32 scales on `device` of the shape its layout gives
// (LinearWeight::expected_scales_shape).
void expect_fp8(const LinearWeight& w, DeviceKind device, const char* op);
// An int4 (or int8) weight: U8 data [N, K/2] ([N, K] for int8; a stack of experts [E, N, K/2] when `stacked`), a
// group size that divides K,
// contiguous F32 scales [N, K/group_size] ([E, N, K/group_size]) on `device`, and zeros undefined or like the scales.
void expect_int4(const LinearWeight& w, DeviceKind device, const char* op, bool stacked = false);
// Refuses a weight format the backend does not run, naming the format and its variant.
[[noreturn]] void unsupported_format(const LinearWeight& w, const char* backend, const char* op);

// An element-wise op's operands: a and out [T, N] or [T, H, D] of one shape, b the same, or (when `broadcast`) [T, 1]
// beside a rank-2 a.
void expect_binary(const Tensor& a, const Tensor& b, const Tensor& out, bool broadcast, DeviceKind device,
                   const char* op);

// --- Gated DeltaNet (ops.h has the contracts) -------------------------------------------------------------------
// The batch's per-sequence arrays (query_start_loc, seq_lens, state_slots) match num_seqs.
void expect_seqs(const ForwardBatch& batch, const char* op);
// causal_conv1d_silu: x, out [T, C] F32, not aliased; weight [C, K] or [C, 1, K]; conv_state F32 [slots, C, K-1].
// Returns K.
int64_t expect_conv1d(const Tensor& x, const Tensor& weight, const Tensor& conv_state, const ForwardBatch& batch,
                      const Tensor& out, DeviceKind device);
// gdn_gating: a, b, g, beta F32 [T, Hv]; a_log, dt_bias [Hv].
void expect_gdn_gating(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, const Tensor& g,
                       const Tensor& beta, DeviceKind device);
// gated_delta_rule: q, k [T, Hk, dk]; v, out [T, Hv, dv] with Hv a multiple of Hk; g, beta [T, Hv]; state F32
// [slots, Hv, dk, dv].
void expect_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                       const Tensor& state, const ForwardBatch& batch, const Tensor& out, DeviceKind device);
// gated_rms_norm: x, z, out [T, H, D] of one shape; weight [D].
void expect_gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, const Tensor& out,
                           DeviceKind device);

}  // namespace pagoda::ops_checks
