// The gated delta rule, chunked form on tensor cores (TF32 mma.sync m16n8k8, fp32 accumulation): the math of the
// CPU's `chunked` (kernels/cpu/delta_net.cpp) in two kernels. Chunks of 64 tokens never cross sequences; the last
// chunk of a sequence may be partial (its rows past the end are zero, so they add nothing).
//
// 1. chunk_prepare, one block per (chunk, value head), all chunks of the step in parallel. With G = cumsum(g) in the
//    chunk, k̂/q̂ the (optionally L2-normalised) keys and queries and L[i,j] = β_i (k̂_i·k̂_j) e^{G_i−G_j} (i > j):
//    T = (I + L)⁻¹ by forward substitution, W = T diag(β e^G) K̂, U = T diag(β) V, and the intra-chunk attention
//    A[i,j] = (q̂_i·k̂_j) e^{G_i−G_j} (j <= i, zero above), all to the workspace, with per-row factors
//    fq_i = e^{G_i}·(q scale)·(q norm), fk_j = e^{G_last−G_j}·(k norm) and e^{G_i}.
// 2. chunk_state_pass, one block per (32 value columns, value head, sequence), sequential over the sequence's chunks:
//    V' = U − W S; O = diag(fq) Q S + A V'; S ← e^{G_last} S + (diag(fk) K)ᵀ V'. The state [dk, 32] lives in the
//    accumulator registers of the last product for the whole walk (read from its slot once, written once), with a
//    shared-memory copy as the B operand of the next chunk's products.
// Every exponent is <= 0 (G falls within a chunk), so nothing overflows; masks are applied before exp.
//
// Precision: the products round their operands to TF32 (10-bit mantissa, unit roundoff 2^-11 ≈ 4.9e-4) and accumulate
// in fp32; the state, the triangular solve and all scalings stay fp32. That is finer than the bf16 (2^-8) the model's
// projections produce q, k and v in, and finer than the bf16 products FLA's kernels use.
//
// Tiling: dk is padded with zeros to DK = 32, 64 or 128 (dk <= 128; larger dk runs the recurrent kernel, see
// delta_net.h); dv is cut into blocks of 32 columns, masked at the edge, so any dv works. Shared memory: chunk_prepare
// (64·(DK+4) + 2·64·68 + 5·64) floats = 70 KB at DK 128, within every supported part's 99 KB; chunk_state_pass
// (DK·40 + 64·40 + 4·64) floats = 31 KB.
#include "common/align.h"
#include "kernels/cuda/delta_net/delta_net_internal.cuh"
#include "kernels/cuda/device_caps.h"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kChunk = 64;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;  // warp w owns chunk rows 16w .. 16w+15 in the row-wise products
constexpr int kCols = 32;              // value columns per block of the state pass
constexpr int kLdT = kChunk + 4;       // row stride of the 64x64 shared tiles: conflict-free fragment loads
constexpr int kLdV = kCols + 8;        // 8 (not 4): the B-operand reads of the state and V' hit 32 banks

__device__ __forceinline__ uint32_t to_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

// c += a·b for one 16x8 tile over k = 8, operands in TF32. Fragments (PTX ISA, m16n8k8 .tf32), g = lane/4, t = lane%4:
// a = A(g, t), A(g+8, t), A(g, t+4), A(g+8, t+4); b = B(t, g), B(t+4, g); c = C(g, 2t), C(g, 2t+1), C(g+8, 2t),
// C(g+8, 2t+1).
__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// acc[nt] += Σ_{k < 8·ksteps} A(r, k) B(k, 8·nt + c) for one warp's 16 rows r and NT tiles of 8 columns c. A and B are
// element accessors (shared or global memory, scaled or masked as the caller needs); k-steps from `ksteps` on are
// skipped (a triangular operand), the bound being uniform over the warp.
template <int NT, int KSTEPS, class FA, class FB>
__device__ __forceinline__ void warp_mma(float (&acc)[NT][4], int ksteps, FA a_at, FB b_at) {
    const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;
    // Four k-steps in flight: enough loads to cover global-memory latency, few enough registers not to spill.
#pragma unroll 4
    for (int ks = 0; ks < KSTEPS; ++ks) {
        if (ks >= ksteps) break;
        const int k0 = 8 * ks;
        const uint32_t a[4] = {to_tf32(a_at(g, k0 + t)), to_tf32(a_at(g + 8, k0 + t)), to_tf32(a_at(g, k0 + t + 4)),
                               to_tf32(a_at(g + 8, k0 + t + 4))};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            const uint32_t b[2] = {to_tf32(b_at(k0 + t, 8 * nt + g)), to_tf32(b_at(k0 + t + 4, 8 * nt + g))};
            mma_tf32(acc[nt], a, b);
        }
    }
}

