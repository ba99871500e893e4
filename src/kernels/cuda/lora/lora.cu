// The LoRA shrink and expand kernels (lora.h). Low-rank deltas are a small share of a step's work next to the base
// GEMMs; these are plain and correct rather than tuned (one block per (token, rank row) for the shrink, a thread per
// output feature for the expand).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/lora/lora.h"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kShrinkThreads = 128;
constexpr int kExpandThreads = 256;

__global__ void lora_shrink_kernel(LoraShrinkArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    const int64_t i = blockIdx.x, j = blockIdx.y;
    const float* x = a.x + static_cast<int64_t>(a.tokens[i]) * a.x_stride;
    const float* row = a.a + j * a.K;
    float acc = 0.0f;
    for (int64_t k = threadIdx.x; k < a.K; k += blockDim.x)
        acc += x[k] * row[k];
    acc = block_sum(acc);
    if (threadIdx.x == 0) a.u[i * a.rank + j] = acc * a.scale;
}

__global__ void lora_expand_kernel(LoraExpandArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    const int64_t i = blockIdx.x;
    const int64_t n = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
    if (n >= a.N) return;
    const float* u = a.u + i * a.rank;
    const float* b = a.b + n * a.rank;
    float acc = 0.0f;
    for (int64_t j = 0; j < a.rank; ++j)
        acc += u[j] * b[j];
    a.y[static_cast<int64_t>(a.tokens[i]) * a.y_stride + a.row_offset + n] += acc;
}

}  // namespace

void launch_lora_shrink(const LoraShrinkArgs& a, cudaStream_t stream) {
    if (a.num_tokens <= 0 || a.rank <= 0) return;
    PAGODA_KERNEL_REQUIRE(a.num_tokens < (int64_t{1} << 31) && a.rank <= 65535, "LoRA shrink grid too large");
    const dim3 grid(static_cast<unsigned>(a.num_tokens), static_cast<unsigned>(a.rank));
    launch_kernel<lora_shrink_kernel>(grid, kShrinkThreads, 0, stream, a);
}

void launch_lora_expand(const LoraExpandArgs& a, cudaStream_t stream) {
    if (a.num_tokens <= 0 || a.N <= 0) return;
    const int64_t col_blocks = (a.N + kExpandThreads - 1) / kExpandThreads;
    PAGODA_KERNEL_REQUIRE(a.num_tokens < (int64_t{1} << 31) && col_blocks <= 65535, "LoRA expand grid too large");
    const dim3 grid(static_cast<unsigned>(a.num_tokens), static_cast<unsigned>(col_blocks));
    launch_kernel<lora_expand_kernel>(grid, kExpandThreads, 0, stream, a);
}

}  // namespace pagoda::kernels::cuda
