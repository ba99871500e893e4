// The gated delta rule, recurrent form: per token S = e^g S; S += k ⊗ β(v − Sᵀk); o = Sᵀ(q·q_scale), with the fp32
// state [dk, dv] of one (sequence, value head) held in registers for the whole walk over the sequence's tokens, so
// the state is read and written exactly once per launch.
//
// Block = (32 state columns, value head, sequence); grid (ceil(dv/32), Hv, S). Lane l owns column j = 32·tile + l and
// warp w owns rows i = w + 8r (r < R), so the state loads and stores are 128-byte rows per warp. The two sums over dk
// per token (Sᵀk and Sᵀq) are per-thread partials summed over the warps through shared memory; the Sᵀq of a token and
// the Sᵀk of the next share one exchange, so a token costs one barrier. Columns are independent in the rule, which is
// what lets dv be split over blocks (4 blocks per head at dv = 128: a batch-1 decode of Qwen3.5-9B runs 128 blocks).
//
// q/k/v/g/beta are staged in shared memory TB tokens at a time; the next round's global loads are issued into
// registers before the current round is walked, so their latency hides behind it. The decode kernel is TB = 1 (one
// token per sequence: nothing to prefetch, small shared memory); the prefill kernel is TB = 16. Staging is where q
// and k get their optional fused L2 norm and q its scale, and where the optional fused gates are computed.
#include "kernels/cuda/delta_net/delta_net_internal.cuh"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kCols = 32;  // state columns per block: one per lane

template <int R, int TB>
struct DeltaRuleShape {
    static constexpr int kMaxDk = R * kWarps;                          // rows of the state a block can hold
    static constexpr int kVals = kMaxDk / 32;                          // q/k values per lane per staged row
    static constexpr int kStageRows = (2 * TB + kWarps - 1) / kWarps;  // q/k rows per warp per round
    static constexpr int kVPerThread = (TB * kCols + kThreads - 1) / kThreads;
};

