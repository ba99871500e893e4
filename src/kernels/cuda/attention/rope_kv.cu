// NeoX RoPE in place (partial rotary dims), alone or after the per-head QK-norm in one kernel (which can also store
// the K/V rows in the paged caches), and the paged KV write (F32 K/V rows into BF16/F16/F32 caches, or e4m3 ones
// quantised with the layer's scale: to_cache), and the K/V amax that --calculate-kv-scales starts from.
#include "kernels/cuda/attention/attention_internal.cuh"
#include "kernels/cuda/norm/rms_row.cuh"

namespace pagoda::kernels::cuda {

namespace {

// One thread per (t, h, j < rotary_dim/2). Angles in fp32 as the reference: float(pos) * inv_freq[j]; full-range
// sincosf (not the fast intrinsic: positions reach 1e5+ radians); cos and sin then scaled as the reference scales them.
__global__ void rope_kernel(RopeArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    const int half = a.rotary_dim / 2;
    const int64_t n = a.T * a.H * half;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int j = static_cast<int>(i % half);
        const int64_t th = i / half, t = th / a.H, h = th % a.H;
        float* x = a.x.data + t * a.x.stride_t + h * a.x.stride_h;
        const float angle = static_cast<float>(a.positions[t]) * a.inv_freq[j];
        float s, c;
        sincosf(angle, &s, &c);
        s *= a.attention_factor, c *= a.attention_factor;
        const float x0 = x[j], x1 = x[j + half];
        x[j] = x0 * c - x1 * s;
        x[j + half] = x1 * c + x0 * s;
    }
}

constexpr int kMaxHeadDim = 2 * kMaxRotaryHalf;
constexpr int kRowsPerBlock = 8;  // one warp per (token, head) row

// RoPE of element d of a normalised row (in shared memory) by the pair's cosine and sine.
__device__ __forceinline__ float rotated(const float* row, int d, int half, float c, float s) {
    return d < half ? row[d] * c - row[d + half] * s : row[d] * c + row[d - half] * s;
}
// The pair's cosine and sine for element d < rotary_dim at position pos, as the reference computes them.
__device__ __forceinline__ void rope_angle(float pos, float inv_freq, float attention_factor, float& c, float& s) {
    sincosf(pos * inv_freq, &s, &c);
    s *= attention_factor, c *= attention_factor;
}

// What a lane needs of its row that no kernel writes (the row's slot and position, its elements' norm weights and
// rotation), worked out before the programmatic-launch wait in the kEarly instances (a.early_loads), for rows of at
// most 32 · kEarlyDims: the lane's elements d = lane + 32 i. After the wait the kernel then only reads the row itself.
// The rotation's frequencies come from the block's shared copy of a.inv_freq (see the kernel).
constexpr int kEarlyDims = 8;
struct EarlyRow {
    int64_t slot;
    float w[kEarlyDims], c[kEarlyDims], s[kEarlyDims];
};
__device__ __forceinline__ void early_row(const QkNormRopeArgs& a, const float* inv_freq, int64_t t, int h, int lane,
                                          EarlyRow& e) {
    e.slot = a.key_cache != nullptr ? a.slot_mapping[t] : -1;
    const bool is_q = h < a.Hq;
    const void* w = is_q ? a.q_weight : a.k_weight;
    const float pos = static_cast<float>(a.positions[t]);
    const int half = a.rotary_dim / 2;
#pragma unroll
    for (int i = 0; i < kEarlyDims; ++i) {
        const int d = lane + 32 * i;
        e.w[i] = 1.0f, e.c[i] = 1.0f, e.s[i] = 0.0f;
        if (d >= a.D) continue;
        if (a.norm && h < a.Hq + a.Hk) e.w[i] = norm_weight(w, a.weight_type, a.zero_centred, d);
        if (d < a.rotary_dim) rope_angle(pos, inv_freq[d < half ? d : d - half], a.attention_factor, e.c[i], e.s[i]);
    }
}

// The launch parameter's frequencies copied into the block's shared `inv_freq`, then a barrier (every thread of the
// block calls it): a kernel parameter indexed by lane is a constant-bank load a distinct address, a warp's 32 one
// after another, so lanes read the shared copy instead. It reads the launch parameter alone, so it may run before the
// programmatic-launch wait. (Until 2026-12-07 the early rows read a.inv_freq itself, 32 · 8 such loads a warp, when a
// 2,048-token prefill's QK-norm/RoPE ran at a quarter of its bytes' bandwidth.)
__device__ __forceinline__ void early_freqs(const QkNormRopeArgs& a, float* inv_freq) {
    for (int j = threadIdx.x; j < a.rotary_dim / 2; j += blockDim.x)
        inv_freq[j] = a.inv_freq[j];
    __syncthreads();
}

// A q or k row with its EarlyRow: the same expressions as the kernel below, in the same order.
template <typename C>
__device__ __forceinline__ void early_qk_row(const QkNormRopeArgs& a, const EarlyRow& e, float* x, float* row,
                                             C* cached, float k_inv_scale, int lane) {
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < kEarlyDims; ++i) {
        const int d = lane + 32 * i;
        if (d >= a.D) break;
        const float v = x[d];
        row[d] = v;
        ss += v * v;
    }
    if (a.norm) {
        const float scale = rsqrtf(warp_sum(ss) / static_cast<float>(a.D) + a.eps);
#pragma unroll
        for (int i = 0; i < kEarlyDims; ++i) {
            const int d = lane + 32 * i;
            if (d < a.D) row[d] = row[d] * scale * e.w[i];
        }
    }
    __syncwarp();
    const int half = a.rotary_dim / 2;
#pragma unroll
    for (int i = 0; i < kEarlyDims; ++i) {
        const int d = lane + 32 * i;
        if (d >= a.D) break;
        const float out = d < a.rotary_dim ? rotated(row, d, half, e.c[i], e.s[i]) : row[d];
        x[d] = out;
        if (cached) cached[d] = to_cache<C>(out, k_inv_scale);
    }
}

