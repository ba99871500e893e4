// The Hopper (sm_90a) form of the prefill attention kernel, on wgmma (prefill_attention.cu has the mma.sync one and the
// contract both keep). A block of 2 warpgroups owns 128 query tokens of one query head, 64 a warpgroup; K/V tiles of
// 128 keys (64 at head_dim 256) are gathered from the paged cache with cp.async into shared memory laid out as wgmma
// reads it (the 128-byte swizzle, wgmma_layout.h), the next tile loading while the current one is computed. Per tile
// and warpgroup: S = Q · Kᵀ with Q and K from shared memory (m64nKk16, K the tile's keys, D / 16 steps), the causal
// mask, the online softmax in base 2 on the accumulator registers (their layout is mma.sync's, so online_softmax
// serves both kernels), then O += P · V with P rounded to bf16 in registers as A and the V tile as an MN-major B
// (m64nDk16, a step per 16 keys). Q is rounded to bf16 once with the softmax scale, log2 e and K's scale folded in;
// V's scale is folded into the output. BF16 caches, head dims 64/128/256, on GPUs that run its sm_90a code
// (prefill_attention_wgmma_applies); PAGODA_PREFILL_ATTENTION=mma keeps the mma.sync kernel. Measured on an H100
// (session 41, 9ee1014's binaries, Qwen3-8B shape, 32 query / 8 KV heads, head_dim 128; two rounds alike): one layer's
// 2,048-token prefill 376 -> 194 us (91 -> 177 TFLOP/s, pagoda_op_bench), a 1,536 + 512 chunk 112 -> 67 us; the model's
// 2,048-token prefill 64.1 -> 58.5-60.5 ms (57.7 -> 61.1-63.8% MFU, pagoda_cuda_bench), 16,384 tokens 824 -> 672 ms.
// backend_ops_test's 51 attention cases and cuda_golden_test's 116 pass with it.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kernels/cuda/attention/attention_internal.cuh"
#include "kernels/cuda/attention/wgmma.cuh"
#include "kernels/cuda/attention/wgmma_layout.h"
#include "kernels/cuda/device_caps.h"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kWarpgroups = 2;  // a block: 128 query rows, so each K/V tile in shared memory serves 128 rows
constexpr int kThreads = 128 * kWarpgroups;
constexpr int kBlockQ = 64 * kWarpgroups;
constexpr int kStages = 2;  // K/V tiles in shared memory: one computed while the next one loads
static_assert(kWarpgroups == 2, "the stagger (below) pairs warpgroup 0 with warpgroup 1");

// Keys a tile: 128, or 64 at head_dim 256, whose output accumulator (128 floats a thread) leaves fewer registers for
// the scores. Shared memory: 161 KB at head_dim 128, 193 KB at 256, 81 KB at 64 (Hopper allows 227 KB a block).
template <int D>
constexpr int block_keys() {
    return D == 256 ? 64 : 128;
}
template <int D>
using Smem = wgmma::PrefillSmem<D, kBlockQ, block_keys<D>(), kStages>;

// Whether the code loaded for this device has the kernel's body: 1 in the sm_90a image only. Read once per device
// (wgmma_code_loaded): the kernel's own attributes cannot tell sm_90a code from plain sm_90 code.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ int wgmma_code = 1;
#else
__device__ int wgmma_code = 0;
#endif