template <int R, int TB>
__global__ void __launch_bounds__(kThreads) delta_rule_kernel(GatedDeltaRuleArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    using Shape = DeltaRuleShape<R, TB>;
    constexpr int kMaxDk = Shape::kMaxDk, kVals = Shape::kVals, kStageRows = Shape::kStageRows;
    constexpr int kVPer = Shape::kVPerThread;
    __shared__ float qs[TB][kMaxDk], ks[TB][kMaxDk];  // zero beyond dk, so padded rows add nothing
    __shared__ float vs[TB][kCols], gs[TB], bs[TB];
    __shared__ float red_kv[2][kWarps][kCols], red_o[2][kWarps][kCols];

    const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
    const int hv = blockIdx.y, s = blockIdx.z;
    const int j = blockIdx.x * kCols + lane;
    const bool col_ok = j < a.dv;
    const int begin = a.seqs.query_start_loc[s], end = a.seqs.query_start_loc[s + 1];
    const int slot = a.seqs.state_slots[s];
    if (slot < 0 || slot >= a.num_slots) return;                                  // uniform over the block
    if (a.chunked_min_tokens > 0 && end - begin >= a.chunked_min_tokens) return;  // the chunked kernels' sequence
    const bool fresh = a.seqs.seq_lens[s] == end - begin;
    const int kh = hv / (a.Hv / a.Hk);
    float* S = a.state + (static_cast<int64_t>(slot) * a.Hv + hv) * a.dk * a.dv;
    const bool fused_gates = a.gate_a != nullptr;
    const float a_log = fused_gates ? load_as_f32(a.a_log, a.a_log_type, hv) : 0.0f;
    const float dt_bias = fused_gates ? load_as_f32(a.dt_bias, a.dt_bias_type, hv) : 0.0f;

    float st[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const int i = warp + kWarps * r;
        st[r] = !fresh && col_ok && i < a.dk ? S[static_cast<int64_t>(i) * a.dv + j] : 0.0f;
    }

    // Registers holding the next round until it is committed to shared memory.
    float qk_reg[kStageRows][kVals];
    float v_reg[kVPer];
    float g_reg = 0.0f, b_reg = 0.0f;
    auto load = [&](int t0, int n) {
#pragma unroll
        for (int m = 0; m < kStageRows; ++m) {
            const int row = warp + kWarps * m;  // (token row >> 1) of q (even) or k (odd)
            const int u = row >> 1;
            const Rows& src = row & 1 ? a.k : a.q;
            const float* p = src.data + static_cast<int64_t>(t0 + u) * src.stride_t + kh * src.stride_h;
#pragma unroll
            for (int e = 0; e < kVals; ++e) {
                const int d = lane + 32 * e;
                qk_reg[m][e] = row < 2 * n && d < a.dk ? p[d] : 0.0f;
            }
        }
#pragma unroll
        for (int e = 0; e < kVPer; ++e) {
            const int u = (tid + kThreads * e) / kCols;
            v_reg[e] =
                u < n && col_ok ? a.v.data[static_cast<int64_t>(t0 + u) * a.v.stride_t + hv * a.v.stride_h + j] : 0.0f;
        }
        if (tid < n) {
            const int64_t t = t0 + tid;
            g_reg = fused_gates ? a.gate_a[t * a.gate_a_stride + hv] : a.g[t * a.g_stride + hv];
            b_reg = fused_gates ? a.gate_b[t * a.gate_b_stride + hv] : a.beta[t * a.beta_stride + hv];
        }
    };
    auto commit = [&](int n) {
#pragma unroll
        for (int m = 0; m < kStageRows; ++m) {
            const int row = warp + kWarps * m;
            if (row >= 2 * n) break;  // uniform over the warp
            const int u = row >> 1;
            float scale = 1.0f;
            if (a.l2_norm_qk) {
                float ss = 0.0f;
#pragma unroll
                for (int e = 0; e < kVals; ++e)
                    ss += qk_reg[m][e] * qk_reg[m][e];
                scale = 1.0f / sqrtf(warp_sum(ss) + a.l2_eps);
            }
            float* dst = row & 1 ? ks[u] : qs[u];
            if (!(row & 1)) scale *= a.q_scale;
#pragma unroll
            for (int e = 0; e < kVals; ++e)
                dst[lane + 32 * e] = qk_reg[m][e] * scale;
        }
#pragma unroll
        for (int e = 0; e < kVPer; ++e) {
            const int idx = tid + kThreads * e;
            if (idx < TB * kCols) vs[idx / kCols][idx % kCols] = v_reg[e];
        }
        if (tid < n) {
            gs[tid] = expf(fused_gates ? delta_net::gdn_g(g_reg, a_log, dt_bias) : g_reg);
            bs[tid] = fused_gates ? sigmoid(b_reg) : b_reg;
        }
    };

    if (end > begin) load(begin, min(TB, end - begin));
    // Per token (its index in the sequence is `step`): (1) kv = Σ_w red_kv[step&1], the partials of Sᵀk written before
    // the last barrier; (2) the update and this token's partial o = Sᵀq, then already the next token's decay and
    // partial Sᵀk from the new state; (3) both partials to shared memory, one barrier, warp 0 sums o. red_kv and red_o
    // are double-buffered by the token's parity, so a buffer is rewritten only two barriers after it was read. A round
    // adds two barriers: after the staging writes, and after the Sᵀk partial of its first token.
    int step = 0;
    for (int t0 = begin; t0 < end; t0 += TB) {
        const int n = min(TB, end - t0);
        // The previous round's last barrier ordered every read of the staging arrays before these writes.
        commit(n);
        __syncthreads();
        if (t0 + TB < end) load(t0 + TB, min(TB, end - t0 - TB));
        {
            const float decay = gs[0];
            float p0 = 0.0f, p1 = 0.0f;  // two chains: half the dependent FMAs on the per-token critical path
#pragma unroll
            for (int r = 0; r < R; ++r) {
                st[r] *= decay;
                float& p = r & 1 ? p1 : p0;
                p = fmaf(st[r], ks[0][warp + kWarps * r], p);
            }
            red_kv[step & 1][warp][lane] = p0 + p1;
        }
        __syncthreads();
        for (int u = 0; u < n; ++u, ++step) {
            float kv = 0.0f;
#pragma unroll
            for (int w = 0; w < kWarps; ++w)
                kv += red_kv[step & 1][w][lane];
            const float delta = bs[u] * (vs[u][lane] - kv);
            const bool more = u + 1 < n;
            const int un = more ? u + 1 : u;  // the next token's staging row (any row on the last: unused)
            const float decay = gs[un];
            float o0 = 0.0f, o1 = 0.0f, p0 = 0.0f, p1 = 0.0f;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const int i = warp + kWarps * r;
                st[r] = fmaf(ks[u][i], delta, st[r]);
                float& o = r & 1 ? o1 : o0;
                o = fmaf(st[r], qs[u][i], o);
                if (more) {
                    st[r] *= decay;
                    float& p = r & 1 ? p1 : p0;
                    p = fmaf(st[r], ks[un][i], p);
                }
            }
            red_o[step & 1][warp][lane] = o0 + o1;
            if (more) red_kv[(step + 1) & 1][warp][lane] = p0 + p1;
            __syncthreads();
            if (warp == 0 && col_ok) {
                float sum = 0.0f;
#pragma unroll
                for (int w = 0; w < kWarps; ++w)
                    sum += red_o[step & 1][w][lane];
                a.out.data[static_cast<int64_t>(t0 + u) * a.out.stride_t + hv * a.out.stride_h + j] = sum;
            }
        }
    }

    if (!col_ok) return;
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const int i = warp + kWarps * r;
        if (i < a.dk) S[static_cast<int64_t>(i) * a.dv + j] = st[r];
    }
}

template <int R>
void delta_rule_launch(const GatedDeltaRuleArgs& a, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>((a.dv + kCols - 1) / kCols), static_cast<unsigned>(a.Hv),
                    static_cast<unsigned>(a.seqs.num_seqs));
    if (a.num_tokens == a.seqs.num_seqs)
        launch_kernel<delta_rule_kernel<R, 1>>(grid, kThreads, 0, stream, a);
    else  // long-running blocks, fewer than the SMs: spread one to an SM (common.cuh)
        launch_kernel_after<delta_rule_kernel<R, 16>>(grid, kThreads, 0, stream, a);
    PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_gated_delta_rule(const GatedDeltaRuleArgs& a, cudaStream_t stream) {
    if (a.seqs.num_seqs == 0) return;
    PAGODA_KERNEL_REQUIRE(a.Hk > 0 && a.Hv % a.Hk == 0, "gated_delta_rule: Hv must be a multiple of Hk");
    PAGODA_KERNEL_REQUIRE(a.dk > 0 && a.dk <= kMaxDeltaRuleDk && a.dv > 0, "gated_delta_rule: dk must be in [1, 256]");
    PAGODA_KERNEL_REQUIRE(a.Hv <= 65535 && a.seqs.num_seqs <= 65535, "gated_delta_rule: too many heads or sequences");
    if (a.dk <= 32)
        delta_rule_launch<4>(a, stream);
    else if (a.dk <= 64)
        delta_rule_launch<8>(a, stream);
    else if (a.dk <= 128)
        delta_rule_launch<16>(a, stream);
    else
        delta_rule_launch<32>(a, stream);
}

}  // namespace pagoda::kernels::cuda