// One warp per row of q, k or (when storing to the caches) v: the row is normalised into the warp's shared row (the
// same expressions as rms_norm_kernel), then rotated from there back into place, so no lane reads what another one
// wrote; finished k rows and v rows also go to the caches. Rows of one token's heads are neighbouring warps.
template <typename C, bool kEarly>
__global__ void __launch_bounds__(kRowsPerBlock * 32) qk_norm_rope_kernel(QkNormRopeArgs a) {
    const bool store = a.key_cache != nullptr;
    const int heads = a.Hq + a.Hk + (store ? a.Hk : 0);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t index = blockIdx.x * int64_t(kRowsPerBlock) + warp;
    const bool hold = kEarly && a.D <= 32 * kEarlyDims;  // the same for the whole block
    const bool early = hold && index < a.T * heads;
    // Every lane reads the frequencies at its own index: from shared memory (early_freqs), before the wait where the
    // rows' early loads need them.
    __shared__ float inv_freq[kMaxRotaryHalf];
    if (hold) early_freqs(a, inv_freq);
    EarlyRow e;
    if (early) early_row(a, inv_freq, index / heads, static_cast<int>(index % heads), lane, e);
    PAGODA_KERNEL_PROLOGUE();
    __shared__ float rows[kRowsPerBlock][kMaxHeadDim];
    if (!hold) early_freqs(a, inv_freq);
    const int half = a.rotary_dim / 2;

    if (index >= a.T * heads) return;  // nothing block-wide follows
    const int64_t t = index / heads;
    const int h = static_cast<int>(index % heads);
    const int64_t slot = early ? e.slot : store ? a.slot_mapping[t] : -1;
    const bool stored = slot >= 0 && slot < a.num_slots;  // the runtime checked the range on the host
    if (h >= a.Hq + a.Hk) {                               // a v row: only stored
        if (!stored) return;
        const int hv = h - a.Hq - a.Hk;
        const float* x = a.v.data + t * a.v.stride_t + hv * a.v.stride_h;
        C* dst = static_cast<C*>(a.value_cache) + (slot * a.Hk + hv) * a.D;
        const float inv_scale = head_inv_scale(a.v_inv_scale, a.v_head_scale, hv);
        for (int d = lane; d < a.D; d += 32)
            dst[d] = to_cache<C>(x[d], inv_scale);
        return;
    }
    const bool is_q = h < a.Hq;
    const int hh = is_q ? h : h - a.Hq;
    const Rows& r = is_q ? a.q : a.k;
    float* x = r.data + t * r.stride_t + hh * r.stride_h;
    float* row = rows[warp];
    C* cached = !is_q && stored ? static_cast<C*>(a.key_cache) + (slot * a.Hk + hh) * a.D : nullptr;
    const float k_inv_scale = cached ? head_inv_scale(a.k_inv_scale, a.k_head_scale, hh) : 1.0f;
    if (early) return early_qk_row<C>(a, e, x, row, cached, k_inv_scale, lane);
    float ss = 0.0f;
    for (int d = lane; d < a.D; d += 32) {
        const float v = x[d];
        row[d] = v;
        ss += v * v;
    }
    if (a.norm) {
        const float scale = rsqrtf(warp_sum(ss) / static_cast<float>(a.D) + a.eps);
        const void* w = is_q ? a.q_weight : a.k_weight;
        for (int d = lane; d < a.D; d += 32)
            row[d] = row[d] * scale * norm_weight(w, a.weight_type, a.zero_centred, d);
    }
    __syncwarp();
    const float pos = static_cast<float>(a.positions[t]);
    for (int d = lane; d < a.D; d += 32) {
        float out = row[d];
        if (d < a.rotary_dim) {
            float c, s;
            rope_angle(pos, inv_freq[d < half ? d : d - half], a.attention_factor, c, s);
            out = rotated(row, d, half, c, s);
        }
        x[d] = out;
        if (cached) cached[d] = to_cache<C>(out, k_inv_scale);
    }
}

