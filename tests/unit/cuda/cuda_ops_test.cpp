// Every CudaOps op against CpuOps on fresh random data over several shapes, outputs poisoned with NaN first.
// Tolerances (max|Δ| / max|ref|): 1e-5 for fp32 paths; 1e-2 where the GPU rounds GEMM inputs to the 16-bit type
// of the weights (every linear with BF16/F16 weights, whatever the token count).
#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

#include "cuda_test_util.h"
#include "runtime/forward_batch.h"
#include "runtime/ops.h"

namespace pagoda {
namespace {

using namespace cuda_test;
using ViewFn = std::function<Tensor(const Tensor&)>;

class CudaOpsTest : public ::testing::Test {
  protected:
    void SetUp() override {
        PAGODA_REQUIRE_GPU();
        auto g = make_cuda_backend();
        ASSERT_TRUE(g.ok()) << g.message();
        gpu_ = std::move(g).value();
        cpu_ = make_cpu_backend();
    }

    // A host input and its device copy.
    struct Pair {
        HostTensor host;
        DeviceTensor dev;
    };
    Pair input(const Shape& shape, float scale = 1.0f, DType dtype = DType::F32) {
        HostTensor f = random_f32(rng_, shape, scale);
        Pair p{dtype == DType::F32 ? std::move(f) : to_dtype(f.tensor, dtype), {}};
        p.dev = to_device(*gpu_, p.host.tensor);
        return p;
    }
    // An output: poisoned device tensor, and a host tensor filled the same way (NaN is fine on the CPU side as
    // long as the op writes every element it should).
    Pair output(const Shape& shape) {
        Pair p{HostTensor::empty(DType::F32, shape), device_empty(*gpu_, DType::F32, shape)};
        std::fill_n(p.host.tensor.data_as<float>(), shape.numel(), std::numeric_limits<float>::quiet_NaN());
        poison(*gpu_, p.dev);
        return p;
    }
    HostTensor back(const Pair& p) { return to_host(*gpu_, p.dev.tensor); }
    // Error between the CPU result and the GPU result, both seen through `view`.
    float compare(const Pair& p, const ViewFn& view, const char* what) {
        HostTensor got = back(p);
        const float e = rel_error(view(p.host.tensor), view(got.tensor));
        std::printf("  %-44s max rel err %.3g\n", what, e);
        return e;
    }

