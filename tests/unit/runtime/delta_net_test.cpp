// Gated DeltaNet ops against naive references written here: conv1d with state, gates, L2 norm, gated RMSNorm,
// and the delta rule (recurrent and chunked forms agree with each other and with a double-precision recurrence,
// over several sequences, GQA of value vs key heads, cached state, chunk boundaries).
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/backend.h"
#include "runtime/cache_pools.h"
#include "runtime/forward_batch.h"
#include "runtime/ops.h"
#include "test_util.h"

namespace pagoda {
namespace {

using testing::expect_close;
using testing::random_f32;
using testing::random_weight;

double silu(double x) {
    return x / (1 + std::exp(-x));
}

class DeltaNetTest : public ::testing::Test {
  protected:
    std::unique_ptr<Backend> backend_ = make_cpu_backend();
    Ops& ops_ = backend_->ops();
    std::mt19937 rng_{99};
};

TEST_F(DeltaNetTest, GatingFormula) {
    const int64_t T = 4, H = 6;
    auto a = random_f32({T, H}, rng_, -30, 30);  // crosses the softplus threshold
    auto b = random_f32({T, H}, rng_, -5, 5);
    auto alog = random_weight(DType::F32, {H}, rng_, -2, 2);
    auto dt = random_weight(DType::BF16, {H}, rng_, -1, 1);
    HostTensor g = HostTensor::empty(DType::F32, {T, H}), beta = HostTensor::empty(DType::F32, {T, H});
    ops_.gdn_gating(a.tensor, b.tensor, alog.stored.tensor, dt.stored.tensor, g.tensor, beta.tensor);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
            const double x = a.tensor.data_as<float>()[t * H + h] + double(dt.values[h]);
            const double sp = std::log(1 + std::exp(x));
            const double ref = -std::exp(double(alog.values[h])) * sp;
            ASSERT_NEAR(g.tensor.data_as<float>()[t * H + h], ref, 1e-5 * std::abs(ref) + 1e-6);
            ASSERT_NEAR(beta.tensor.data_as<float>()[t * H + h],
                        1 / (1 + std::exp(-double(b.tensor.data_as<float>()[t * H + h]))), 1e-6);
        }
}

TEST_F(DeltaNetTest, L2NormAndGatedRmsNorm) {
    const int64_t T = 3, H = 4, D = 32;
    auto x = random_f32({T, H, D}, rng_, -2, 2);
    auto z = random_f32({T, H, D}, rng_, -3, 3);
    auto w = random_weight(DType::BF16, {D}, rng_, 0.5f, 1.5f);
    std::vector<float> x0 = testing::to_vector(x.tensor);
    HostTensor out = HostTensor::empty(DType::F32, {T, H, D});
    ops_.gated_rms_norm(x.tensor, z.tensor, w.stored.tensor, 1e-6f, out.tensor);
    for (int64_t r = 0; r < T * H; ++r) {
        double ss = 0;
        for (int64_t d = 0; d < D; ++d)
            ss += double(x0[r * D + d]) * x0[r * D + d];
        std::vector<double> ref(D);
        for (int64_t d = 0; d < D; ++d)
            ref[d] =
                x0[r * D + d] / std::sqrt(ss / D + 1e-6) * w.values[d] * silu(z.tensor.data_as<float>()[r * D + d]);
        expect_close(out.tensor.data_as<float>() + r * D, ref, 2e-6, 0, "gated_rms_norm");
    }
    ops_.l2_norm(x.tensor, 1e-6f);
    for (int64_t r = 0; r < T * H; ++r) {
        double ss = 0;
        for (int64_t d = 0; d < D; ++d)
            ss += double(x0[r * D + d]) * x0[r * D + d];
        std::vector<double> ref(D);
        for (int64_t d = 0; d < D; ++d)
            ref[d] = x0[r * D + d] / std::sqrt(ss + 1e-6);
        expect_close(x.tensor.data_as<float>() + r * D, ref, 2e-6, 0, "l2_norm");
    }
}

// Naive conv: out[t,c] = silu(Σ_i w[c,i] x[t-K+1+i, c]) with zero history.
std::vector<double> conv_ref(const std::vector<float>& x, int64_t L, int64_t C, const std::vector<float>& w,
                             int64_t K) {
    std::vector<double> out(L * C);
    for (int64_t t = 0; t < L; ++t)
        for (int64_t c = 0; c < C; ++c) {
            double s = 0;
            for (int64_t i = 0; i < K; ++i) {
                const int64_t src = t - K + 1 + i;
                if (src >= 0) s += double(w[c * K + i]) * x[src * C + c];
            }
            out[t * C + c] = silu(s);
        }
    return out;
}

TEST_F(DeltaNetTest, CausalConvWithStateAcrossSteps) {
    const int64_t C = 24, K = 4;
    const std::vector<int32_t> lens = {1, 2, 3, 9};
    auto w = random_weight(DType::BF16, {C, 1, K}, rng_);
    auto pool = StateCachePool::create(backend_->allocator(), {1, 8, static_cast<int32_t>(C), K, 1, 1, 1});
    ASSERT_TRUE(pool.ok());
    Tensor state = pool->conv_state(0);
    std::fill(state.data_as<float>(), state.data_as<float>() + state.numel(), 5.0f);  // garbage: fresh seqs ignore it
    std::vector<std::vector<float>> xs;
    for (int32_t L : lens) {
        auto x = random_f32({L, C}, rng_, -2, 2);
        xs.push_back(testing::to_vector(x.tensor));
    }
    // Each sequence is fed in pieces: first `split` tokens, then the rest one token at a time (decode).
    std::vector<std::vector<float>> got(lens.size());
    const std::vector<int32_t> split = {1, 1, 2, 5};
    int32_t max_steps = 0;
    for (size_t s = 0; s < lens.size(); ++s)
        max_steps = std::max(max_steps, 1 + lens[s] - split[s]);
    for (int32_t step = 0; step < max_steps; ++step) {
        ForwardBatchBuilder b(16);
        std::vector<float> x;
        std::vector<size_t> which;
        for (size_t s = 0; s < lens.size(); ++s) {
            const int32_t begin = step == 0 ? 0 : split[s] + step - 1;
            const int32_t n = step == 0 ? split[s] : 1;
            if (begin + n > lens[s]) continue;
            std::vector<int32_t> toks(n, 0), table(4, 0);
            b.add_sequence(toks, begin, table, static_cast<int32_t>(s + 2));
            x.insert(x.end(), xs[s].begin() + begin * C, xs[s].begin() + (begin + n) * C);
            which.push_back(s);
        }
        ForwardBatch fb = b.view();
        std::vector<float> out(x.size());
        ops_.causal_conv1d_silu(Tensor(x.data(), DType::F32, {fb.num_tokens, C}), w.stored.tensor, state, fb,
                                Tensor(out.data(), DType::F32, {fb.num_tokens, C}));
        for (int32_t i = 0; i < fb.num_seqs; ++i)
            got[which[i]].insert(got[which[i]].end(), out.begin() + fb.query_start_loc[i] * C,
                                 out.begin() + fb.query_start_loc[i + 1] * C);
    }
    for (size_t s = 0; s < lens.size(); ++s) {
        ASSERT_EQ(got[s].size(), static_cast<size_t>(lens[s] * C));
        expect_close(got[s].data(), conv_ref(xs[s], lens[s], C, w.values, K), 1e-6, 1e-7, "conv1d");
    }
}

// ---- delta rule --------------------------------------------------------------------------------------------------

struct DeltaInputs {
    int64_t T, Hk, Hv, dk, dv;
    std::vector<float> q, k, v, g, beta;  // [T,Hk,dk], [T,Hk,dk], [T,Hv,dv], [T,Hv], [T,Hv]
};

DeltaInputs make_inputs(int64_t T, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, std::mt19937& rng, Ops& ops) {
    DeltaInputs in{T, Hk, Hv, dk, dv, {}, {}, {}, {}, {}};
    auto q = random_f32({T, Hk, dk}, rng), k = random_f32({T, Hk, dk}, rng), v = random_f32({T, Hv, dv}, rng);
    ops.l2_norm(q.tensor, 1e-6f);
    ops.l2_norm(k.tensor, 1e-6f);
    auto a = random_f32({T, Hv}, rng, -3, 1), b = random_f32({T, Hv}, rng, -3, 3);
    auto alog = random_weight(DType::F32, {Hv}, rng, -3, 0.5f), dt = random_weight(DType::F32, {Hv}, rng, -1, 1);
    HostTensor g = HostTensor::empty(DType::F32, {T, Hv}), beta = HostTensor::empty(DType::F32, {T, Hv});
    ops.gdn_gating(a.tensor, b.tensor, alog.stored.tensor, dt.stored.tensor, g.tensor, beta.tensor);
    in.q = testing::to_vector(q.tensor), in.k = testing::to_vector(k.tensor), in.v = testing::to_vector(v.tensor);
    in.g = testing::to_vector(g.tensor), in.beta = testing::to_vector(beta.tensor);
    return in;
}

// Double-precision recurrence for one sequence's rows [begin, begin+len), value head hv, state S [dk][dv].
void delta_ref(const DeltaInputs& in, int64_t begin, int64_t len, double q_scale, std::vector<double>& S,
               std::vector<double>& out /*[T,Hv,dv]*/, int64_t hv) {
    const int64_t kh = hv / (in.Hv / in.Hk), dk = in.dk, dv = in.dv;
    for (int64_t t = begin; t < begin + len; ++t) {
        const float* q = &in.q[(t * in.Hk + kh) * dk];
        const float* k = &in.k[(t * in.Hk + kh) * dk];
        const float* v = &in.v[(t * in.Hv + hv) * dv];
        const double decay = std::exp(double(in.g[t * in.Hv + hv])), beta = in.beta[t * in.Hv + hv];
        for (auto& s : S)
            s *= decay;
        for (int64_t j = 0; j < dv; ++j) {
            double kv = 0;
            for (int64_t i = 0; i < dk; ++i)
                kv += S[i * dv + j] * k[i];
            const double delta = beta * (v[j] - kv);
            for (int64_t i = 0; i < dk; ++i)
                S[i * dv + j] += k[i] * delta;
        }
        for (int64_t j = 0; j < dv; ++j) {
            double o = 0;
            for (int64_t i = 0; i < dk; ++i)
                o += S[i * dv + j] * q[i] * q_scale;
            out[(t * in.Hv + hv) * dv + j] = o;
        }
    }
}

struct RunResult {
    std::vector<float> out, state;
};

// Runs the op over sequences (lengths `lens`, each in slot s) in one batch; `ctx` cached tokens per sequence.
RunResult run_op(Ops& ops, const DeltaInputs& in, const std::vector<int32_t>& lens, const std::vector<int32_t>& ctx,
                 DeltaRuleMode mode, const std::vector<float>* initial_state, float q_scale) {
    const int64_t S = static_cast<int64_t>(lens.size());
    RunResult r;
    r.state.assign(S * in.Hv * in.dk * in.dv, 0.0f);
    if (initial_state) r.state = *initial_state;
    r.out.assign(in.T * in.Hv * in.dv, 0.0f);
    ForwardBatchBuilder b(16);
    std::vector<int32_t> table(64, 0);
    for (int64_t s = 0; s < S; ++s) {
        std::vector<int32_t> toks(lens[s], 0);
        b.add_sequence(toks, ctx[s], table, static_cast<int32_t>(s));
    }
    ForwardBatch fb = b.view();
    auto* q = const_cast<float*>(in.q.data());
    auto* k = const_cast<float*>(in.k.data());
    auto* v = const_cast<float*>(in.v.data());
    auto* g = const_cast<float*>(in.g.data());
    auto* beta = const_cast<float*>(in.beta.data());
    ops.gated_delta_rule(Tensor(q, DType::F32, {in.T, in.Hk, in.dk}), Tensor(k, DType::F32, {in.T, in.Hk, in.dk}),
                         Tensor(v, DType::F32, {in.T, in.Hv, in.dv}), Tensor(g, DType::F32, {in.T, in.Hv}),
                         Tensor(beta, DType::F32, {in.T, in.Hv}),
                         Tensor(r.state.data(), DType::F32, {S, in.Hv, in.dk, in.dv}), fb, q_scale,
                         Tensor(r.out.data(), DType::F32, {in.T, in.Hv, in.dv}), mode);
    return r;
}

double max_abs(const std::vector<float>& v) {
    double m = 0;
    for (float x : v)
        m = std::max(m, double(std::abs(x)));
    return m;
}

void expect_rel_close(const std::vector<float>& a, const std::vector<float>& b, double rtol, const char* what) {
    ASSERT_EQ(a.size(), b.size());
    const double tol = rtol * std::max(max_abs(a), max_abs(b));
    for (size_t i = 0; i < a.size(); ++i)
        ASSERT_NEAR(a[i], b[i], tol) << what << " at " << i;
}

void check_shapes(Ops& ops, std::mt19937& rng, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv,
                  const std::vector<int32_t>& lens) {
    int64_t T = 0;
    for (int32_t l : lens)
        T += l;
    DeltaInputs in = make_inputs(T, Hk, Hv, dk, dv, rng, ops);
    const float qs = 1.0f / std::sqrt(static_cast<float>(dk));
    const std::vector<int32_t> ctx(lens.size(), 0);
    RunResult rec = run_op(ops, in, lens, ctx, DeltaRuleMode::Recurrent, nullptr, qs);
    RunResult chk = run_op(ops, in, lens, ctx, DeltaRuleMode::Chunked, nullptr, qs);
    RunResult aut = run_op(ops, in, lens, ctx, DeltaRuleMode::Auto, nullptr, qs);
    expect_rel_close(chk.out, rec.out, 1e-5, "chunked vs recurrent output");
    expect_rel_close(chk.state, rec.state, 1e-5, "chunked vs recurrent state");
    expect_rel_close(aut.out, rec.out, 1e-5, "auto vs recurrent output");

    // Both against the double-precision recurrence.
    std::vector<double> ref_out(T * Hv * dv, 0.0);
    std::vector<float> ref_state;
    int64_t begin = 0;
    for (size_t s = 0; s < lens.size(); ++s) {
        for (int64_t hv = 0; hv < Hv; ++hv) {
            std::vector<double> S(dk * dv, 0.0);
            delta_ref(in, begin, lens[s], qs, S, ref_out, hv);
            ref_state.insert(ref_state.end(), S.begin(), S.end());
        }
        begin += lens[s];
    }
    std::vector<float> ref_out_f(ref_out.begin(), ref_out.end());
    expect_rel_close(rec.out, ref_out_f, 1e-5, "recurrent vs double reference");
    expect_rel_close(chk.out, ref_out_f, 1e-5, "chunked vs double reference");
    expect_rel_close(chk.state, ref_state, 1e-5, "chunked state vs double reference");
}

TEST_F(DeltaNetTest, ChunkedAndRecurrentAgreeAcrossChunkBoundaries) {
    check_shapes(ops_, rng_, 2, 4, 16, 8, {1, 63, 64, 65, 150});
}

TEST_F(DeltaNetTest, ChunkedAndRecurrentAgreeRealHeadSizes) {
    check_shapes(ops_, rng_, 1, 2, 128, 128, {130, 1});
}

TEST_F(DeltaNetTest, PrefixThenRestEqualsWholeSequence) {
    // Prefill 70 tokens (chunked), then 60 more (chunked, with cached state), then 5 decodes, vs all 135 at once.
    const int64_t Hk = 2, Hv = 6, dk = 32, dv = 16, L = 135;
    DeltaInputs all = make_inputs(L, Hk, Hv, dk, dv, rng_, ops_);
    const float qs = 0.17f;
    RunResult whole = run_op(ops_, all, {static_cast<int32_t>(L)}, {0}, DeltaRuleMode::Auto, nullptr, qs);

    auto piece = [&](int64_t b, int64_t n) {
        DeltaInputs p{n, Hk, Hv, dk, dv, {}, {}, {}, {}, {}};
        p.q.assign(all.q.begin() + b * Hk * dk, all.q.begin() + (b + n) * Hk * dk);
        p.k.assign(all.k.begin() + b * Hk * dk, all.k.begin() + (b + n) * Hk * dk);
        p.v.assign(all.v.begin() + b * Hv * dv, all.v.begin() + (b + n) * Hv * dv);
        p.g.assign(all.g.begin() + b * Hv, all.g.begin() + (b + n) * Hv);
        p.beta.assign(all.beta.begin() + b * Hv, all.beta.begin() + (b + n) * Hv);
        return p;
    };
    std::vector<float> out;
    RunResult r = run_op(ops_, piece(0, 70), {70}, {0}, DeltaRuleMode::Auto, nullptr, qs);
    out.insert(out.end(), r.out.begin(), r.out.end());
    r = run_op(ops_, piece(70, 60), {60}, {70}, DeltaRuleMode::Auto, &r.state, qs);
    out.insert(out.end(), r.out.begin(), r.out.end());
    for (int64_t t = 130; t < L; ++t) {
        r = run_op(ops_, piece(t, 1), {1}, {static_cast<int32_t>(t)}, DeltaRuleMode::Auto, &r.state, qs);
        out.insert(out.end(), r.out.begin(), r.out.end());
    }
    expect_rel_close(out, whole.out, 1e-5, "piecewise vs whole output");
    expect_rel_close(r.state, whole.state, 1e-5, "piecewise vs whole state");
}

}  // namespace
}  // namespace pagoda