// Its grid and blocks: prefill_grid and prefill_block (the query tiles with the most keys first).
template <int D>
__global__ void __launch_bounds__(kThreads, 1) prefill_attention_wgmma_kernel(PagedAttentionArgs a, SeqFilter filter) {
    PAGODA_KERNEL_PROLOGUE();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using S = Smem<D>;
    constexpr int kBlockK = block_keys<D>();
    constexpr int kStaggerBarrier = 1;                // a named barrier (0 is __syncthreads')
    constexpr int kChunks = D / 8;                    // 16-byte pieces of a row
    constexpr int kRowsPerPass = kThreads / kChunks;  // rows the block copies at once
    constexpr int kPasses = kBlockK / kRowsPerPass;
    static_assert(kPasses * kRowsPerPass == kBlockK, "a tile's rows in whole passes of the block");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    // The tiles start on a 1024-byte boundary (the swizzle's period; wgmma_layout.h): the base rounded up.
    const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
    const uint32_t base = (raw + wgmma::kAtomBytes - 1) & ~(wgmma::kAtomBytes - 1);
    unsigned char* smem = smem_raw + (base - raw);

    int s, h, kvh, q_begin, ctx, q0, rows;
    if (!prefill_block<kBlockQ>(a, filter, s, h, kvh, q_begin, ctx, q0, rows)) return;
    const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, c = lane & 3;
    const int wg_row0 = wg * 64;  // this warpgroup's first row in the block

    const int32_t* table = a.block_tables + int64_t(s) * a.max_blocks_per_seq;
    const int kv_end = ctx + q0 + rows;  // keys the block's last row sees
    const int num_tiles = (kv_end + kBlockK - 1) / kBlockK;
    // Thread tid copies chunk tid % kChunks of rows tid / kChunks + kRowsPerPass * p of K and V; zeros past the end
    // (0 · NaN would poison a sum).
    const int copy_row = tid / kChunks, copy_chunk = tid % kChunks;
    const auto* key_cache = static_cast<const __nv_bfloat16*>(a.key_cache);
    const auto* value_cache = static_cast<const __nv_bfloat16*>(a.value_cache);
    auto load_tile = [&](int tile, int stage) {
        int64_t off[kPasses];
        kv_row_offsets<kPasses, kRowsPerPass>(table, a.block_size, a.H_kv * D, kvh * D + copy_chunk * 8,
                                              tile * kBlockK + copy_row, kv_end, off);
#pragma unroll
        for (int p = 0; p < kPasses; ++p) {
            const bool valid = off[p] >= 0;
            const uint32_t at = wgmma::chunk_offset(kBlockK, copy_row + p * kRowsPerPass, copy_chunk);
            cp_async16(smem + S::k_tile(stage) + at, key_cache + (valid ? off[p] : 0), valid);
            cp_async16(smem + S::v_tile(stage) + at, value_cache + (valid ? off[p] : 0), valid);
        }
    };
#pragma unroll
    for (int st = 0; st < kStages - 1; ++st) {
        if (st < num_tiles) load_tile(st, st);
        cp_async_commit();
    }

    // Q, rounded to bf16 once, in the swizzled layout; rows past the chunk's end are zeros.
    const float q_scale = a.scale * 1.4426950408889634f * head_scale(a.k_scale, a.k_head_scale, kvh);  // base 2
    for (int i = tid; i < kBlockQ * kChunks; i += kThreads) {
        const int r = i / kChunks, ch = i % kChunks;
        uint32_t w[4] = {0, 0, 0, 0};
        if (r < rows) {
            const float* src = a.q.data + int64_t(q_begin + q0 + r) * a.q.stride_t + int64_t(h) * a.q.stride_h + ch * 8;
#pragma unroll
            for (int e = 0; e < 4; ++e)
                w[e] = pack(src[2 * e] * q_scale, src[2 * e + 1] * q_scale);
        }
        *reinterpret_cast<uint4*>(smem + wgmma::chunk_offset(kBlockQ, r, ch)) = make_uint4(w[0], w[1], w[2], w[3]);
    }
    fence_proxy_async_shared();  // the first tile's barrier below then publishes Q to every warpgroup's wgmma

    // Descriptors of this warpgroup's 64 Q rows (A) and of stage 0's K (B, K-major) and V (B, MN-major) tiles; a
    // wgmma's own slice is a fixed byte step from them.
    const uint64_t q_desc =
        wgmma::descriptor(base + wgmma::k_major_start(kBlockQ, wg_row0, 0), wgmma::kKMajorLbo, wgmma::kKMajorSbo);
    const uint64_t k_desc = wgmma::descriptor(base + S::k_tile(0), wgmma::kKMajorLbo, wgmma::kKMajorSbo);
    const uint64_t v_desc = wgmma::descriptor(base + S::v_tile(0), wgmma::mn_major_lbo(kBlockK), wgmma::kMnMajorSbo);
    constexpr uint32_t kStageBytes = S::k_tile(1) - S::k_tile(0);

    // This thread's two rows (of its warp's 16) and the keys each may see.
    const int r_a = wg_row0 + warp * 16 + g, r_b = r_a + 8;
    const int lim_a = ctx + q0 + r_a + 1, lim_b = ctx + q0 + r_b + 1;
    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; ++i)
        o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float sc[kBlockK / 8][4];