    std::mt19937 rng_{1234};
    std::unique_ptr<Backend> gpu_, cpu_;
};

const ViewFn kWhole = [](const Tensor& t) { return t; };

TEST_F(CudaOpsTest, Embedding) {
    for (DType dt : {DType::BF16, DType::F32}) {
        for (auto [V, H, T] : {std::tuple{50, 64, 7}, std::tuple{1000, 4096, 33}}) {
            Pair table = input(Shape{V, H}, 1.0f, dt);
            std::vector<int32_t> ids(T);
            for (auto& id : ids)
                id = static_cast<int32_t>(rng_() % V);
            Pair out = output(Shape{T, H});
            cpu_->ops().embedding(table.host.tensor, ids, out.host.tensor);
            gpu_->ops().embedding(table.dev.tensor, ids, out.dev.tensor);
            EXPECT_EQ(compare(out, kWhole, "embedding"), 0.0f);
        }
    }
}

TEST_F(CudaOpsTest, RmsNormVariants) {
    for (auto [T, H] : {std::pair{1, 64}, std::pair{5, 4096}, std::pair{130, 1000}}) {
        for (NormKind kind : {NormKind::Plain, NormKind::ZeroCentred}) {
            Pair x = input(Shape{T, H}, 3.0f), w = input(Shape{H});
            Pair out = output(Shape{T, H});
            cpu_->ops().rms_norm(x.host.tensor, w.host.tensor, 1e-6f, kind, out.host.tensor);
            gpu_->ops().rms_norm(x.dev.tensor, w.dev.tensor, 1e-6f, kind, out.dev.tensor);
            EXPECT_LE(compare(out, kWhole, "rms_norm"), 1e-5f);

            // In place (out aliases x), fused with the residual add.
            Pair res = input(Shape{T, H}, 2.0f), y = input(Shape{T, H});
            cpu_->ops().add_rms_norm(res.host.tensor, y.host.tensor, w.host.tensor, 1e-6f, kind, y.host.tensor);
            gpu_->ops().add_rms_norm(res.dev.tensor, y.dev.tensor, w.dev.tensor, 1e-6f, kind, y.dev.tensor);
            EXPECT_LE(compare(y, kWhole, "add_rms_norm out"), 1e-5f);
            EXPECT_LE(compare(res, kWhole, "add_rms_norm residual"), 1e-6f);
        }
    }
}

TEST_F(CudaOpsTest, HeadRmsNormOnStridedHeads) {
    for (auto [T, H, D] : {std::tuple{3, 4, 32}, std::tuple{40, 32, 128}}) {
        // q heads interleaved with gate heads (a [T, 2*H*D] buffer viewed as [T, H, D] with head stride 2D).
        Pair buf = input(Shape{T, 2 * H * D}, 2.0f), w = input(Shape{D});
        const ViewFn heads = [H = H, D = D](const Tensor& t) {
            const int64_t strides[3] = {t.stride(0), 2 * D, 1};
            return Tensor(t.data(), DType::F32, Shape{t.dim(0), H, D}, strides, t.device());
        };
        cpu_->ops().head_rms_norm(heads(buf.host.tensor), w.host.tensor, 1e-6f, NormKind::Plain);
        gpu_->ops().head_rms_norm(heads(buf.dev.tensor), w.dev.tensor, 1e-6f, NormKind::Plain);
        EXPECT_LE(compare(buf, kWhole, "head_rms_norm (and untouched gates)"), 1e-5f);
    }
}

TEST_F(CudaOpsTest, LinearGemvAndCublasLt) {
    struct Case {
        int64_t T, N, K;
        DType w;
        bool bias;
        float tol;
    };
    const Case cases[] = {
        {1, 64, 128, DType::BF16, false, 1e-2f},      {3, 300, 264, DType::BF16, true, 1e-2f},
        {8, 129, 100, DType::F16, false, 1e-2f},      {2, 77, 96, DType::F32, true, 1e-5f},
        {9, 64, 128, DType::BF16, false, 1e-2f},      {37, 512, 256, DType::BF16, true, 1e-2f},
        {300, 1000, 1024, DType::BF16, false, 1e-2f}, {64, 96, 72, DType::F16, false, 1e-2f},
        {20, 50, 64, DType::F32, false, 1e-5f},       {1, 8200, 264, DType::BF16, true, 1e-2f},
        {5, 9000, 1024, DType::BF16, false, 1e-2f},
    };
    for (const Case& c : cases) {
        Pair x = input(Shape{c.T, c.K + 8});  // x is a column slice of a wider buffer
        Pair w = input(Shape{c.N, c.K}, 0.1f, c.w);
        Pair bias = input(Shape{c.N});
        Pair y = output(Shape{c.T, c.N});
        const ViewFn xs = [K = c.K](const Tensor& t) { return t.narrow(1, 4, K); };
        const Tensor no_bias;
        cpu_->ops().linear(xs(x.host.tensor), LinearWeight::dense(w.host.tensor, c.bias ? bias.host.tensor : no_bias),
                           y.host.tensor);
        gpu_->ops().linear(xs(x.dev.tensor), LinearWeight::dense(w.dev.tensor, c.bias ? bias.dev.tensor : no_bias),
                           y.dev.tensor);
        char what[96];
        std::snprintf(what, sizeof what, "linear T=%lld N=%lld K=%lld %s", static_cast<long long>(c.T),
                      static_cast<long long>(c.N), static_cast<long long>(c.K), dtype_name(c.w).data());
        EXPECT_LE(compare(y, kWhole, what), c.tol) << what;
    }
}

TEST_F(CudaOpsTest, LinearRowsDoNotDependOnTheTokenCount) {
    // The few-token kernel and cuBLASLt round x alike: a row's result is the same alone or in a batch of 40
    // (up to fp32 summation order).
    const int64_t N = 256, K = 512;
    Pair x = input(Shape{40, K}), w = input(Shape{N, K}, 0.1f, DType::BF16);
    Pair alone = output(Shape{1, N}), batch = output(Shape{40, N});
    gpu_->ops().linear(x.dev.tensor.narrow(0, 7, 1), LinearWeight::dense(w.dev.tensor), alone.dev.tensor);
    gpu_->ops().linear(x.dev.tensor, LinearWeight::dense(w.dev.tensor), batch.dev.tensor);
    HostTensor a = back(alone), b = back(batch);
    const float e = rel_error(a.tensor, b.tensor.narrow(0, 7, 1));
    std::printf("  %-44s max rel err %.3g\n", "linear row alone vs in a batch", e);
    EXPECT_LE(e, 1e-5f);
}

TEST_F(CudaOpsTest, ConsecutiveLinearsOfOneInputAndOverwrittenInput) {
    // q/k/v share one converted input; a linear that overwrites that input must not reuse the stale conversion.
    const int64_t T = 24, K = 64;
    Pair x = input(Shape{T, K}), x2 = input(Shape{T, K});
    Pair w1 = input(Shape{K, K}, 0.1f, DType::BF16), w2 = input(Shape{K, K}, 0.1f, DType::BF16);
    Pair y1 = output(Shape{T, K});
    for (Backend* b : {cpu_.get(), gpu_.get()}) {
        const bool g = b == gpu_.get();
        const Tensor& xt = g ? x.dev.tensor : x.host.tensor;
        const LinearWeight l1 = LinearWeight::dense(g ? w1.dev.tensor : w1.host.tensor);
        const LinearWeight l2 = LinearWeight::dense(g ? w2.dev.tensor : w2.host.tensor);
        b->ops().linear(xt, l1, g ? y1.dev.tensor : y1.host.tensor);
        b->ops().linear(g ? x2.dev.tensor : x2.host.tensor, l2, xt);
        b->ops().linear(xt, l1, g ? y1.dev.tensor : y1.host.tensor);
    }
    EXPECT_LE(compare(y1, kWhole, "linear after its input was overwritten"), 1e-2f);
}

TEST_F(CudaOpsTest, RopeFullAndPartial) {
    for (auto [T, H, D, rot] : {std::tuple{5, 4, 32, 32}, std::tuple{70, 8, 128, 64}, std::tuple{3, 2, 256, 128}}) {
        Pair x = input(Shape{T, H, D});
        std::vector<int32_t> pos(T);
        for (auto& p : pos)
            p = static_cast<int32_t>(rng_() % 100000);
        cpu_->ops().rope(x.host.tensor, pos, rot, 1e6f);
        gpu_->ops().rope(x.dev.tensor, pos, rot, 1e6f);
        EXPECT_LE(compare(x, kWhole, "rope"), 1e-5f);
    }
}

// The fused attention prologue against the CPU's four separate ops (Ops' default qk_norm_rope): q heads strided as
// in gated attention, with and without QK-norm, both norm kinds, full and partial rotary dims.
TEST_F(CudaOpsTest, QkNormRopeMatchesSeparateOps) {
    for (auto [T, Hq, Hk, D, rot] :
         {std::tuple{5, 4, 2, 64, 64}, std::tuple{70, 32, 8, 128, 128}, std::tuple{3, 8, 1, 256, 64}}) {
        for (int variant = 0; variant < 3; ++variant) {
            const bool norm = variant > 0;
            const NormKind kind = variant == 2 ? NormKind::ZeroCentred : NormKind::Plain;
            Pair qbuf = input(Shape{T, 2 * Hq * D}, 2.0f), k = input(Shape{T, Hk, D}, 2.0f);
            Pair qw = input(Shape{D}), kw = input(Shape{D});
            const ViewFn q_heads = [Hq = Hq, D = D](const Tensor& t) {
                const int64_t strides[3] = {t.stride(0), 2 * D, 1};
                return Tensor(t.data(), DType::F32, Shape{t.dim(0), Hq, D}, strides, t.device());
            };
            std::vector<int32_t> pos(T);
            for (auto& p : pos)
                p = static_cast<int32_t>(rng_() % 100000);
            cpu_->ops().qk_norm_rope(q_heads(qbuf.host.tensor), k.host.tensor, norm ? qw.host.tensor : Tensor(),
                                     norm ? kw.host.tensor : Tensor(), 1e-6f, kind, pos, rot, 1e6f);
            gpu_->ops().qk_norm_rope(q_heads(qbuf.dev.tensor), k.dev.tensor, norm ? qw.dev.tensor : Tensor(),
                                     norm ? kw.dev.tensor : Tensor(), 1e-6f, kind, pos, rot, 1e6f);
            EXPECT_LE(compare(qbuf, kWhole, "qk_norm_rope q (and untouched gates)"), 1e-5f);
            EXPECT_LE(compare(k, kWhole, "qk_norm_rope k"), 1e-5f);
        }
    }
}

// The whole attention prologue in one kernel (QK-norm, RoPE, K/V into BF16 caches) against the CPU's qk_norm_rope
// then write_kv: head dims with and without partial rotary, a skipped slot, GQA with one KV head; without QK-norm
// (qwen2), with it, and zero-centred (the first shape).
TEST_F(CudaOpsTest, QkNormRopeWriteKvMatchesSeparateOps) {
    for (auto [T, Hq, Hk, D, rot, variant] :
         {std::tuple{7, 8, 2, 128, 128, 1}, std::tuple{7, 8, 2, 128, 128, 0}, std::tuple{7, 8, 2, 128, 128, 2},
          std::tuple{3, 4, 4, 64, 32, 1}, std::tuple{9, 4, 1, 32, 32, 1}}) {
        const bool norm = variant > 0;
        const NormKind kind = variant == 2 ? NormKind::ZeroCentred : NormKind::Plain;
        const int32_t bs = 16, num_blocks = 4, ctx = 5;
        ForwardBatchBuilder builder(bs);
        const std::vector<int32_t> tokens(T, 1), table = {3, 1};
        builder.add_sequence(tokens, ctx, table, 0);
        ForwardBatch batch = builder.view();
        std::vector<int64_t> slots(batch.slot_mapping.begin(), batch.slot_mapping.end());
        slots[1] = -1;  // skipped
        batch.slot_mapping = slots;
        Pair q = input(Shape{T, Hq, D}, 2.0f), k = input(Shape{T, Hk, D}, 2.0f), v = input(Shape{T, Hk, D}, 2.0f);
        Pair qw = input(Shape{D}), kw = input(Shape{D});
        const Shape cache_shape{num_blocks, bs, Hk, D};
        HostTensor kc = HostTensor::empty(DType::F32, cache_shape), vc = HostTensor::empty(DType::F32, cache_shape);
        std::fill_n(kc.tensor.data_as<float>(), kc.tensor.numel(), 0.0f);
        std::fill_n(vc.tensor.data_as<float>(), vc.tensor.numel(), 0.0f);
        DeviceTensor d_kc = to_device(*gpu_, to_dtype(kc.tensor, DType::BF16).tensor);
        DeviceTensor d_vc = to_device(*gpu_, to_dtype(vc.tensor, DType::BF16).tensor);
        cpu_->ops().qk_norm_rope_write_kv(q.host.tensor, k.host.tensor, v.host.tensor, norm ? qw.host.tensor : Tensor(),
                                          norm ? kw.host.tensor : Tensor(), 1e-6f, kind, batch, rot, 1e6f, kc.tensor,
                                          vc.tensor);
        gpu_->ops().qk_norm_rope_write_kv(q.dev.tensor, k.dev.tensor, v.dev.tensor, norm ? qw.dev.tensor : Tensor(),
                                          norm ? kw.dev.tensor : Tensor(), 1e-6f, kind, batch, rot, 1e6f, d_kc.tensor,
                                          d_vc.tensor);
        EXPECT_LE(compare(q, kWhole, "qk_norm_rope_write_kv q"), 1e-5f);
        EXPECT_LE(compare(k, kWhole, "qk_norm_rope_write_kv k"), 1e-5f);
        EXPECT_LE(compare(v, kWhole, "qk_norm_rope_write_kv v (unchanged)"), 0.0f);
        // The caches, widened back to f32: within one bf16 rounding of the CPU's f32 values; zero where nothing
        // was stored (the skipped slot included).
        for (const auto& [cpu_cache, gpu_cache, what] :
             {std::tuple{&kc, &d_kc, "key cache"}, std::tuple{&vc, &d_vc, "value cache"}}) {
            HostTensor got = to_host(*gpu_, gpu_cache->tensor);
            HostTensor widened = HostTensor::empty(DType::F32, cache_shape);
            for (int64_t i = 0; i < widened.tensor.numel(); ++i)
                widened.tensor.data_as<float>()[i] = bf16_to_f32(got.tensor.data_as<uint16_t>()[i]);
            const float e = rel_error(cpu_cache->tensor, widened.tensor);
            std::printf("  %-44s max rel err %.3g\n", what, e);
            EXPECT_LE(e, 8e-3f) << what;
        }
    }
}

TEST_F(CudaOpsTest, Elementwise) {
    for (auto [T, N] : {std::pair{1, 17}, std::pair{33, 4096}}) {
        Pair a = input(Shape{T, N}, 4.0f), b = input(Shape{T, N}, 4.0f), g1 = input(Shape{T, 1}, 4.0f);
        Pair out = output(Shape{T, N});
        cpu_->ops().silu_mul(a.host.tensor, b.host.tensor, out.host.tensor);
        gpu_->ops().silu_mul(a.dev.tensor, b.dev.tensor, out.dev.tensor);
        EXPECT_LE(compare(out, kWhole, "silu_mul"), 1e-5f);
        cpu_->ops().sigmoid_mul(a.host.tensor, b.host.tensor);
        gpu_->ops().sigmoid_mul(a.dev.tensor, b.dev.tensor);
        EXPECT_LE(compare(a, kWhole, "sigmoid_mul"), 1e-5f);
        cpu_->ops().sigmoid_mul(a.host.tensor, g1.host.tensor);
        gpu_->ops().sigmoid_mul(a.dev.tensor, g1.dev.tensor);
        EXPECT_LE(compare(a, kWhole, "sigmoid_mul [T,1] gate"), 1e-5f);
        cpu_->ops().add(a.host.tensor, b.host.tensor);
        gpu_->ops().add(a.dev.tensor, b.dev.tensor);
        EXPECT_LE(compare(a, kWhole, "add"), 1e-6f);
    }
}

TEST_F(CudaOpsTest, CopyConvertsAndGatherRows) {
    const int64_t T = 9, N = 300;
    Pair src = input(Shape{T, N}, 2.0f);
    for (DType mid : {DType::BF16, DType::F16, DType::F32}) {
        // f32 -> mid -> f32 on both backends (the values are bf16-exact, so F16 rounding is the same on both).
        HostTensor h_mid = HostTensor::empty(mid, Shape{T, N});
        DeviceTensor d_mid = device_empty(*gpu_, mid, Shape{T, N});
        Pair out = output(Shape{T, N});
        cpu_->ops().copy(h_mid.tensor, src.host.tensor);
        cpu_->ops().copy(out.host.tensor, h_mid.tensor);
        gpu_->ops().copy(d_mid.tensor, src.dev.tensor);
        gpu_->ops().copy(out.dev.tensor, d_mid.tensor);
        EXPECT_EQ(compare(out, kWhole, "copy via a 16/32-bit type"), 0.0f);
    }
    const std::vector<int32_t> rows = {8, 0, 3, 3};
    Pair g = output(Shape{4, N});
    cpu_->ops().gather_rows(src.host.tensor, rows, g.host.tensor);
    gpu_->ops().gather_rows(src.dev.tensor, rows, g.dev.tensor);
    EXPECT_EQ(compare(g, kWhole, "gather_rows"), 0.0f);
}

TEST_F(CudaOpsTest, ArgmaxFirstOnTies) {
    for (int64_t V : {5, 1000, 151936}) {
        const int64_t R = 4;
        Pair logits = input(Shape{R, V});
        float* h = logits.host.tensor.data_as<float>();
        h[1 * V + V / 2] = 7.0f, h[1 * V + V - 1] = 7.0f;  // a tie: the lower index wins
        h[2 * V + 0] = 9.0f;
        gpu_->copy(logits.dev.tensor, logits.host.tensor);
        std::vector<int32_t> a(R, -1), b(R, -2);
        cpu_->ops().argmax(logits.host.tensor, a);
        gpu_->ops().argmax(logits.dev.tensor, b);
        EXPECT_EQ(a, b) << "V=" << V;
        EXPECT_EQ(b[1], V / 2);
        EXPECT_EQ(b[2], 0);
    }
}

// Several sequences in one batch: a decode with a long cached context (split-KV), a prefill chunk with a cached
// prefix, a fresh prefill, and a short decode; blocks scattered over the pool.
struct AttentionCase {
    int H_q, H_kv, D;
};

struct AttentionSeq {
    int32_t ctx, n;  // cached tokens, new tokens
};

class CudaAttentionTest : public CudaOpsTest, public ::testing::WithParamInterface<AttentionCase> {
  protected:
    void check(const std::vector<AttentionSeq>& seqs);
};

TEST_P(CudaAttentionTest, WriteKvThenPagedAttentionMatchCpu) {
    check({{2000, 1}, {37, 50}, {0, 130}, {5, 1}, {300, 9}});
}

// Decode-only batches take the decode kernel: a few sequences (split-KV) and many (one split), contexts from one key.
TEST_P(CudaAttentionTest, DecodeBatchesMatchCpu) {
    check({{2000, 1}, {0, 1}, {300, 1}, {16, 1}, {47, 1}});
    std::vector<AttentionSeq> many;
    for (int i = 0; i < 160; ++i)
        many.push_back({static_cast<int32_t>(rng_() % 400), 1});
    check(many);
}

void CudaAttentionTest::check(const std::vector<AttentionSeq>& seqs) {
    const auto [H_q, H_kv, D] = GetParam();
    const int32_t bs = 16;
    using Seq = AttentionSeq;
    int32_t total_blocks = 0;
    for (const Seq& s : seqs)
        total_blocks += (s.ctx + s.n + bs - 1) / bs;
    const int32_t num_blocks = total_blocks + 7;
    std::vector<int32_t> pool(num_blocks);
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng_);
    ForwardBatchBuilder builder(bs);
    std::vector<std::vector<int32_t>> tokens;
    size_t next = 0;
    for (const Seq& s : seqs) {
        std::vector<int32_t> table((s.ctx + s.n + bs - 1) / bs);
        for (auto& b : table)
            b = pool[next++];
        tokens.emplace_back(s.n, 1);
        builder.add_sequence(tokens.back(), s.ctx, table, 0);
    }
    const ForwardBatch batch = builder.view();
    const int64_t T = batch.num_tokens;