// Calls f(r, c, value) for each accumulator element of a warp's 16 x 8·NT tile (r, c relative to it).
template <int NT, class F>
__device__ __forceinline__ void for_each_acc(const float (&acc)[NT][4], F f) {
    const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        f(g, 8 * nt + 2 * t, acc[nt][0]);
        f(g, 8 * nt + 2 * t + 1, acc[nt][1]);
        f(g + 8, 8 * nt + 2 * t, acc[nt][2]);
        f(g + 8, 8 * nt + 2 * t + 1, acc[nt][3]);
    }
}

__device__ __forceinline__ bool valid_slot(const GatedDeltaRuleArgs& a, int s) {
    const int slot = a.seqs.state_slots[s];
    return slot >= 0 && slot < a.num_slots;
}

// Whether sequence s (len new tokens) runs here rather than in the recurrent kernel (delta_net.h).
__device__ __forceinline__ bool runs_chunked(const GatedDeltaRuleArgs& a, int s, int len) {
    return len >= a.chunked_min_tokens && valid_slot(a, s);
}

// Chunk c of the step, counting the chunks of the sequences that run chunked in order: its first token row t0 and
// length n. Each warp finds it on its own (32 sequences per round, a warp prefix sum of their chunk counts), so no
// barrier is needed. False past the last chunk (the grid is a bound).
__device__ bool locate_chunk(const GatedDeltaRuleArgs& a, int c, int& t0, int& n) {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    int base = 0;
    for (int s0 = 0; s0 < a.seqs.num_seqs; s0 += 32) {
        const int s = s0 + lane;
        int begin = 0, len = 0, count = 0;
        if (s < a.seqs.num_seqs) {
            begin = a.seqs.query_start_loc[s];
            len = a.seqs.query_start_loc[s + 1] - begin;
            if (runs_chunked(a, s, len)) count = (len + kChunk - 1) / kChunk;
        }
        int incl = count;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o) incl += y;
        }
        const int first = base + incl - count;  // this lane's sequence's first chunk
        const unsigned hit = __ballot_sync(0xffffffffu, c >= first && c < first + count);
        const int my_t0 = begin + kChunk * (c - first);
        const int my_n = min(kChunk, begin + len - my_t0);
        if (hit) {
            const int src = __ffs(hit) - 1;
            t0 = __shfl_sync(0xffffffffu, my_t0, src);
            n = __shfl_sync(0xffffffffu, my_n, src);
            return true;
        }
        base += __shfl_sync(0xffffffffu, incl, 31);
    }
    return false;
}

// The workspace's arrays for one step of T tokens (layout in gated_delta_rule_chunked_workspace_bytes).
struct ChunkWorkspace {
    float4* rowf;  // [T, Hv]: fq, fk, e^G, unused
    float* attn;   // [T, Hv, 64]
    float* w;      // [T, Hv, dk]
    float* u;      // [T, Hv, dv]
};

ChunkWorkspace split_workspace(void* base, int64_t T, int Hv, int dk) {
    const size_t rows = static_cast<size_t>(T) * Hv;
    char* p = static_cast<char*>(base);
    ChunkWorkspace ws;
    ws.rowf = reinterpret_cast<float4*>(p);
    p += align_up(rows * sizeof(float4), 256);
    ws.attn = reinterpret_cast<float*>(p);
    p += align_up(rows * kChunk * sizeof(float), 256);
    ws.w = reinterpret_cast<float*>(p);
    p += align_up(rows * dk * sizeof(float), 256);
    ws.u = reinterpret_cast<float*>(p);
    return ws;
}

template <int DK>
constexpr int prepare_smem_floats() {
    return kChunk * (DK + 4) + 2 * kChunk * kLdT + 5 * kChunk;
}