#pragma unroll
    for (int n = 0; n < kBlockK / 8; ++n)
        sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;

    for (int tile = 0; tile < num_tiles; ++tile) {
        cp_async_wait<kStages - 2>();  // this thread's copies of `tile` have landed,
        fence_proxy_async_shared();    // are visible to wgmma,
        __syncthreads();               // and so are everyone's; the stage about to be refilled is consumed
        const int k0 = tile * kBlockK;
        // Warpgroup 1 starts its S once warpgroup 0's is done (named barrier 1, once a tile whatever either computes:
        // warpgroup 0 arrives, warpgroup 1 waits): its S then runs on the tensor cores while warpgroup 0's softmax
        // runs, and warpgroup 0's P · V while its own softmax runs. In step, both softmaxes would leave the tensor
        // cores idle; the tile's barrier above realigns the two each tile.
        if (wg == 1) named_barrier_sync(kStaggerBarrier, kThreads);
        // Nothing to compute where the warpgroup's rows are all past the chunk's end or the whole tile is in their
        // future (the same for the whole warpgroup, as its wgmma instructions require).
        const bool computes = wg_row0 < rows && k0 < ctx + q0 + wg_row0 + 64;
        const uint32_t stage_bytes = uint32_t(tile % kStages) * kStageBytes;
        // The copies of the tile kStages - 1 ahead: every thread issues its share, after its warpgroup's S is on the
        // tensor cores where the warpgroup computes this tile, so that their address work (~180 instructions a thread
        // at head_dim 128) runs beside the S and not before it as it did.
        auto load_next_tile = [&] {
            if (tile + kStages - 1 < num_tiles) load_tile(tile + kStages - 1, (tile + kStages - 1) % kStages);
            cp_async_commit();
        };
        // One branch on `computes`, the S's issue and its wait both on its one side. Until session 46 the issue sat
        // in one branch on it and the wait after `if (!computes) continue;` in another: ptxas took them for a path
        // that issues the S and skips its wait, and serialized every wgmma of the kernel (its "Potential Performance
        // Loss" C7518 in the build log; in the SASS a wait after each HGMMA, so the 8 steps of an S or a P · V ran
        // one at a time and the copies' address work ran after the S, not beside it). Now each chain of 8 is issued
        // back to back with one wait (SASS of the 90a build); not yet timed on a GPU.
        if (!computes) {
            if (wg == 0) named_barrier_arrive(kStaggerBarrier, kThreads);
            load_next_tile();
            continue;
        }
        wgmma_hold(sc);  // the softmax's writes of sc come before the fence
        wgmma_fence();
#pragma unroll
        for (int kd = 0; kd < D / 16; ++kd)
            wgmma_ss<kBlockK>(sc, wgmma::advance(q_desc, wgmma::k_major_start(kBlockQ, 0, kd)),
                              wgmma::advance(k_desc, stage_bytes + wgmma::k_major_start(kBlockK, 0, kd)), kd > 0);
        wgmma_commit();
        load_next_tile();
        wgmma_wait<0>();
        wgmma_hold(sc);
        if (wg == 0) named_barrier_arrive(kStaggerBarrier, kThreads);

        // Causal mask, where some key of the tile is past some row of the warp's (its first row sees the fewest).
        if (k0 + kBlockK > ctx + q0 + wg_row0 + warp * 16 + 1) {
            mask_keys_from(sc, k0, c, lim_a, lim_b);
        }
        rescale_rows(o, online_softmax(sc, m_a, m_b, l_a, l_b));

        // P as the A operand, 16 keys a step: the accumulator blocks 2j and 2j + 1 are the m16n8k16 A fragment.
        uint32_t pa[kBlockK / 16][4];
#pragma unroll
        for (int j = 0; j < kBlockK / 16; ++j) {
            pa[j][0] = pack(sc[2 * j][0], sc[2 * j][1]);
            pa[j][1] = pack(sc[2 * j][2], sc[2 * j][3]);
            pa[j][2] = pack(sc[2 * j + 1][0], sc[2 * j + 1][1]);
            pa[j][3] = pack(sc[2 * j + 1][2], sc[2 * j + 1][3]);
        }
        wgmma_hold(o);  // the rescaled o and the packed P come before the fence
        wgmma_hold(pa);
        wgmma_fence();
#pragma unroll
        for (int j = 0; j < kBlockK / 16; ++j)
            wgmma_rs_mn<D>(o, pa[j], wgmma::advance(v_desc, stage_bytes + wgmma::mn_major_start(j)));
        wgmma_commit();
        wgmma_wait<0>();  // before the next tile's barrier lets its stage be refilled
        wgmma_hold(o);
        wgmma_hold(pa);
    }
    cp_async_wait<0>();

    store_prefill_rows<D>(a, o, l_a, l_b, kvh, q_begin + q0, h, r_a, r_b, rows, c);
