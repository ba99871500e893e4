// CUDA launchers for the mixture-of-experts layers of Qwen3-MoE / Qwen3-Next / Qwen3.5-MoE: the router's softmax and
// top-k, and the routed experts as grouped GEMMs. Same semantics as the CPU kernels (kernels/cpu/elementwise.cpp,
// moe.cpp); runtime/ops.h has the contracts. The routing (which tokens go to which expert) stays on the DEVICE: the
// launchers read only host scalars, allocate nothing and never synchronise, so a decode step can be recorded in a
// CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/types.h"

namespace pagoda::kernels::cuda {

// The most experts the kernels take (Qwen3.5-397B and Qwen3-Next have 512): the routing keeps one counter per expert
// in shared memory and one thread per expert in its scan.
inline constexpr int64_t kMoeMaxExperts = 1024;

// p = softmax(logits[t, :]) in fp32 (the sum in double, as the CPU does); the k largest in descending order (ties:
// lower expert id first); with `normalize` the k weights are divided by their sum. logits [T, E] with a row stride;
// weights [T, k] F32 and ids [T, k] I32, contiguous. E <= kMoeMaxExperts, 1 <= k <= E.
struct MoeTopkSoftmaxArgs {
    const float* logits = nullptr;
    int64_t logits_stride = 0;
    int64_t T = 0, E = 0, k = 0;
    bool normalize = false;
    float* weights = nullptr;
    int32_t* ids = nullptr;
};
void launch_moe_topk_softmax(const MoeTopkSoftmaxArgs& a, cudaStream_t stream);

// Stacked expert weights: expert e's row r at data + e*expert_stride + r*row_stride (elements), rows contiguous.
struct MoeStackedWeight {
    const void* data = nullptr;
    int64_t expert_stride = 0;
    int64_t row_stride = 0;
};

// out[t] = Σ_j w[t,j] · down_e(silu(gate_e x_t) ⊙ up_e x_t), e = ids[t,j]. x, out [T, H] F32 with row strides (must
// not alias); topk_weights [T, k] F32 and topk_ids [T, k] I32 contiguous, on the device; gate_up [E, 2I, H] (rows
// [0, I) gate, [I, 2I) up) and down [E, H, I], both BF16 or both F16. As the dense linear path does, the GEMM inputs
// (x and silu(gate)·up) are rounded to the weights' type; accumulation is fp32. The stacks hold the model's experts
// [first_expert, first_expert + E) (expert parallelism; 0 and all of them otherwise): an id outside that range
// contributes nothing (an id outside the model's experts makes the CPU kernel abort instead: the device cannot stop
// the process). Deterministic: each (token, slot) gets
// its own output row and the k rows of a token are summed in slot order.
struct MoeExpertsArgs {
    const float* x = nullptr;
    int64_t x_stride = 0;
    float* out = nullptr;
    int64_t out_stride = 0;
    int64_t T = 0, H = 0, I = 0, E = 0, k = 0;
    int64_t first_expert = 0;
    const float* topk_weights = nullptr;
    const int32_t* topk_ids = nullptr;
    ElemType weight_type = ElemType::BF16;  // BF16 or F16; F8E4M3 only where moe_experts_read_fp8 says so
    MoeStackedWeight gate_up, down;
    // F8E4M3 weights: each stack's scale grid as one [E*N, K] matrix's (the loader stacks experts so).
    WeightScales gate_up_scales, down_scales;
    // int4 stacks (LinearWeight's kInt4 layout; weight_type BF16, the type they are computed in): the data U8 with
    // strides in bytes, two weights a byte (even k in the low nibble); each stack's group scales as one [E*N, K]
    // matrix's in *_scales (rows 1, cols the group size, stride K / group) and its zero points of the same grid in
    // *_zeros (null: the symmetric 8); each weight dequantised as launch_dequantize_int4 writes it.
    bool int4 = false;
    const float* gate_up_zeros = nullptr;
    const float* down_zeros = nullptr;
    ElemType int4_round_to = ElemType::F32;
    void* workspace = nullptr;  // moe_experts_workspace_bytes(T, H, I, E, k), 256-byte aligned
    // The pair passes' down pass asks L2 for its experts' rows before its programmatic-launch wait
    // (CudaOps' default, off with PAGODA_EARLY_LOADS=0).
    bool early_loads = false;
};
size_t moe_experts_workspace_bytes(int64_t T, int64_t H, int64_t I, int64_t E, int64_t k);
// Whether launch_moe_experts takes these fp8 (e4m3) stacks as they are: a few tokens on the pair passes, few rows per
// expert on the grouped GEMV passes (decode batches), more on the mma passes (weights dequantised into shared
// memory), each weight exactly as launch_dequantize_fp8 writes it. Otherwise (odd shapes) dequantise the stacks to
// bf16 first.
bool moe_experts_read_fp8(const MoeExpertsArgs& a);
// The same for int4 stacks (a.int4): the pair passes, the grouped GEMV passes with rows and groups that 8-weight loads
// fit, or the mma passes (quant_mma_fits). Otherwise dequantise them first.
bool moe_experts_read_int4(const MoeExpertsArgs& a);
void launch_moe_experts(const MoeExpertsArgs& a, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