template <typename C>
__global__ void kv_write_kernel(KvWriteArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    const int64_t row = a.H_kv * a.D, n = a.T * row;
    C* kc = static_cast<C*>(a.key_cache);
    C* vc = static_cast<C*>(a.value_cache);
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t t = i / row, hd = i % row, h = hd / a.D, d = hd % a.D;
        const int64_t slot = a.slot_mapping[t];
        if (slot < 0 || slot >= a.num_slots) continue;  // the runtime checked the range on the host
        kc[slot * row + hd] = to_cache<C>(a.k.data[t * a.k.stride_t + h * a.k.stride_h + d],
                                          head_inv_scale(a.k_inv_scale, a.k_head_scale, h));
        vc[slot * row + hd] = to_cache<C>(a.v.data[t * a.v.stride_t + h * a.v.stride_h + d],
                                          head_inv_scale(a.v_inv_scale, a.v_head_scale, h));
    }
}

// One block: block 0 reduces k, block 1 v, over the stored rows. Once per layer in a server's life (the first stored
// step), so simplicity over speed.
constexpr int kAmaxThreads = 1024;
__global__ void __launch_bounds__(kAmaxThreads) kv_amax_kernel(KvWriteArgs a, float* amax) {
    PAGODA_KERNEL_PROLOGUE();
    const Rows& x = blockIdx.x == 0 ? a.k : a.v;
    const int64_t row = a.H_kv * a.D, n = a.T * row;
    float m = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const int64_t t = i / row, hd = i % row, h = hd / a.D, d = hd % a.D;
        if (a.slot_mapping[t] >= 0) m = fmaxf(m, fabsf(x.data[t * x.stride_t + h * x.stride_h + d]));
    }
    __shared__ float partial[kAmaxThreads / 32];
    m = warp_max(m);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x < 32) {
        m = warp_max(partial[threadIdx.x]);
        if (threadIdx.x == 0) amax[blockIdx.x] = m;
    }
}

}  // namespace

void launch_rope(const RopeArgs& a, cudaStream_t stream) {
    PAGODA_KERNEL_REQUIRE(a.rotary_dim > 0 && a.rotary_dim % 2 == 0 && a.rotary_dim / 2 <= kMaxRotaryHalf,
                          "rope: rotary_dim must be even and at most 512");
    const int64_t n = a.T * a.H * (a.rotary_dim / 2);
    if (n == 0) return;
    launch_kernel<rope_kernel>(grid_for(n, 256), 256, 0, stream, a);
    PAGODA_CUDA_CHECK_LAUNCH();
}

namespace {

template <typename C>
void launch_qk_norm_rope_as(const QkNormRopeArgs& a, unsigned blocks, cudaStream_t stream) {
    // The early instance for grids of one wave only (one_wave, common.cuh): it lost at 256 sequences and in prefill.
    if (a.early_loads && one_wave<qk_norm_rope_kernel<C, true>>(blocks, kRowsPerBlock * 32))
        launch_kernel<qk_norm_rope_kernel<C, true>>(blocks, kRowsPerBlock * 32, 0, stream, a);
    else
        launch_kernel<qk_norm_rope_kernel<C, false>>(blocks, kRowsPerBlock * 32, 0, stream, a);
    PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_qk_norm_rope(const QkNormRopeArgs& a, cudaStream_t stream) {
    PAGODA_KERNEL_REQUIRE(a.rotary_dim > 0 && a.rotary_dim % 2 == 0 && a.rotary_dim <= a.D && a.D <= kMaxHeadDim,
                          "qk_norm_rope: rotary_dim must be even and at most head_dim (at most 512)");
    if (a.T == 0) return;
    const int64_t rows = a.T * (a.Hq + a.Hk + (a.key_cache ? a.Hk : 0));
    const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
    switch (a.key_cache ? a.cache_type : ElemType::F32) {
        case ElemType::BF16:
            return launch_qk_norm_rope_as<__nv_bfloat16>(a, blocks, stream);
        case ElemType::F16:
            return launch_qk_norm_rope_as<__half>(a, blocks, stream);
        case ElemType::F8E4M3:
            return launch_qk_norm_rope_as<__nv_fp8_e4m3>(a, blocks, stream);
        default:
            return launch_qk_norm_rope_as<float>(a, blocks, stream);
    }
}

void launch_kv_write(const KvWriteArgs& a, cudaStream_t stream) {
    const int64_t n = a.T * a.H_kv * a.D;
    if (n == 0) return;
    const unsigned blocks = grid_for(n, 256);
    switch (a.cache_type) {
        case ElemType::BF16:
            launch_kernel<kv_write_kernel<__nv_bfloat16>>(blocks, 256, 0, stream, a);
            break;
        case ElemType::F16:
            launch_kernel<kv_write_kernel<__half>>(blocks, 256, 0, stream, a);
            break;
        case ElemType::F8E4M3:
            launch_kernel<kv_write_kernel<__nv_fp8_e4m3>>(blocks, 256, 0, stream, a);
            break;
        default:
            launch_kernel<kv_write_kernel<float>>(blocks, 256, 0, stream, a);
            break;
    }
    PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_kv_amax(const KvWriteArgs& a, float* amax, cudaStream_t stream) {
    launch_kernel<kv_amax_kernel>(2, kAmaxThreads, 0, stream, a, amax);
    PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::kernels::cuda