#else
    __trap();  // not sm_90a code: the launcher never starts it (wgmma_code_loaded)
#endif
}

template <int D>
void launch_d(const PagedAttentionArgs& a, SeqFilter filter, cudaStream_t stream) {
    constexpr size_t bytes = Smem<D>::kBytes;
    constexpr auto kernel = prefill_attention_wgmma_kernel<D>;
    PAGODA_KERNEL_REQUIRE(bytes <= size_t(max_block_smem()), "prefill attention (wgmma): the tile does not fit");
    allow_dynamic_smem<kernel>(int(bytes));
    launch_kernel<kernel>(prefill_grid<kBlockQ>(a), kThreads, bytes, stream, a, filter);
}

// PAGODA_PREFILL_ATTENTION: unset, this kernel where it applies; "mma", the mma.sync kernel everywhere (to compare
// them); "wgmma", this one, saying so where the GPU has no code for it. Read once.
enum class Choice { Default, Mma, Wgmma };
Choice wgmma_choice() {
    static const Choice choice = [] {
        const char* env = std::getenv("PAGODA_PREFILL_ATTENTION");
        if (env == nullptr) return Choice::Default;
        return std::strcmp(env, "mma") == 0     ? Choice::Mma
               : std::strcmp(env, "wgmma") == 0 ? Choice::Wgmma
                                                : Choice::Default;
    }();
    return choice;
}

// Whether the current device runs the sm_90a image of this file (wgmma_code above): 1 yes, 0 no (a Hopper GPU given
// other code, a build without 90a or the compute_80 PTX, and other GPUs), asked once per device. The copy is
// synchronous, so it is not made while `stream` is being captured into a CUDA graph: -1, not known, for that launch
// (the mma.sync kernel); a step outside capture (the engine's warm-up runs prefill eagerly) asks.
int wgmma_code_loaded(cudaStream_t stream) {
    static std::atomic<int> known[64] = {};  // per device: 0 not asked yet, 1 no, 2 yes
    int device = 0;
    PAGODA_CUDA_CHECK(cudaGetDevice(&device));
    std::atomic<int>* slot = device < 64 ? &known[device] : nullptr;
    if (slot)
        if (const int v = slot->load(std::memory_order_relaxed); v > 0) return v - 1;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    PAGODA_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
    if (capture != cudaStreamCaptureStatusNone) return -1;
    int major = 0, minor = 0, flag = 0;
    PAGODA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    PAGODA_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    if (major == 9 && minor == 0) PAGODA_CUDA_CHECK(cudaMemcpyFromSymbol(&flag, wgmma_code, sizeof(flag)));
    const int loaded = flag == 1 ? 1 : 0;
    if (slot) slot->store(loaded + 1, std::memory_order_relaxed);
    return loaded;
}

}  // namespace

bool prefill_attention_wgmma_applies(const PagedAttentionArgs& a, cudaStream_t stream) {
    if (wgmma_choice() == Choice::Mma || a.cache_type != ElemType::BF16 || !(a.D == 64 || a.D == 128 || a.D == 256) ||
        forced_kernel_family() != nullptr)
        return false;
    const int loaded = wgmma_code_loaded(stream);
    if (loaded == 0 && wgmma_choice() == Choice::Wgmma) {
        // Asked for on a GPU without its code (not Hopper, or a build without sm_90a): said once, so that a test run
        // with the switch cannot pass on the other kernel unnoticed.
        static std::once_flag said;
        std::call_once(said, [] {
            std::fprintf(stderr,
                         "PAGODA_PREFILL_ATTENTION=wgmma: no sm_90a code runs on this GPU; prefill "
                         "attention takes the mma.sync kernel\n");
        });
    }
    return loaded == 1;
}

void launch_prefill_attention_wgmma(const PagedAttentionArgs& a, SeqFilter filter, cudaStream_t stream) {
    switch (a.D) {
        case 64:
            launch_d<64>(a, filter, stream);
            break;
        case 128:
            launch_d<128>(a, filter, stream);
            break;
        default:
            launch_d<256>(a, filter, stream);
            break;
    }
}

}  // namespace pagoda::kernels::cuda
