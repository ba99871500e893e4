// Gated DeltaNet front: the causal depthwise conv1d + SiLU with its per-slot history, and the g/beta gates.
#include "kernels/cuda/delta_net/delta_net_internal.cuh"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxConvK = 8;

// One block per (sequence, tile of CT channels); its kThreads/CT token lanes walk the sequence's tokens with a stride.
// Tokens in the first K-1 positions read their history from the old state; the block's barrier orders those reads
// before token lane 0 overwrites the state with the last K-1 inputs, so no other block touches the state.
template <typename W, int CT>
__global__ void __launch_bounds__(kThreads) causal_conv1d_silu_kernel(CausalConv1dArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    constexpr int kLanes = kThreads / CT;
    const int s = blockIdx.y;
    const int64_t c = static_cast<int64_t>(blockIdx.x) * CT + threadIdx.x % CT;
    const int lane = threadIdx.x / CT;
    const int begin = a.seqs.query_start_loc[s], len = a.seqs.query_start_loc[s + 1] - begin;
    const int slot = a.seqs.state_slots[s];
    if (slot < 0 || slot >= a.num_slots) return;  // uniform over the block
    const bool fresh = a.seqs.seq_lens[s] == len;
    const int K = a.K, H = a.K - 1;
    const bool active = c < a.C;
    float* state = a.conv_state + (static_cast<int64_t>(slot) * a.C + (active ? c : 0)) * H;
    const W* wrow = static_cast<const W*>(a.weight) + (active ? c : 0) * K;
    float w[kMaxConvK];
#pragma unroll
    for (int i = 0; i < kMaxConvK; ++i)
        w[i] = active && i < K ? to_f32(wrow[i]) : 0.0f;

    if (active) {
        for (int t = lane; t < len; t += kLanes) {
            // Same order of sums as the CPU kernel: the newest tap first, then the history oldest first.
            float acc = w[K - 1] * a.x[static_cast<int64_t>(begin + t) * a.x_stride + c];
#pragma unroll
            for (int i = 0; i < kMaxConvK - 1; ++i) {
                if (i >= H) break;
                const int p = t - H + i;  // position of tap i relative to the first new token
                const float xv = p >= 0  ? a.x[static_cast<int64_t>(begin + p) * a.x_stride + c]
                                 : fresh ? 0.0f
                                         : state[H + p];
                acc += w[i] * xv;
            }
            a.out[static_cast<int64_t>(begin + t) * a.out_stride + c] = silu(acc);
        }
    }
    __syncthreads();
    if (!active || lane != 0) return;
    float next[kMaxConvK - 1];
#pragma unroll
    for (int i = 0; i < kMaxConvK - 1; ++i) {
        if (i >= H) break;
        const int p = len - H + i;
        next[i] = p >= 0 ? a.x[static_cast<int64_t>(begin + p) * a.x_stride + c] : fresh ? 0.0f : state[H + p];
    }
#pragma unroll
    for (int i = 0; i < kMaxConvK - 1; ++i) {
        if (i >= H) break;
        state[i] = next[i];
    }
}

template <typename W>
void conv_launch(const CausalConv1dArgs& a, cudaStream_t stream) {
    const unsigned seqs = static_cast<unsigned>(a.seqs.num_seqs);
    if (a.num_tokens == a.seqs.num_seqs) {
        // Decode: one token per sequence, so every thread takes its own channel.
        constexpr int CT = kThreads;
        launch_kernel<causal_conv1d_silu_kernel<W, CT>>(dim3(static_cast<unsigned>((a.C + CT - 1) / CT), seqs),
                                                        kThreads, 0, stream, a);
    } else {
        // Prefill: 32 channels (128 contiguous bytes per token row) × 8 token lanes per block.
        constexpr int CT = 32;
        launch_kernel<causal_conv1d_silu_kernel<W, CT>>(dim3(static_cast<unsigned>((a.C + CT - 1) / CT), seqs),
                                                        kThreads, 0, stream, a);
    }
    PAGODA_CUDA_CHECK_LAUNCH();
}

__global__ void gdn_gating_kernel(GdnGatingArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    const int64_t n = a.T * a.H;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t t = i / a.H, h = i % a.H;
        a.g[t * a.g_stride + h] = delta_net::gdn_g(a.a[t * a.a_stride + h], load_as_f32(a.a_log, a.a_log_type, h),
                                                   load_as_f32(a.dt_bias, a.dt_bias_type, h));
        a.beta[t * a.beta_stride + h] = sigmoid(a.b[t * a.b_stride + h]);
    }
}

}  // namespace

void launch_causal_conv1d_silu(const CausalConv1dArgs& a, cudaStream_t stream) {
    if (a.seqs.num_seqs == 0 || a.C == 0) return;
    PAGODA_KERNEL_REQUIRE(a.K >= 2 && a.K <= kMaxConvK, "causal_conv1d_silu: K must be in [2, 8]");
    PAGODA_KERNEL_REQUIRE(a.seqs.num_seqs <= 65535, "causal_conv1d_silu: too many sequences");
    switch (a.weight_type) {
        case ElemType::BF16:
            conv_launch<__nv_bfloat16>(a, stream);
            break;
        case ElemType::F16:
            conv_launch<__half>(a, stream);
            break;
        default:
            conv_launch<float>(a, stream);
            break;
    }
}

void launch_gdn_gating(const GdnGatingArgs& a, cudaStream_t stream) {
    const int64_t n = a.T * a.H;
    if (n == 0) return;
    launch_kernel<gdn_gating_kernel>(grid_for(n, kThreads), kThreads, 0, stream, a);
    PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::kernels::cuda
