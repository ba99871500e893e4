// CudaOps' element-wise ops, the embedding lookup, copies, row gathers and argmax.
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/cuda/cuda_ops.h"

namespace pagoda {

void CudaOps::embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) {
    const auto profile = profiler_.scope("embedding");
    ops_checks::expect_mat(out, kHere, "embedding", "out");
    expect(on_gpu(table) && table.rank() == 2 && table.stride(1) == 1, "embedding",
           "table must be a CUDA [V, H] tensor, got " + table.to_string());
    expect(out.dim(0) == static_cast<int64_t>(ids.size()) && out.dim(1) == table.dim(1), "embedding",
           "out " + out.to_string() + " does not match ids/table");
    for (int32_t id : ids)
        expect(id >= 0 && id < table.dim(0), "embedding", "token id out of range");
    const void* d_ids = nullptr;
    resolve({{ids.data(), ids.size_bytes()}}, &d_ids);
    kcu::launch_embedding(
        {table.data(), elem_type(table.dtype(), "embedding"), table.stride(0), table.dim(0), table.dim(1),
         static_cast<const int32_t*>(d_ids), static_cast<int64_t>(ids.size()), out.data_as<float>(), out.stride(0)},
        stream_);
    invalidate_converted();
}

void CudaOps::silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
    binary("silu_mul", kcu::BinaryOp::SiluMul, gate, up, out, bf16_handoff());
}

// Whether SiLU·mul and the RMSNorms (the hidden state's, linear attention's gated one) over more tokens than the GEMV
// takes also write their output's bf16 copy as the conversion cache that the next GEMM (linear_dense, or the fp8 /
// int4 dequantise-then-GEMM paths) then finds, saving a pass that reads the fp32 output again (T x N x 4 bytes read,
// 2 written, and a launch).
// PAGODA_BF16_HANDOFF=0 turns it off, for the A/B of the benches: a 2,048-token Qwen3-8B prefill on an H100 took
// 69.0-69.1 ms with it and 71.2-71.3 without (session 38, alternated runs).
bool CudaOps::bf16_handoff() {
    static const bool on = [] {
        const char* v = std::getenv("PAGODA_BF16_HANDOFF");
        return v == nullptr || std::string(v) != "0";
    }();
    return on;
}

void CudaOps::sigmoid_mul(const Tensor& x, const Tensor& gate) {
    binary("sigmoid_mul", kcu::BinaryOp::SigmoidMul, x, gate, x);
}

void CudaOps::copy(const Tensor& dst, const Tensor& src) {
    const auto profile = profiler_.scope("copy");
    expect(dst.shape() == src.shape(), "copy", "shapes differ: " + dst.to_string() + " vs " + src.to_string());
    expect(on_gpu(dst) && on_gpu(src), "copy", "CUDA tensors only (use Backend::copy across devices)");
    expect(dst.rank() >= 1 && dst.rank() <= 2 && dst.stride(-1) == 1 && src.stride(-1) == 1, "copy",
           "rank 1 or 2 with a contiguous last dim");
    const bool two = dst.rank() == 2;
    kcu::CopyArgs a{};
    a.src = src.data(), a.src_type = elem_type(src.dtype(), "copy"), a.src_stride = two ? src.stride(0) : 0;
    a.dst = dst.data(), a.dst_type = elem_type(dst.dtype(), "copy"), a.dst_stride = two ? dst.stride(0) : 0;
    a.T = two ? dst.dim(0) : 1, a.N = dst.dim(-1);
    kcu::launch_copy(a, stream_);
    invalidate_converted();
}

void CudaOps::gather_rows(const Tensor& x, std::span<const int32_t> rows, const Tensor& out) {
    const auto profile = profiler_.scope("gather_rows");
    ops_checks::expect_mat(x, kHere, "gather_rows", "x");
    ops_checks::expect_mat(out, kHere, "gather_rows", "out");
    expect(out.dim(0) == static_cast<int64_t>(rows.size()) && out.dim(1) == x.dim(1), "gather_rows",
           "out must be [rows, N]");
    for (int32_t r : rows)
        expect(r >= 0 && r < x.dim(0), "gather_rows", "row index out of range");
    const void* d_rows = nullptr;
    resolve({{rows.data(), rows.size_bytes()}}, &d_rows);
    kcu::CopyArgs a{};
    a.src = x.data(), a.src_type = kcu::ElemType::F32, a.src_stride = x.stride(0);
    a.dst = out.data(), a.dst_type = kcu::ElemType::F32, a.dst_stride = out.stride(0);
    a.T = out.dim(0), a.N = out.dim(1), a.rows = static_cast<const int32_t*>(d_rows);
    kcu::launch_copy(a, stream_);
    invalidate_converted();
}

void CudaOps::argmax(const Tensor& logits, std::span<int32_t> out) {
    const auto profile = profiler_.scope("argmax");
    ops_checks::expect_mat(logits, kHere, "argmax", "logits");
    expect(static_cast<int64_t>(out.size()) == logits.dim(0), "argmax", "one output per row");
    if (out.empty()) return;
    auto* d_out = static_cast<int32_t*>(argmax_device_.get(out.size_bytes(), stream_));
    kcu::launch_argmax(logits.data_as<float>(), logits.stride(0), logits.dim(0), logits.dim(1), d_out, stream_);
    auto* h_out = static_cast<int32_t*>(argmax_host_.get(out.size_bytes()));
    PAGODA_CUDA_OK(cudaMemcpyAsync(h_out, d_out, out.size_bytes(), cudaMemcpyDeviceToHost, stream_));
    PAGODA_CUDA_OK(cudaStreamSynchronize(stream_));
    std::memcpy(out.data(), h_out, out.size_bytes());
}

void CudaOps::binary(const char* op, kcu::BinaryOp kind, const Tensor& a_in, const Tensor& b, const Tensor& out,
                     bool handoff) {
    const auto profile = profiler_.scope("elementwise");
    ops_checks::expect_binary(a_in, b, out, kind == kcu::BinaryOp::SigmoidMul, kHere, op);
    kcu::BinaryArgs a{kind,      a_in.data_as<float>(), a_in.stride(0), b.data_as<float>(), b.stride(0),
                      b.dim(-1), out.data_as<float>(),  out.stride(0),  a_in.dim(0),        a_in.dim(-1)};
    if (a_in.rank() == 3) {
        a.H = a_in.dim(1), a.a_stride_h = a_in.stride(1), a.b_stride_h = b.stride(1);
        a.out_stride_h = out.stride(1);
    }
    // One token goes to the GEMV, which reads the fp32 rows itself: no copy for it.
    a.out_bf16 = hand_off_bf16(out, handoff && a_in.rank() == 2 && a.T > kcu::kGemvTokens);
    kcu::launch_binary(a, stream_);
}

}  // namespace pagoda