template <int DK>
__global__ void __launch_bounds__(kThreads) chunk_prepare_kernel(GatedDeltaRuleArgs a, ChunkWorkspace ws) {
    PAGODA_KERNEL_PROLOGUE();
    constexpr int kLdK = DK + 4;
    extern __shared__ float smem[];
    float* ks = smem;                // [64][kLdK] k̂ (normalised), zero past n and dk
    float* ls = ks + kChunk * kLdK;  // [64][kLdT] L (strictly lower)
    float* ts = ls + kChunk * kLdT;  // [64][kLdT] T = (I + L)⁻¹
    float* gs = ts + kChunk * kLdT;  // [64] G = cumsum(g), constant past n
    float* bs = gs + kChunk;         // [64] β, zero past n
    float* rq = bs + kChunk;         // [64] q scale · q norm factor
    float* rk = rq + kChunk;         // [64] k norm factor
    float* sw = rk + kChunk;         // [64] β e^G (W's row scale)

    int t0 = 0, n = 0;
    if (!locate_chunk(a, static_cast<int>(blockIdx.x), t0, n)) return;  // uniform over the block
    const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
    const int hv = static_cast<int>(blockIdx.y), kh = hv / (a.Hv / a.Hk);
    const int64_t Hv = a.Hv;

    // Gates and their cumulative sum (two warps scan 32 rows each; the second adds the first's total).
    if (tid < kChunk) {
        float g = 0.0f, beta = 0.0f;
        if (tid < n) {
            const int64_t t = t0 + tid;
            if (a.gate_a != nullptr) {
                g = delta_net::gdn_g(a.gate_a[t * a.gate_a_stride + hv], load_as_f32(a.a_log, a.a_log_type, hv),
                                     load_as_f32(a.dt_bias, a.dt_bias_type, hv));
                beta = sigmoid(a.gate_b[t * a.gate_b_stride + hv]);
            } else {
                g = a.g[t * a.g_stride + hv];
                beta = a.beta[t * a.beta_stride + hv];
            }
        }
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const float y = __shfl_up_sync(0xffffffffu, g, o);
            if (lane >= o) g += y;
        }
        gs[tid] = g;
        bs[tid] = beta;
    }
    // k̂ rows to shared memory and the q row factors: one warp per row, 16 rows per warp.
    for (int r = 16 * warp; r < 16 * warp + 16; ++r) {
        const bool row_ok = r < n;
        const float* kp = a.k.data + static_cast<int64_t>(t0 + r) * a.k.stride_t + kh * a.k.stride_h;
        const float* qp = a.q.data + static_cast<int64_t>(t0 + r) * a.q.stride_t + kh * a.q.stride_h;
        float kv[DK / 32], ssk = 0.0f, ssq = 0.0f;
#pragma unroll
        for (int e = 0; e < DK / 32; ++e) {
            const int d = lane + 32 * e;
            kv[e] = row_ok && d < a.dk ? kp[d] : 0.0f;
            const float qv = row_ok && d < a.dk ? qp[d] : 0.0f;
            ssk += kv[e] * kv[e];
            ssq += qv * qv;
        }
        const float fk = a.l2_norm_qk ? 1.0f / sqrtf(warp_sum(ssk) + a.l2_eps) : 1.0f;
        const float fq = a.l2_norm_qk ? 1.0f / sqrtf(warp_sum(ssq) + a.l2_eps) : 1.0f;
#pragma unroll
        for (int e = 0; e < DK / 32; ++e)
            ks[r * kLdK + lane + 32 * e] = kv[e] * fk;
        if (lane == 0) rq[r] = fq * a.q_scale, rk[r] = fk;
    }
    __syncthreads();
    if (tid >= 32 && tid < kChunk) gs[tid] += gs[31];
    __syncthreads();
    if (tid < kChunk) sw[tid] = bs[tid] * expf(gs[tid]);

    const int r0 = 16 * warp;  // this warp's rows of the row-wise products
    {
        // L = strictly lower β_i (k̂_i·k̂_j) e^{G_i−G_j}.
        float acc[8][4] = {};
        warp_mma<8, DK / 8>(
            acc, DK / 8, [&](int r, int d) { return ks[(r0 + r) * kLdK + d]; },
            [&](int d, int j) { return ks[j * kLdK + d]; });
        for_each_acc<8>(acc, [&](int r, int j, float v) {
            const int i = r0 + r;
            ls[i * kLdT + j] = i > j && i < n ? bs[i] * v * expf(gs[i] - gs[j]) : 0.0f;
        });
    }
    {
        // Intra-chunk attention A = causal (q̂_i·k̂_j) e^{G_i−G_j}, straight to the workspace; the q rows are read from
        // global memory (each once per block) and scaled afterwards.
        const float* qbase = a.q.data + static_cast<int64_t>(t0 + r0) * a.q.stride_t + kh * a.q.stride_h;
        float acc[8][4] = {};
        warp_mma<8, DK / 8>(
            acc, DK / 8, [&](int r, int d) { return r0 + r < n && d < a.dk ? qbase[r * a.q.stride_t + d] : 0.0f; },
            [&](int d, int j) { return ks[j * kLdK + d]; });
        for_each_acc<8>(acc, [&](int r, int j, float v) {
            const int i = r0 + r;
            if (i < n) ws.attn[((t0 + i) * Hv + hv) * kChunk + j] = j <= i ? rq[i] * v * expf(gs[i] - gs[j]) : 0.0f;
        });
    }
    // T = (I + L)⁻¹, row by row: T_i = e_i − Σ_{j<i} L_ij T_j, i.e. T[i][c] = −Σ_{c<=j<i} L[i][j] T[j][c] (T[c][c] =
    // 1). Two threads per column c split the sum over j. Rows past n stay e_i (their W and U rows are not stored).
    for (int e = tid; e < kChunk * kChunk; e += kThreads)
        ts[(e / kChunk) * kLdT + e % kChunk] = e / kChunk == e % kChunk ? 1.0f : 0.0f;
    __syncthreads();
    {
        const int c = tid >> 1, half = tid & 1;
        for (int i = 1; i < n; ++i) {
            float sum = 0.0f;
            if (c < i)
                for (int j = c + half; j < i; j += 2)
                    sum = fmaf(ls[i * kLdT + j], ts[j * kLdT + c], sum);
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            if (c < i && half == 0) ts[i * kLdT + c] = -sum;
            __syncthreads();
        }
    }
    // W = T diag(β e^G) K̂ and U = T diag(β) V; T is lower triangular, so rows r0.. need k < r0 + 16 only.
    const int tri_steps = 2 * (warp + 1);
    {
        float acc[DK / 8][4] = {};
        warp_mma<DK / 8, kChunk / 8>(
            acc, tri_steps, [&](int r, int j) { return ts[(r0 + r) * kLdT + j]; },
            [&](int j, int d) { return sw[j] * ks[j * kLdK + d]; });
        for_each_acc<DK / 8>(acc, [&](int r, int d, float v) {
            const int i = r0 + r;
            if (i < n && d < a.dk) ws.w[((t0 + i) * Hv + hv) * a.dk + d] = v;
        });
    }
    const float* vbase = a.v.data + static_cast<int64_t>(t0) * a.v.stride_t + hv * a.v.stride_h;
    for (int c0 = 0; c0 < a.dv; c0 += 64) {
        float acc[8][4] = {};
        warp_mma<8, kChunk / 8>(
            acc, tri_steps, [&](int r, int j) { return ts[(r0 + r) * kLdT + j]; },
            [&](int j, int c) { return j < n && c0 + c < a.dv ? bs[j] * vbase[j * a.v.stride_t + c0 + c] : 0.0f; });
        for_each_acc<8>(acc, [&](int r, int c, float v) {
            const int i = r0 + r;
            if (i < n && c0 + c < a.dv) ws.u[((t0 + i) * Hv + hv) * a.dv + c0 + c] = v;
        });
    }
    if (tid < n) {
        const float eg = expf(gs[tid]);
        ws.rowf[(t0 + tid) * Hv + hv] = make_float4(eg * rq[tid], expf(gs[n - 1] - gs[tid]) * rk[tid], eg, 0.0f);
    }
}