    // Caches full of random values (the cached prefixes); the GPU holds them as BF16 (exact: values are bf16).
    const Shape cache_shape{num_blocks, bs, H_kv, D};
    HostTensor kc = random_f32(rng_, cache_shape), vc = random_f32(rng_, cache_shape);
    DeviceTensor d_kc = to_device(*gpu_, to_dtype(kc.tensor, DType::BF16).tensor);
    DeviceTensor d_vc = to_device(*gpu_, to_dtype(vc.tensor, DType::BF16).tensor);
    Pair k = input(Shape{T, H_kv, D}), v = input(Shape{T, H_kv, D});
    Pair q = input(Shape{T, H_q, D});
    Pair out = output(Shape{T, H_q, D});
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    // Head dims 64/128/256 take the tensor-core kernels (decode and prefill), which round Q and the softmax weights
    // to bf16 (as FlashAttention does); the general kernel (head dims 16/32) computes in fp32.
    const float tolerance = D >= 64 ? 5e-3f : 2e-5f;

    for (int pass = 0; pass < 2; ++pass) {  // pass 1: through begin_step's one upload, as Model::forward does
        if (pass == 1) gpu_->ops().begin_step(batch);
        cpu_->ops().write_kv(k.host.tensor, v.host.tensor, batch, kc.tensor, vc.tensor);
        gpu_->ops().write_kv(k.dev.tensor, v.dev.tensor, batch, d_kc.tensor, d_vc.tensor);
        cpu_->ops().paged_attention(q.host.tensor, kc.tensor, vc.tensor, batch, scale, out.host.tensor);
        gpu_->ops().paged_attention(q.dev.tensor, d_kc.tensor, d_vc.tensor, batch, scale, out.dev.tensor);
        if (pass == 1) gpu_->ops().end_step();
        EXPECT_LE(compare(out, kWhole, pass ? "paged_attention (step upload)" : "paged_attention"), tolerance);
        poison(*gpu_, out.dev);
    }
    HostTensor k_back = to_host(*gpu_, d_kc.tensor);
    const HostTensor k_ref = to_dtype(kc.tensor, DType::BF16);
    EXPECT_EQ(std::memcmp(k_back.tensor.data(), k_ref.tensor.data(), k_ref.tensor.nbytes()), 0)
        << "key cache after write_kv";
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaAttentionTest,
                         ::testing::Values(AttentionCase{4, 2, 32}, AttentionCase{32, 8, 128},
                                           AttentionCase{16, 16, 64}, AttentionCase{8, 1, 256},
                                           AttentionCase{28, 4, 128}, AttentionCase{64, 4, 128}),
                         [](const auto& info) {
                             char name[48];
                             std::snprintf(name, sizeof name, "q%d_kv%d_d%d", info.param.H_q, info.param.H_kv,
                                           info.param.D);
                             return std::string(name);
                         });

TEST_F(CudaOpsTest, MoeAndDeltaNetOpsRefuseLoudly) {
    DeviceTensor x = device_empty(*gpu_, DType::F32, Shape{2, 4});
    EXPECT_DEATH(gpu_->ops().l2_norm(x.tensor.reshape(Shape{2, 1, 4}), 1e-6f), "not on CUDA yet");
}

}  // namespace
}  // namespace pagoda
