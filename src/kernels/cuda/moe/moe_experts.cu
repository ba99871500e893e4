// The routed experts: x is rounded to the weights' type once, the routing (pairs sorted by expert) is built on the
// device, two grouped passes compute every (token, slot) pair's expert output into its own row, and a last kernel
// sums each token's k rows in slot order (deterministic, no float atomics).
#include <algorithm>
#include <cstdlib>

#include "common/align.h"
#include "kernels/cuda/gemm/gemv.h"
#include "kernels/cuda/moe/moe_internal.cuh"

namespace pagoda::kernels::cuda {

namespace {

using moe::Routing;

constexpr int kRoutingThreads = 1024;
static_assert(kMoeMaxExperts <= kRoutingThreads, "the routing scan gives each expert one thread");

// Exclusive prefix sum over the block (blockDim.x == kRoutingThreads); `total` gets the sum of all.
__device__ int block_exclusive_scan(int v, int& total) {
    __shared__ int warp_totals[kRoutingThreads / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int inclusive = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int n = __shfl_up_sync(0xffffffffu, inclusive, o);
        if (lane >= o) inclusive += n;
    }
    __syncthreads();  // warp_totals may still be read by a previous call
    if (lane == 31) warp_totals[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        int t = warp_totals[lane];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int n = __shfl_up_sync(0xffffffffu, t, o);
            if (lane >= o) t += n;
        }
        warp_totals[lane] = t;  // inclusive over warps
    }
    __syncthreads();
    total = warp_totals[kRoutingThreads / 32 - 1];
    return inclusive - v + (warp > 0 ? warp_totals[warp - 1] : 0);
}

__global__ void __launch_bounds__(kRoutingThreads) routing_kernel(const int32_t* ids, int64_t pairs, Routing r) {
    PAGODA_KERNEL_PROLOGUE();
    __shared__ int count[kMoeMaxExperts], next[kMoeMaxExperts];
    const int e = threadIdx.x;
    if (e < r.E) count[e] = 0;
    __syncthreads();
    // Ids of experts not held here (outside [first_expert, first_expert + E)) are left out.
    const auto local = [&r](int32_t id) { return static_cast<int>(int64_t(id) - r.first_expert); };
    const auto here = [&r](int32_t id) { return id >= r.first_expert && id - r.first_expert < r.E; };
    for (int64_t i = threadIdx.x; i < pairs; i += blockDim.x) {
        const int32_t id = ids[i];
        if (here(id)) atomicAdd(&count[local(id)], 1);
    }
    __syncthreads();
    const int c = e < r.E ? count[e] : 0;
    int rows_total = 0, tiles_total = 0;
    const int row0 = block_exclusive_scan(c, rows_total);
    const int tile0 = block_exclusive_scan((c + r.tile_rows - 1) / r.tile_rows, tiles_total);
    if (e < r.E) {
        next[e] = row0;
        r.expert_offsets[e] = row0;
        r.tile_offsets[e] = tile0;
    }
    if (e == 0) {
        r.expert_offsets[r.E] = rows_total;
        r.tile_offsets[r.E] = tiles_total;
    }
    __syncthreads();
    // The order within an expert depends on the atomics; the results do not (every row is computed on its own).
    for (int64_t i = threadIdx.x; i < pairs; i += blockDim.x) {
        const int32_t id = ids[i];
        if (here(id)) r.sorted_pairs[atomicAdd(&next[local(id)], 1)] = static_cast<int32_t>(i);
    }
}

// out[t, c] = Σ_j w[t, j] · y[t*k + j, c] in slot order, skipping experts not held here, outside [first, first + E)
// (their rows were not written).
__global__ void reduce_kernel(const float* y, const float* weights, const int32_t* ids, int64_t H, int64_t k,
                              int64_t first, int64_t E, float* out, int64_t out_stride) {
    PAGODA_KERNEL_PROLOGUE();
    const int64_t t = blockIdx.x;
    const int64_t c = blockIdx.y * int64_t(blockDim.x) + threadIdx.x;
    if (c >= H) return;
    float acc = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
        const int64_t e = int64_t(ids[t * k + j]) - first;
        if (e >= 0 && e < E) acc += weights[t * k + j] * y[(t * k + j) * H + c];
    }
    out[t * out_stride + c] = acc;
}