// How the state [DK, 32] is spread over the 4 warps as 16x8 accumulator tiles: MT = DK/16 row tiles; from DK = 64 on
// a warp holds MT/4 row tiles by all 4 column tiles, at DK = 32 two row tiles by two column tiles each.
template <int DK>
struct StateTiles {
    static constexpr int kMt = DK / 16;
    static constexpr int kWarpM = kMt >= 4 ? kMt / 4 : 1;
    static constexpr int kWarpN = kMt >= 4 ? 4 : 2;
    __device__ static int row0(int warp) { return 16 * kWarpM * (kMt >= 4 ? warp : warp >> 1); }
    __device__ static int col0(int warp) { return kMt >= 4 ? 0 : 16 * (warp & 1); }
};

template <int DK>
__global__ void __launch_bounds__(kThreads) chunk_state_pass_kernel(GatedDeltaRuleArgs a, ChunkWorkspace ws) {
    PAGODA_KERNEL_PROLOGUE();
    using Tiles = StateTiles<DK>;
    constexpr int kWm = Tiles::kWarpM, kWn = Tiles::kWarpN;
    __shared__ float ss[DK * kLdV];      // the state's columns, B operand of W S and Q S
    __shared__ float vn[kChunk * kLdV];  // V' of the chunk
    __shared__ float fq[2][kChunk], fk[2][kChunk];

    const int s = static_cast<int>(blockIdx.z), hv = static_cast<int>(blockIdx.y);
    const int begin = a.seqs.query_start_loc[s], end = a.seqs.query_start_loc[s + 1];
    if (!runs_chunked(a, s, end - begin)) return;  // uniform over the block
    const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int kh = hv / (a.Hv / a.Hk), col_base = kCols * static_cast<int>(blockIdx.x);
    const int64_t Hv = a.Hv;
    const bool fresh = a.seqs.seq_lens[s] == end - begin;
    float* S = a.state + (static_cast<int64_t>(a.seqs.state_slots[s]) * a.Hv + hv) * a.dk * a.dv;

    // The state tile of this warp in accumulator layout (rows d, columns c relative to the block's columns).
    const int d0 = Tiles::row0(warp), c0 = Tiles::col0(warp);
    float st[kWm][kWn][4];
    auto for_each_state = [&](auto f) {
#pragma unroll
        for (int m = 0; m < kWm; ++m)
#pragma unroll
            for (int nt = 0; nt < kWn; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    f(st[m][nt][e], d0 + 16 * m + g + 8 * (e >> 1), c0 + 8 * nt + 2 * t + (e & 1));
    };
    for_each_state([&](float& x, int d, int c) {
        x = !fresh && d < a.dk && col_base + c < a.dv ? S[static_cast<int64_t>(d) * a.dv + col_base + c] : 0.0f;
        ss[d * kLdV + c] = x;
    });

    const int r0 = 16 * warp;
    for (int t0 = begin, chunk = 0; t0 < end; t0 += kChunk, ++chunk) {
        const int n = min(kChunk, end - t0), par = chunk & 1;
        // Row factors, double-buffered: the buffer written here was last read two barriers ago.
        if (tid < kChunk) {
            const float4 f = tid < n ? ws.rowf[(t0 + tid) * Hv + hv] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            fq[par][tid] = f.x;
            fk[par][tid] = f.y;
        }
        const float decay = ws.rowf[(t0 + n - 1) * Hv + hv].z;  // e^{G_last}
        __syncthreads();                                        // ss (previous chunk's update), fq/fk ready; vn free

        // V' = U − W S and the inter-chunk part of O, diag(fq) Q S, for this warp's 16 rows.
        const int64_t row0 = (t0 + r0) * Hv + hv;  // workspace row of this warp's first chunk row
        float wsacc[4][4] = {}, oacc[4][4] = {};
        warp_mma<4, DK / 8>(
            wsacc, DK / 8,
            [&](int r, int d) { return r0 + r < n && d < a.dk ? ws.w[(row0 + r * Hv) * a.dk + d] : 0.0f; },
            [&](int d, int c) { return ss[d * kLdV + c]; });
        const float* qbase = a.q.data + static_cast<int64_t>(t0 + r0) * a.q.stride_t + kh * a.q.stride_h;
        warp_mma<4, DK / 8>(
            oacc, DK / 8, [&](int r, int d) { return r0 + r < n && d < a.dk ? qbase[r * a.q.stride_t + d] : 0.0f; },
            [&](int d, int c) { return ss[d * kLdV + c]; });
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = g + 8 * (e >> 1), c = 8 * nt + 2 * t + (e & 1);
                const bool ok = r0 + r < n && col_base + c < a.dv;
                const float u = ok ? ws.u[(row0 + r * Hv) * a.dv + col_base + c] : 0.0f;
                vn[(r0 + r) * kLdV + c] = ok ? u - wsacc[nt][e] : 0.0f;
                oacc[nt][e] *= fq[par][r0 + r];
            }
        __syncthreads();  // vn complete; every read of ss done

        // O += A V' (A causal: rows r0.. need columns < r0 + 16), then out.
        warp_mma<4, kChunk / 8>(
            oacc, 2 * (warp + 1),
            [&](int r, int j) { return r0 + r < n ? ws.attn[(row0 + r * Hv) * kChunk + j] : 0.0f; },
            [&](int j, int c) { return vn[j * kLdV + c]; });
        for_each_acc<4>(oacc, [&](int r, int c, float v) {
            if (r0 + r < n && col_base + c < a.dv)
                a.out.data[static_cast<int64_t>(t0 + r0 + r) * a.out.stride_t + hv * a.out.stride_h + col_base + c] = v;
        });

        // S ← e^{G_last} S + (diag(fk) K)ᵀ V': A(d, j) = fk_j k_j[d] read from global memory (raw k: fk holds the
        // norm), B = V'.
        for_each_state([&](float& x, int, int) { x *= decay; });
        const float* kbase = a.k.data + static_cast<int64_t>(t0) * a.k.stride_t + kh * a.k.stride_h;
#pragma unroll
        for (int m = 0; m < kWm; ++m) {
            const int dm = d0 + 16 * m;
            float(&acc)[kWn][4] = st[m];
            warp_mma<kWn, kChunk / 8>(
                acc, kChunk / 8,
                [&](int r, int j) {
                    return j < n && dm + r < a.dk ? fk[par][j] * kbase[j * a.k.stride_t + dm + r] : 0.0f;
                },
                [&](int j, int c) { return vn[j * kLdV + c0 + c]; });
        }
        for_each_state([&](float& x, int d, int c) { ss[d * kLdV + c] = x; });
    }
    for_each_state([&](float& x, int d, int c) {
        if (d < a.dk && col_base + c < a.dv) S[static_cast<int64_t>(d) * a.dv + col_base + c] = x;
    });
}

