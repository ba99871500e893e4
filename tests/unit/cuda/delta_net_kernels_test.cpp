// The Gated DeltaNet CUDA kernels (kernels/cuda/delta_net) against the CPU kernels on fresh random data: decode-only
// batches, a 1,000-token prefill, mixed prefill + decode batches, continuation from a non-zero state next to
// sequences without cached context, GQA, Qwen3.5-9B sizes and small odd ones, strided q/k/v/out views. Outputs are
// poisoned with NaN first; outputs and updated states are compared (max|Δ| / max|ref|; NaN never passes). The delta
// rule is checked against both CPU forms (recurrent and chunked), unfused and with its fused q/k L2 norm and gates;
// its chunked (tensor-core) kernels against the recurrent CUDA kernel, incl. a sequence with an invalid slot.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/delta_net/delta_net.h"

namespace pagoda {
namespace {

namespace cpu = kernels::cpu;
namespace gpu = kernels::cuda;

#define TEST_CUDA_CHECK(expr)                                                      \
    do {                                                                           \
        const cudaError_t err_ = (expr);                                           \
        ASSERT_EQ(err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(err_); \
    } while (0)

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Device memory holding a copy of a host vector.
class DevBuf {
  public:
    template <class T>
    explicit DevBuf(const std::vector<T>& host) : bytes_(host.size() * sizeof(T)) {
        EXPECT_EQ(cudaMalloc(&ptr_, std::max<size_t>(bytes_, 16)), cudaSuccess);
        EXPECT_EQ(cudaMemcpy(ptr_, host.data(), bytes_, cudaMemcpyHostToDevice), cudaSuccess);
    }
    DevBuf(const DevBuf&) = delete;
    DevBuf& operator=(const DevBuf&) = delete;
    ~DevBuf() { cudaFree(ptr_); }

    template <class T>
    T* as() const {
        return static_cast<T*>(ptr_);
    }
    template <class T>
    std::vector<T> download() const {
        std::vector<T> h(bytes_ / sizeof(T));
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_EQ(cudaMemcpy(h.data(), ptr_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
        return h;
    }

  private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

// max|got - ref| / max|ref| over the elements at offset(i) for i < n; NaN (or a missing write) gives infinity.
float rel_error(const std::vector<float>& ref, const std::vector<float>& got, int64_t n,
                const std::function<int64_t(int64_t)>& offset) {
    float max_ref = 0.0f, max_diff = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t o = offset(i);
        const float a = ref[o], b = got[o];
        if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::infinity();
        max_ref = std::max(max_ref, std::fabs(a));
        max_diff = std::max(max_diff, std::fabs(a - b));
    }
    return max_diff / std::max(max_ref, 1e-30f);
}

// Elements (t, h, d) of a [T, H, D] view with strides (st, sh, 1).
std::function<int64_t(int64_t)> view3(int64_t H, int64_t D, int64_t st, int64_t sh) {
    return [=](int64_t i) { return (i / (H * D)) * st + ((i / D) % H) * sh + i % D; };
}
std::function<int64_t(int64_t)> all() {
    return [](int64_t i) { return i; };
}

struct Seq {
    int32_t context, query;
};

struct Case {
    std::string name;
    int Hk, Hv, dk, dv, K;
    std::vector<Seq> seqs;
    int head_pad = 0, row_pad = 0;  // extra elements between heads and at the end of every row
    DType weight_dtype = DType::BF16;
};

gpu::ElemType elem(DType d) {
    return d == DType::BF16 ? gpu::ElemType::BF16 : d == DType::F16 ? gpu::ElemType::F16 : gpu::ElemType::F32;
}

class DeltaNetKernelsTest : public ::testing::TestWithParam<Case> {
  protected:
    void SetUp() override { PAGODA_REQUIRE_GPU(); }

    std::vector<float> uniform(size_t n, float lo, float hi) {
        std::uniform_real_distribution<float> u(lo, hi);
        std::vector<float> v(n);
        for (float& x : v)
            x = u(rng_);
        return v;
    }
    // Float values of a weight, rounded to its dtype, and the raw bytes the kernels read.
    struct Weight {
        std::vector<float> f32;
        std::vector<uint16_t> half;  // BF16/F16 bits
        const void* host() const { return half.empty() ? static_cast<const void*>(f32.data()) : half.data(); }
    };
    Weight weight(size_t n, DType dtype, float lo, float hi) {
        Weight w{uniform(n, lo, hi), {}};
        if (dtype == DType::F32) return w;
        for (float& x : w.f32) {
            const uint16_t bits = dtype == DType::BF16 ? f32_to_bf16(x) : f32_to_f16(x);
            w.half.push_back(bits);
            x = dtype == DType::BF16 ? bf16_to_f32(bits) : f16_to_f32(bits);
        }
        return w;
    }

    std::mt19937 rng_{20260};
};

void expect_close(float err, float tol, const char* what) {
    std::printf("  %-44s max rel err %.3g\n", what, err);
    EXPECT_LE(err, tol) << what;
}

TEST_P(DeltaNetKernelsTest, MatchesCpu) {
    const Case& c = GetParam();
    const int S = static_cast<int>(c.seqs.size());
    const int num_slots = 2 * S + 3;
    // Host metadata: slots scattered over the pool (reversed, every other one) so untouched slots must stay untouched.
    std::vector<int32_t> qsl{0}, seq_lens, slots;
    for (int s = 0; s < S; ++s) {
        qsl.push_back(qsl.back() + c.seqs[s].query);
        seq_lens.push_back(c.seqs[s].context + c.seqs[s].query);
        slots.push_back(num_slots - 1 - 2 * s);
    }
    const int64_t T = qsl.back();
    std::printf("[%s] T=%lld S=%d Hk=%d Hv=%d dk=%d dv=%d K=%d\n", c.name.c_str(), static_cast<long long>(T), S, c.Hk,
                c.Hv, c.dk, c.dv, c.K);
    DevBuf d_qsl(qsl), d_seq_lens(seq_lens), d_slots(slots);
    const cpu::SeqInfo h_seqs{S, qsl.data(), seq_lens.data(), slots.data()};
    const gpu::DeltaNetSeqs d_seqs{S, d_qsl.as<int32_t>(), d_seq_lens.as<int32_t>(), d_slots.as<int32_t>()};

    // The conv output is the projection the model slices q/k/v from; its row may be padded, its heads too.
    const int64_t qh = c.dk + c.head_pad, vh = c.dv + c.head_pad;
    const int64_t C = 2 * c.Hk * qh + c.Hv * vh;  // conv channels (pads included: they are convolved like the rest)
    const int64_t row = C + c.row_pad;

    // --- causal_conv1d_silu --------------------------------------------------------------------------------------
    {
        const std::vector<float> x = uniform(static_cast<size_t>(std::max<int64_t>(T, 1) * row), -1.0f, 1.0f);
        const Weight w = weight(static_cast<size_t>(C * c.K), c.weight_dtype, -0.5f, 0.5f);
        std::vector<float> state = uniform(static_cast<size_t>(num_slots * C * (c.K - 1)), -1.0f, 1.0f);
        std::vector<float> out(x.size(), kNaN);
        DevBuf d_x(x), d_state(state), d_out(out);
        DevBuf d_w = w.half.empty() ? DevBuf(w.f32) : DevBuf(w.half);
        cpu::CausalConv1dArgs ha;
        ha.x = x.data(), ha.x_stride = row, ha.out = out.data(), ha.out_stride = row, ha.C = C, ha.K = c.K;
        ha.weight = w.host(), ha.weight_dtype = c.weight_dtype, ha.conv_state = state.data();
        ha.num_slots = num_slots, ha.seqs = h_seqs;
        cpu::launch_causal_conv1d_silu(ha);
        gpu::CausalConv1dArgs ga;
        ga.x = d_x.as<float>(), ga.x_stride = row, ga.out = d_out.as<float>(), ga.out_stride = row, ga.C = C;
        ga.K = c.K, ga.weight = d_w.as<void>(), ga.weight_type = elem(c.weight_dtype);
        ga.conv_state = d_state.as<float>(), ga.num_slots = num_slots, ga.seqs = d_seqs, ga.num_tokens = T;
        gpu::launch_causal_conv1d_silu(ga, nullptr);
        TEST_CUDA_CHECK(cudaGetLastError());
        expect_close(rel_error(out, d_out.download<float>(), T * C, view3(1, C, row, 0)), 1e-5f, "conv1d out");
        expect_close(rel_error(state, d_state.download<float>(), static_cast<int64_t>(state.size()), all()), 1e-6f,
                     "conv1d state");
    }

    // --- gdn_gating --------------------------------------------------------------------------------------------------
    // The gating inputs, and the CPU's g and beta: inputs of the delta rule below (the fused-gates variant takes the
    // gating inputs instead).
    const int64_t as = c.Hv + 1, bs = c.Hv + 2, gs = c.Hv + 3;
    std::vector<float> a = uniform(static_cast<size_t>(std::max<int64_t>(T, 1) * as), -4.0f, 2.0f);
    const std::vector<float> b = uniform(static_cast<size_t>(std::max<int64_t>(T, 1) * bs), -4.0f, 4.0f);
    const std::vector<float> a_log = uniform(static_cast<size_t>(c.Hv), -5.0f, 1.0f);
    const Weight dt = weight(static_cast<size_t>(c.Hv), DType::BF16, -2.0f, 2.0f);
    for (int64_t t = 0; t < T; t += 3)
        a[static_cast<size_t>(t * as)] = 22.5f;  // softplus above its threshold of 20 (and a state reset)
    std::vector<float> g(static_cast<size_t>(std::max<int64_t>(T, 1) * gs), kNaN), beta(g.size(), kNaN);
    DevBuf d_a(a), d_b(b), d_alog(a_log), d_dt(dt.half);
    {
        DevBuf d_g(g), d_beta(beta);
        cpu::GdnGatingArgs ha;
        ha.a = a.data(), ha.a_stride = as, ha.b = b.data(), ha.b_stride = bs, ha.a_log = a_log.data();
        ha.a_log_dtype = DType::F32, ha.dt_bias = dt.host(), ha.dt_bias_dtype = DType::BF16, ha.g = g.data();
        ha.g_stride = gs, ha.beta = beta.data(), ha.beta_stride = gs, ha.T = T, ha.H = c.Hv;
        cpu::launch_gdn_gating(ha);
        gpu::GdnGatingArgs ga;
        ga.a = d_a.as<float>(), ga.a_stride = as, ga.b = d_b.as<float>(), ga.b_stride = bs;
        ga.a_log = d_alog.as<void>(), ga.a_log_type = gpu::ElemType::F32, ga.dt_bias = d_dt.as<void>();
        ga.dt_bias_type = gpu::ElemType::BF16, ga.g = d_g.as<float>(), ga.g_stride = gs, ga.beta = d_beta.as<float>();
        ga.beta_stride = gs, ga.T = T, ga.H = c.Hv;
        gpu::launch_gdn_gating(ga, nullptr);
        TEST_CUDA_CHECK(cudaGetLastError());
        expect_close(rel_error(g, d_g.download<float>(), T * c.Hv, view3(1, c.Hv, gs, 0)), 1e-5f, "gating g");
        expect_close(rel_error(beta, d_beta.download<float>(), T * c.Hv, view3(1, c.Hv, gs, 0)), 1e-5f, "gating beta");
    }

    // --- l2_norm on the strided q and k views of a projection row -------------------------------------------------
    const std::vector<float> raw = uniform(static_cast<size_t>(std::max<int64_t>(T, 1) * row), -1.0f, 1.0f);
    std::vector<float> normed = raw;  // the CPU-normalised projection: the delta rule's q/k/v
    {
        DevBuf d_x(raw);
        for (int which = 0; which < 2; ++which) {
            cpu::L2NormArgs ha;
            ha.x = {normed.data() + which * c.Hk * qh, row, qh}, ha.T = T, ha.H = c.Hk, ha.D = c.dk, ha.eps = 1e-6f;
            cpu::launch_l2_norm(ha);
            gpu::L2NormArgs ga;
            ga.x = {d_x.as<float>() + which * c.Hk * qh, row, qh}, ga.T = T, ga.H = c.Hk, ga.D = c.dk, ga.eps = 1e-6f;
            gpu::launch_l2_norm(ga, nullptr);
            TEST_CUDA_CHECK(cudaGetLastError());
        }
        // Whole rows: the pads and v must be left alone as well.
        expect_close(rel_error(normed, d_x.download<float>(), T * C, view3(1, C, row, 0)), 1e-5f, "l2_norm q,k");
    }

    // --- gated_delta_rule: both CPU forms, and the GPU with q/k normalised before or inside the kernel ------------
    const float q_scale = 1.0f / std::sqrt(static_cast<float>(c.dk));
    const std::vector<float> state0 = uniform(static_cast<size_t>(num_slots) * c.Hv * c.dk * c.dv, -0.5f, 0.5f);
    const int64_t ost = c.Hv * vh + c.row_pad;  // out [T, Hv, dv] with padded heads and rows
    std::vector<float> o_ref;                   // the CPU recurrent output: input of the gated norm below
    for (int mode : {1, 0}) {
        std::vector<float> h_state = state0, h_out(static_cast<size_t>(std::max<int64_t>(T, 1) * ost), kNaN);
        cpu::DeltaRuleArgs ha;
        ha.q = {normed.data(), row, qh}, ha.k = {normed.data() + c.Hk * qh, row, qh};
        ha.v = {normed.data() + 2 * c.Hk * qh, row, vh}, ha.out = {h_out.data(), ost, vh};
        ha.g = g.data(), ha.g_stride = gs, ha.beta = beta.data(), ha.beta_stride = gs;
        ha.Hk = c.Hk, ha.Hv = c.Hv, ha.dk = c.dk, ha.dv = c.dv, ha.q_scale = q_scale, ha.state = h_state.data();
        ha.num_slots = num_slots, ha.seqs = h_seqs, ha.mode = mode;
        cpu::launch_gated_delta_rule(ha);
        if (mode == 1) o_ref = h_out;
        // 0: q/k normalised before; 1: the fused L2 norm; 2: the fused L2 norm and the fused gates.
        for (int fused : {0, 1, 2}) {
            DevBuf d_proj(fused ? raw : normed), d_state(state0), d_out(std::vector<float>(h_out.size(), kNaN));
            DevBuf d_g(fused == 2 ? std::vector<float>(g.size(), kNaN) : g), d_beta(beta);
            float* p = d_proj.as<float>();
            gpu::GatedDeltaRuleArgs ga;
            ga.q = {p, row, qh}, ga.k = {p + c.Hk * qh, row, qh}, ga.v = {p + 2 * c.Hk * qh, row, vh};
            ga.out = {d_out.as<float>(), ost, vh}, ga.g = d_g.as<float>(), ga.g_stride = gs;
            ga.beta = d_beta.as<float>(), ga.beta_stride = gs, ga.Hk = c.Hk, ga.Hv = c.Hv, ga.dk = c.dk, ga.dv = c.dv;
            ga.q_scale = q_scale, ga.state = d_state.as<float>(), ga.num_slots = num_slots, ga.seqs = d_seqs;
            ga.num_tokens = T, ga.l2_norm_qk = fused >= 1, ga.l2_eps = 1e-6f;
            if (fused == 2) {
                ga.g = nullptr, ga.beta = nullptr;
                ga.gate_a = d_a.as<float>(), ga.gate_a_stride = as, ga.gate_b = d_b.as<float>(), ga.gate_b_stride = bs;
                ga.a_log = d_alog.as<void>(), ga.a_log_type = gpu::ElemType::F32, ga.dt_bias = d_dt.as<void>();
                ga.dt_bias_type = gpu::ElemType::BF16;
            }
            gpu::launch_gated_delta_rule(ga, nullptr);
            TEST_CUDA_CHECK(cudaGetLastError());
            const char* variant[] = {"", "+fused l2", "+fused l2,gates"};
            const std::string what = std::string(mode == 1 ? "recurrent" : "chunked") + variant[fused];
            expect_close(rel_error(h_out, d_out.download<float>(), T * c.Hv * c.dv, view3(c.Hv, c.dv, ost, vh)), 1e-4f,
                         ("delta rule out vs cpu " + what).c_str());
            expect_close(rel_error(h_state, d_state.download<float>(), static_cast<int64_t>(h_state.size()), all()),
                         1e-4f, ("delta rule state vs cpu " + what).c_str());
        }
    }

    // --- gated_rms_norm: x = the delta rule's output, z a strided slice, out separate and aliasing x -------------
    {
        const int64_t zs = c.Hv * vh + 7;
        const std::vector<float> z = uniform(static_cast<size_t>(std::max<int64_t>(T, 1) * zs), -3.0f, 3.0f);
        const Weight w = weight(static_cast<size_t>(c.dv), c.weight_dtype, 0.5f, 1.5f);
        std::vector<float> h_out(o_ref.size(), kNaN);
        cpu::GatedRmsNormArgs ha;
        ha.x = {o_ref.data(), ost, vh}, ha.z = {const_cast<float*>(z.data()), zs, vh}, ha.out = {h_out.data(), ost, vh};
        ha.T = T, ha.H = c.Hv, ha.D = c.dv, ha.weight = w.host(), ha.weight_dtype = c.weight_dtype, ha.eps = 1e-6f;
        cpu::launch_gated_rms_norm(ha);
        DevBuf d_x(o_ref), d_z(z), d_out(std::vector<float>(h_out.size(), kNaN));
        DevBuf d_w = w.half.empty() ? DevBuf(w.f32) : DevBuf(w.half);
        for (bool alias : {false, true}) {
            gpu::GatedRmsNormArgs ga;
            ga.x = {d_x.as<float>(), ost, vh}, ga.z = {d_z.as<float>(), zs, vh};
            ga.out = alias ? ga.x : gpu::Rows{d_out.as<float>(), ost, vh};
            ga.T = T, ga.H = c.Hv, ga.D = c.dv, ga.weight = d_w.as<void>(), ga.weight_type = elem(c.weight_dtype);
            ga.eps = 1e-6f;
            gpu::launch_gated_rms_norm(ga, nullptr);
            TEST_CUDA_CHECK(cudaGetLastError());
            const std::vector<float> got = (alias ? d_x : d_out).download<float>();
            expect_close(rel_error(h_out, got, T * c.Hv * c.dv, view3(c.Hv, c.dv, ost, vh)), 1e-5f,
                         alias ? "gated_rms_norm in place" : "gated_rms_norm");
        }
    }
}

// The chunked delta rule (tensor cores, TF32 products) against the recurrent CUDA kernel on the same inputs: every
// sequence chunked (chunked_min_tokens 1) and the Auto split (32: shorter sequences recurrent in the same step), with
// q/k normalised before, the fused L2 norm, and the fused norm and gates. One sequence of each batch has a slot outside
// the pool: both forms must skip it (its output rows stay NaN, no slot changes). Outputs and states within 3e-3 of
// max|ref| (the op harness's kChunkedTol, which says why).
TEST_P(DeltaNetKernelsTest, ChunkedMatchesRecurrent) {
    const Case& c = GetParam();
    if (!gpu::gated_delta_rule_chunked_supported(c.dk, c.dv)) {
        std::printf("[%s] dk=%d: the chunked kernels do not take it (recurrent only)\n", c.name.c_str(), c.dk);
        return;
    }
    const int S = static_cast<int>(c.seqs.size());
    const int num_slots = 2 * S + 3;
    const int skipped = S >= 2 ? 1 : -1;  // the sequence with an invalid slot
    std::vector<int32_t> qsl{0}, seq_lens, slots;
    for (int s = 0; s < S; ++s) {
        qsl.push_back(qsl.back() + c.seqs[s].query);
        seq_lens.push_back(c.seqs[s].context + c.seqs[s].query);
        slots.push_back(s == skipped ? num_slots + 4 : num_slots - 1 - 2 * s);
    }
    const int64_t T = qsl.back();
    std::printf("[%s] chunked vs recurrent: T=%lld S=%d dk=%d dv=%d\n", c.name.c_str(), static_cast<long long>(T), S,
                c.dk, c.dv);
    DevBuf d_qsl(qsl), d_seq_lens(seq_lens), d_slots(slots);
    const gpu::DeltaNetSeqs d_seqs{S, d_qsl.as<int32_t>(), d_seq_lens.as<int32_t>(), d_slots.as<int32_t>()};

    const int64_t qh = c.dk + c.head_pad, vh = c.dv + c.head_pad;
    const int64_t row = 2 * c.Hk * qh + c.Hv * vh + c.row_pad;
    const size_t rows = static_cast<size_t>(std::max<int64_t>(T, 1));
    const std::vector<float> raw = uniform(rows * row, -1.0f, 1.0f);
    std::vector<float> normed = raw;  // q and k heads L2-normalised on the host
    for (size_t t = 0; t < rows; ++t)
        for (int h = 0; h < 2 * c.Hk; ++h) {
            float* x = normed.data() + t * row + h * qh;
            float ss = 0.0f;
            for (int d = 0; d < c.dk; ++d)
                ss += x[d] * x[d];
            for (int d = 0; d < c.dk; ++d)
                x[d] /= std::sqrt(ss + 1e-6f);
        }
    const int64_t gs = c.Hv + 3;
    const std::vector<float> a = uniform(rows * gs, -6.0f, 1.0f), b = uniform(rows * gs, -4.0f, 4.0f);
    const std::vector<float> a_log = uniform(static_cast<size_t>(c.Hv), -5.0f, 0.0f);
    const std::vector<float> dt = uniform(static_cast<size_t>(c.Hv), -2.0f, 1.0f);
    DevBuf d_a(a), d_b(b), d_alog(a_log), d_dt(dt);
    DevBuf d_g(std::vector<float>(rows * gs, kNaN)), d_beta(std::vector<float>(rows * gs, kNaN));
    {
        gpu::GdnGatingArgs ga;
        ga.a = d_a.as<float>(), ga.a_stride = gs, ga.b = d_b.as<float>(), ga.b_stride = gs;
        ga.a_log = d_alog.as<void>(), ga.a_log_type = gpu::ElemType::F32, ga.dt_bias = d_dt.as<void>();
        ga.dt_bias_type = gpu::ElemType::F32, ga.g = d_g.as<float>(), ga.g_stride = gs, ga.beta = d_beta.as<float>();
        ga.beta_stride = gs, ga.T = T, ga.H = c.Hv;
        gpu::launch_gdn_gating(ga, nullptr);
        TEST_CUDA_CHECK(cudaGetLastError());
    }
    const std::vector<float> state0 = uniform(static_cast<size_t>(num_slots) * c.Hv * c.dk * c.dv, -0.5f, 0.5f);
    const int64_t ost = c.Hv * vh + c.row_pad;
    const size_t workspace_bytes = gpu::gated_delta_rule_chunked_workspace_bytes(T, c.Hv, c.dk, c.dv);
    DevBuf d_ws(std::vector<char>(std::max<size_t>(workspace_bytes, 1), 0x7f));  // garbage: everything read is written

    // One run: chunked_min_tokens 0 is the recurrent reference.
    auto run = [&](int fused, int min_tokens, std::vector<float>& out, std::vector<float>& state) {
        DevBuf d_proj(fused ? raw : normed), d_state(state0), d_out(std::vector<float>(rows * ost, kNaN));
        float* p = d_proj.as<float>();
        gpu::GatedDeltaRuleArgs ga;
        ga.q = {p, row, qh}, ga.k = {p + c.Hk * qh, row, qh}, ga.v = {p + 2 * c.Hk * qh, row, vh};
        ga.out = {d_out.as<float>(), ost, vh}, ga.g = d_g.as<float>(), ga.g_stride = gs;
        ga.beta = d_beta.as<float>(), ga.beta_stride = gs, ga.Hk = c.Hk, ga.Hv = c.Hv, ga.dk = c.dk, ga.dv = c.dv;
        ga.q_scale = 1.0f / std::sqrt(static_cast<float>(c.dk)), ga.state = d_state.as<float>();
        ga.num_slots = num_slots, ga.seqs = d_seqs, ga.num_tokens = T, ga.l2_norm_qk = fused >= 1, ga.l2_eps = 1e-6f;
        if (fused == 2) {
            ga.g = nullptr, ga.beta = nullptr;
            ga.gate_a = d_a.as<float>(), ga.gate_a_stride = gs, ga.gate_b = d_b.as<float>(), ga.gate_b_stride = gs;
            ga.a_log = d_alog.as<void>(), ga.a_log_type = gpu::ElemType::F32, ga.dt_bias = d_dt.as<void>();
            ga.dt_bias_type = gpu::ElemType::F32;
        }
        ga.chunked_min_tokens = min_tokens;
        gpu::launch_gated_delta_rule(ga, nullptr);
        if (min_tokens > 0) gpu::launch_gated_delta_rule_chunked(ga, d_ws.as<void>(), nullptr);
        EXPECT_EQ(cudaGetLastError(), cudaSuccess);
        out = d_out.download<float>();
        state = d_state.download<float>();
    };
    // Output rows of the sequences with a valid slot, as offsets into out.
    std::vector<int64_t> kept;
    for (int s = 0; s < S; ++s)
        for (int t = qsl[s]; t < qsl[s + 1] && s != skipped; ++t)
            for (int64_t i = 0; i < c.Hv * c.dv; ++i)
                kept.push_back(t * ost + (i / c.dv) * vh + i % c.dv);
    for (int fused : {0, 1, 2}) {
        std::vector<float> ref_out, ref_state;
        run(fused, 0, ref_out, ref_state);
        for (int min_tokens : {1, 32}) {
            std::vector<float> out, state;
            run(fused, min_tokens, out, state);
            const std::string what = "chunked (from " + std::to_string(min_tokens) + " tokens) " +
                                     (fused == 0   ? ""
                                      : fused == 1 ? "+fused l2 "
                                                   : "+fused l2,gates ");
            expect_close(rel_error(ref_out, out, static_cast<int64_t>(kept.size()), [&](int64_t i) { return kept[i]; }),
                         3e-3f, (what + "out").c_str());
            expect_close(rel_error(ref_state, state, static_cast<int64_t>(state.size()), all()), 3e-3f,
                         (what + "state").c_str());
            if (skipped < 0) continue;
            for (int t = qsl[skipped]; t < qsl[skipped + 1]; ++t)
                for (int64_t i = 0; i < c.Hv * c.dv; ++i) {
                    ASSERT_TRUE(std::isnan(out[t * ost + (i / c.dv) * vh + i % c.dv])) << "skipped row " << t;
                }
        }
    }
}

// Qwen3.5-9B linear-attention sizes: Hk 16, Hv 32, dk = dv = 128, K 4.
Case qwen(std::string name, std::vector<Seq> seqs, int head_pad = 0, int row_pad = 0) {
    return Case{std::move(name), 16, 32, 128, 128, 4, std::move(seqs), head_pad, row_pad, DType::BF16};
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DeltaNetKernelsTest,
    ::testing::Values(
        qwen("decode_batch1", {{37, 1}}),
        qwen("decode_batch6_one_fresh", {{5, 1}, {0, 1}, {100, 1}, {1, 1}, {2, 1}, {63, 1}}, 0, 8),
        qwen("prefill_1000_fresh", {{0, 1000}}), qwen("prefill_continues_state", {{300, 250}}, 4, 0),
        qwen("mixed_prefill_decode", {{0, 37}, {50, 1}, {20, 64}, {0, 1}, {1, 2}, {7, 17}}, 0, 5),
        Case{"odd_gqa2_k3", 3, 6, 24, 40, 3, {{0, 19}, {4, 1}, {9, 0}, {0, 0}, {2, 33}, {11, 2}}, 3, 5, DType::F32},
        Case{"odd_no_gqa_k2", 2, 2, 7, 33, 2, {{0, 5}, {3, 1}, {1, 40}}, 1, 3, DType::F16},
        Case{"dk200_gqa4_k5", 1, 4, 200, 64, 5, {{0, 70}, {12, 1}, {3, 3}}, 0, 2, DType::BF16},
        Case{"dk64_dv96_k8", 4, 8, 64, 96, 8, {{0, 3}, {6, 21}, {2, 1}}, 2, 0, DType::BF16},
        // Two new tokens and one with none: T == S takes the decode launch, which must still walk both tokens.
        Case{"decode_shape_uneven", 2, 4, 32, 32, 4, {{3, 2}, {5, 0}, {0, 1}}, 0, 0, DType::F32},
        // Chunk edges for the chunked form: 63/64/65/130 tokens, continuations, 4,097 tokens, Qwen3.5-27B's 48 heads.
        qwen("chunk_edges", {{0, 63}, {0, 64}, {9, 65}, {0, 1}, {3, 130}, {0, 2}, {70, 128}}, 0, 3),
        qwen("prefill_4097_continues", {{1000, 4097}, {5, 1}}),
        Case{"qwen35_27b_heads", 16, 48, 128, 128, 4, {{0, 300}, {4, 1}, {2, 77}}, 0, 0, DType::BF16}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace pagoda