// The workspace, carved in one order by both functions below.
struct Workspace {
    void* x_w;  // [T, H] in the weights' type
    void* h;    // [T*k, I] in the weights' type
    float* y;   // [T*k, H]
    int32_t *sorted_pairs, *expert_offsets, *tile_offsets;
    size_t bytes;
};
Workspace carve(char* base, int64_t T, int64_t H, int64_t I, int64_t E, int64_t k) {
    const auto pairs = static_cast<size_t>(T * k);
    Workspace w{};
    size_t off = 0;
    auto take = [&](size_t bytes) {
        char* p = base ? base + off : nullptr;
        off += align_up(bytes, 256);
        return p;
    };
    w.x_w = take(static_cast<size_t>(T * H) * 2);
    w.h = take(pairs * static_cast<size_t>(I) * 2);
    w.y = reinterpret_cast<float*>(take(pairs * static_cast<size_t>(H) * 4));
    w.sorted_pairs = reinterpret_cast<int32_t*>(take(pairs * 4));
    w.expert_offsets = reinterpret_cast<int32_t*>(take(static_cast<size_t>(E + 1) * 4));
    w.tile_offsets = reinterpret_cast<int32_t*>(take(static_cast<size_t>(E + 1) * 4));
    w.bytes = off;
    return w;
}

// Few rows per expert on average (decode, small batches): the GEMV kernels stream each selected expert's weights
// once per tile of 8 rows; more rows: the tensor-core GEMM, whose 64-row tiles waste less there than the GEMV's
// scalar math costs. Measured on an H200 at Qwen3-30B-A3B's shape (pagoda_op_bench --table qwen3-30b-a3b, both
// passes at each batch size, 2026-12-04): GEMV 197 / 315 / 464 / 695 us at 8 / 16 / 32 / 64 tokens (1 / 1 / 2 / 4
// pairs an expert), the GEMM 237 / 351 / 461 / 497 us: they cross at 2. PAGODA_MOE_GEMV_ROWS=N moves the crossing
// point, so op_bench can time both kinds of pass at one batch size.
constexpr int64_t kGemvMaxRowsPerExpert = 2;

int64_t gemv_max_rows_per_expert() {
    static const int64_t rows = [] {
        const char* env = std::getenv("PAGODA_MOE_GEMV_ROWS");
        return env ? std::max<int64_t>(0, std::atoll(env)) : kGemvMaxRowsPerExpert;
    }();
    return rows;
}

}  // namespace

namespace moe {
void launch_routing(const int32_t* topk_ids, int64_t pairs, const Routing& r, cudaStream_t stream) {
    launch_kernel<routing_kernel>(1, kRoutingThreads, 0, stream, topk_ids, pairs, r);
    PAGODA_CUDA_CHECK_LAUNCH();
}
}  // namespace moe

namespace {
// The grouped passes' args for the stacks, int4 and fp8 ones' quantization included (the rest is filled per call).
moe::GroupedArgs quant_gemv_args(const MoeExpertsArgs& a, moe::Pass pass, const void* in) {
    moe::GroupedArgs g;
    g.a = in;
    g.int4 = a.int4;
    g.fp8 = !a.int4 && a.weight_type == ElemType::F8E4M3;
    if (pass == moe::Pass::GateUp)
        g.w = a.gate_up, g.K = a.H, g.N = a.I, g.quant = {a.gate_up_scales, a.gate_up_zeros, a.int4_round_to};
    else
        g.w = a.down, g.K = a.I, g.N = a.H, g.quant = {a.down_scales, a.down_zeros, a.int4_round_to};
    return g;
}

// Whether the grouped GEMV passes take the call (few rows per expert) with these quantized stacks; their inputs lie
// in the 256-byte aligned workspace.
bool quant_gemv_fits(const MoeExpertsArgs& a) {
    const auto* aligned = reinterpret_cast<const void*>(uintptr_t{256});
    const moe::GroupedArgs gu = quant_gemv_args(a, moe::Pass::GateUp, aligned);
    const moe::GroupedArgs dn = quant_gemv_args(a, moe::Pass::Down, aligned);
    const bool fits = a.int4 ? moe::int4_gemv_fits(gu) && moe::int4_gemv_fits(dn)
                             : moe::fp8_gemv_fits(gu, 2 * a.I) && moe::fp8_gemv_fits(dn, a.H);
    return a.T * a.k <= gemv_max_rows_per_expert() * a.E && a.I > 0 && fits;
}

// Whether the mma passes take these quantized stacks (many rows per expert: prefill).
bool quant_mma_fits(const MoeExpertsArgs& a) {
    const auto* aligned = reinterpret_cast<const void*>(uintptr_t{256});
    return a.I > 0 && moe::quant_mma_fits(quant_gemv_args(a, moe::Pass::GateUp, aligned), moe::Pass::GateUp) &&
           moe::quant_mma_fits(quant_gemv_args(a, moe::Pass::Down, aligned), moe::Pass::Down);
}
}  // namespace