template <int DK>
void chunked_launch(const GatedDeltaRuleArgs& a, const ChunkWorkspace& ws, cudaStream_t stream) {
    const int64_t chunks = (a.num_tokens + kChunk - 1) / kChunk + a.seqs.num_seqs;  // a bound: one partial per seq
    constexpr int smem = prepare_smem_floats<DK>() * static_cast<int>(sizeof(float));
    static_assert(smem <= kLeastBlockSmem, "chunk_prepare must fit every supported GPU: no per-device variant");
    allow_dynamic_smem<chunk_prepare_kernel<DK>>(smem);
    launch_kernel<chunk_prepare_kernel<DK>>(dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(a.Hv)), kThreads,
                                            smem, stream, a, ws);
    PAGODA_CUDA_CHECK_LAUNCH();
    const dim3 grid(static_cast<unsigned>((a.dv + kCols - 1) / kCols), static_cast<unsigned>(a.Hv),
                    static_cast<unsigned>(a.seqs.num_seqs));
    launch_kernel_after<chunk_state_pass_kernel<DK>>(grid, kThreads, 0, stream, a, ws);  // as the recurrent one
    PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace

size_t gated_delta_rule_chunked_workspace_bytes(int64_t num_tokens, int Hv, int dk, int dv) {
    const size_t rows = static_cast<size_t>(num_tokens) * Hv;
    return align_up(rows * sizeof(float4), 256) + align_up(rows * kChunk * sizeof(float), 256) +
           align_up(rows * dk * sizeof(float), 256) + align_up(rows * dv * sizeof(float), 256);
}

void launch_gated_delta_rule_chunked(const GatedDeltaRuleArgs& a, void* workspace, cudaStream_t stream) {
    if (a.seqs.num_seqs == 0 || a.num_tokens == 0) return;
    PAGODA_KERNEL_REQUIRE(a.Hk > 0 && a.Hv % a.Hk == 0, "gated_delta_rule_chunked: Hv must be a multiple of Hk");
    PAGODA_KERNEL_REQUIRE(gated_delta_rule_chunked_supported(a.dk, a.dv),
                          "gated_delta_rule_chunked: dk must be in [1, 128]");
    PAGODA_KERNEL_REQUIRE(a.chunked_min_tokens >= 1, "gated_delta_rule_chunked: chunked_min_tokens must be >= 1");
    PAGODA_KERNEL_REQUIRE(workspace != nullptr, "gated_delta_rule_chunked: no workspace");
    PAGODA_KERNEL_REQUIRE(a.Hv <= 65535 && a.seqs.num_seqs <= 65535, "gated_delta_rule: too many heads or sequences");
    const ChunkWorkspace ws = split_workspace(workspace, a.num_tokens, a.Hv, a.dk);
    if (a.dk <= 32)
        chunked_launch<32>(a, ws, stream);
    else if (a.dk <= 64)
        chunked_launch<64>(a, ws, stream);
    else
        chunked_launch<128>(a, ws, stream);
}

}  // namespace pagoda::kernels::cuda