bool moe_experts_read_fp8(const MoeExpertsArgs& a) {
    if (a.int4 || a.weight_type != ElemType::F8E4M3) return false;
    return moe::take_pair_passes(a) || quant_gemv_fits(a) || quant_mma_fits(a);
}

bool moe_experts_read_int4(const MoeExpertsArgs& a) {
    if (!a.int4 || a.weight_type != ElemType::BF16) return false;
    return moe::take_pair_passes(a) || quant_gemv_fits(a) || quant_mma_fits(a);
}

size_t moe_experts_workspace_bytes(int64_t T, int64_t H, int64_t I, int64_t E, int64_t k) {
    return carve(nullptr, T, H, I, E, k).bytes;
}

void launch_moe_experts(const MoeExpertsArgs& a, cudaStream_t stream) {
    PAGODA_KERNEL_REQUIRE(a.E >= 1 && a.E <= kMoeMaxExperts && a.k >= 1 && a.first_expert >= 0,
                          "moe_experts: E, k or first_expert out of range");
    PAGODA_KERNEL_REQUIRE(a.int4 ? moe_experts_read_int4(a)
                                 : a.weight_type == ElemType::BF16 || a.weight_type == ElemType::F16 ||
                                       (a.weight_type == ElemType::F8E4M3 && moe_experts_read_fp8(a)),
                          "moe_experts: expert weights must be BF16 or F16 (fp8 and int4 ones where "
                          "moe_experts_read_fp8 / moe_experts_read_int4)");
    PAGODA_KERNEL_REQUIRE(a.T * a.k < (int64_t{1} << 31), "moe_experts: too many (token, slot) pairs");
    if (a.T == 0 || a.H == 0) return;
    const int64_t pairs = a.T * a.k;
    const Workspace ws = carve(static_cast<char*>(a.workspace), a.T, a.H, a.I, a.E, a.k);
    if (moe::take_pair_passes(a)) return moe::launch_pair_passes(a, ws.h, stream);
    // The passes' inputs and h in the weights' 16-bit type; bf16 for fp8 stacks (int4 ones come as BF16 already).
    const ElemType compute = a.weight_type == ElemType::F8E4M3 ? ElemType::BF16 : a.weight_type;
    launch_convert_rows(a.x, a.x_stride, ws.x_w, compute, a.T, a.H, stream);

    const bool gemv = pairs <= gemv_max_rows_per_expert() * a.E;
    Routing r{ws.sorted_pairs,
              ws.expert_offsets,
              ws.tile_offsets,
              static_cast<int32_t>(a.E),
              static_cast<int32_t>(a.k),
              gemv ? moe::kGemvRows : moe::kMmaRows,
              a.first_expert};
    moe::launch_routing(a.topk_ids, pairs, r, stream);

    moe::GroupedArgs g;
    g.routing = r;
    g.h = ws.h;
    g.y = ws.y;
    g.tiles = moe::max_tiles(pairs, a.E, r.tile_rows);
    auto run = [&](moe::Pass pass) {
        if (gemv)
            moe::launch_grouped_gemv(pass, g, compute, stream);
        else
            moe::launch_grouped_mma(pass, g, compute, stream);
    };
    const auto pass_args = [&](moe::Pass pass, const void* in) {
        moe::GroupedArgs p = quant_gemv_args(a, pass, in);
        p.routing = g.routing, p.h = g.h, p.y = g.y, p.tiles = g.tiles;
        g = p;
    };
    if (a.I > 0) {
        pass_args(moe::Pass::GateUp, ws.x_w);
        run(moe::Pass::GateUp);
    }
    pass_args(moe::Pass::Down, ws.h);
    if (a.I > 0) {
        run(moe::Pass::Down);
    } else {  // an empty dot: every expert output is zero
        PAGODA_CUDA_CHECK(cudaMemsetAsync(ws.y, 0, static_cast<size_t>(pairs * a.H) * 4, stream));
    }

    constexpr int kThreads = 256;
    const dim3 grid(static_cast<unsigned>(a.T), static_cast<unsigned>((a.H + kThreads - 1) / kThreads));
    launch_kernel<reduce_kernel>(grid, kThreads, 0, stream, ws.y, a.topk_weights, a.topk_ids, a.H, a.k, a.first_expert,
                                 a.E, a.out, a.out_stride);
    PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::kernels::cuda
