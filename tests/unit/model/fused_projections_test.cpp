// fuse_projections: q/k/v (and their biases), gate/up and the delta-net input projections lying back to back in memory
// become one view, and the attention, MLP and Gated DeltaNet blocks give the same output through the fused view as
// through the separate weights (on the CPU backend; the GPU golden tests run the fused path, since upload_weights
// places the weights back to back).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "model/arch/blocks.h"
#include "runtime/backend.h"
#include "runtime/cache_pools.h"
#include "tensor/buffer.h"

namespace pagoda::model {
namespace {

// Consecutive [rows_i, cols] f32 tensors carved from one random buffer, back to back.
struct Packed {
    std::vector<float> data;
    std::vector<Tensor> parts;
};
Packed packed(std::initializer_list<int64_t> rows, int64_t cols, std::mt19937& rng) {
    Packed p;
    int64_t total = 0;
    for (int64_t r : rows)
        total += r * cols;
    p.data.resize(static_cast<size_t>(total));
    std::uniform_real_distribution<float> d(-0.5f, 0.5f);
    for (float& v : p.data)
        v = d(rng);
    int64_t off = 0;
    for (int64_t r : rows) {
        p.parts.emplace_back(p.data.data() + off, DType::F32, cols == 1 ? Shape{r} : Shape{r, cols});
        off += r * cols;
    }
    return p;
}

TEST(FusedProjections, BackToBackOnly) {
    std::mt19937 rng(1);
    Packed p = packed({4, 2, 2}, 8, rng);
    const Tensor all = rows_back_to_back({&p.parts[0], &p.parts[1], &p.parts[2]});
    ASSERT_TRUE(all.defined());
    EXPECT_EQ(all.shape(), (Shape{8, 8}));
    EXPECT_EQ(all.data(), p.parts[0].data());
    // Out of order, a gap, a different width or dtype: no view.
    EXPECT_FALSE(rows_back_to_back({&p.parts[0], &p.parts[2]}).defined());
    EXPECT_FALSE(rows_back_to_back({&p.parts[1], &p.parts[0]}).defined());
    const Tensor narrower(p.parts[1].data(), DType::F32, Shape{4, 4});
    EXPECT_FALSE(rows_back_to_back({&p.parts[0], &narrower}).defined());
    const Tensor bf16(p.parts[1].data(), DType::BF16, Shape{2, 8});
    EXPECT_FALSE(rows_back_to_back({&p.parts[0], &bf16}).defined());
    const Tensor undefined;
    EXPECT_FALSE(rows_back_to_back({&p.parts[0], &undefined}).defined());

    // Biases that are not back to back leave q/k/v unfused (the fused linear takes one bias).
    Packed bias = packed({4, 2, 2}, 1, rng);
    AttentionWeights w;
    w.q = LinearWeight::dense(p.parts[0], bias.parts[0]);
    w.k = LinearWeight::dense(p.parts[1], bias.parts[2]);
    w.v = LinearWeight::dense(p.parts[2], bias.parts[1]);
    fuse_projections(w);
    EXPECT_FALSE(w.qkv.defined());
    w.k.bias = bias.parts[1], w.v.bias = bias.parts[2];
    fuse_projections(w);
    EXPECT_TRUE(w.qkv.defined());
    EXPECT_EQ(w.qkv.bias.shape(), (Shape{8}));
}

struct Case {
    const char* name;
    bool bias, qk_norm, gate;
};

class FusedAttention : public ::testing::TestWithParam<Case> {};

TEST_P(FusedAttention, SameOutputAsSeparateWeights) {
    const Case c = GetParam();
    std::mt19937 rng(7);
    const int64_t H = 32, nq = 4, nkv = 2, hd = 16, q_rows = nq * hd * (c.gate ? 2 : 1);
    ModelSpec spec;
    spec.hidden_size = H, spec.num_attention_heads = nq, spec.num_key_value_heads = nkv, spec.head_dim = hd;
    spec.zero_centered_norm = c.gate;
    Packed w = packed({q_rows, nkv * hd, nkv * hd}, H, rng);
    Packed o = packed({H}, nq * hd, rng);
    Packed b = packed({q_rows, nkv * hd, nkv * hd}, 1, rng);
    Packed norms = packed({hd, hd}, 1, rng);
    AttentionWeights separate;
    separate.q = LinearWeight::dense(w.parts[0]), separate.k = LinearWeight::dense(w.parts[1]);
    separate.v = LinearWeight::dense(w.parts[2]), separate.o = LinearWeight::dense(o.parts[0]);
    if (c.bias) separate.q.bias = b.parts[0], separate.k.bias = b.parts[1], separate.v.bias = b.parts[2];
    if (c.qk_norm) separate.q_norm = norms.parts[0], separate.k_norm = norms.parts[1];
    AttentionWeights fused = separate;
    fuse_projections(fused);
    ASSERT_TRUE(fused.qkv.defined());
    ASSERT_EQ(fused.qkv.bias.defined(), c.bias);

    auto backend = make_cpu_backend();
    // Two sequences: 5 new tokens after a cached prefix of 0, and 3 after 0 (one step, so no prefix is needed).
    const int32_t block_size = 4;
    ForwardBatchBuilder builder(block_size);
    const std::vector<int32_t> a_ids = {1, 2, 3, 4, 5}, b_ids = {6, 7, 8};
    const std::vector<int32_t> a_table = {0, 1}, b_table = {2};
    builder.add_sequence(a_ids, 0, a_table, 0);
    builder.add_sequence(b_ids, 0, b_table, 0);
    const ForwardBatch batch = builder.view();
    Packed x = packed({batch.num_tokens}, H, rng);

    const RopeTable rope = default_rope_table(10000.0f, static_cast<int>(hd));
    std::vector<std::vector<float>> outputs;
    for (const AttentionWeights* weights : {&separate, &fused}) {
        auto pool = KvCachePool::create(
            backend->allocator(), {1, 4, block_size, static_cast<int32_t>(nkv), static_cast<int32_t>(hd), DType::F32});
        ASSERT_TRUE(pool.ok()) << pool.message();
        Arena arena;
        arena.reserve(backend->allocator(), size_t{1} << 20);
        std::vector<float> out(static_cast<size_t>(batch.num_tokens * H));
        attention_forward(backend->ops(), spec, *weights, x.parts[0], batch, rope, pool->layer(0), arena,
                          Tensor(out.data(), DType::F32, Shape{batch.num_tokens, H}));
        outputs.push_back(out);
    }
    for (size_t i = 0; i < outputs[0].size(); ++i)
        ASSERT_NEAR(outputs[1][i], outputs[0][i], 1e-6f * (1.0f + std::abs(outputs[0][i]))) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(Variants, FusedAttention,
                         ::testing::Values(Case{"qwen2", true, false, false}, Case{"qwen3", false, true, false},
                                           Case{"gated", false, true, true}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(FusedProjections, MlpSameOutputAsSeparateWeights) {
    std::mt19937 rng(3);
    const int64_t H = 24, I = 40, T = 6;
    Packed gu = packed({I, I}, H, rng);
    Packed down = packed({H}, I, rng);
    MlpWeights separate;
    separate.gate = LinearWeight::dense(gu.parts[0]), separate.up = LinearWeight::dense(gu.parts[1]);
    separate.down = LinearWeight::dense(down.parts[0]);
    MlpWeights fused = separate;
    fuse_projections(fused);
    ASSERT_TRUE(fused.gate_up.defined());
    EXPECT_EQ(fused.gate_up.data.shape(), (Shape{2 * I, H}));
    Packed x = packed({T}, H, rng);
    auto backend = make_cpu_backend();
    std::vector<std::vector<float>> outputs;
    for (const MlpWeights* weights : {&separate, &fused}) {
        Arena arena;
        arena.reserve(backend->allocator(), size_t{1} << 20);
        std::vector<float> out(static_cast<size_t>(T * H));
        mlp_forward(backend->ops(), *weights, x.parts[0], arena, Tensor(out.data(), DType::F32, Shape{T, H}));
        outputs.push_back(out);
    }
    for (size_t i = 0; i < outputs[0].size(); ++i)
        ASSERT_NEAR(outputs[1][i], outputs[0][i], 1e-6f * (1.0f + std::abs(outputs[0][i]))) << "element " << i;
}

// The Gated DeltaNet block: qkv | z | b | a back to back become one projection, with the same output (two sequences,
// one state slot each, from zero state).
TEST(FusedProjections, DeltaNetSameOutputAsSeparateWeights) {
    std::mt19937 rng(5);
    ModelSpec spec;
    spec.hidden_size = 24, spec.linear_num_key_heads = 2, spec.linear_num_value_heads = 4;
    spec.linear_key_head_dim = 8, spec.linear_value_head_dim = 6, spec.linear_conv_kernel_dim = 4;
    spec.rms_norm_eps = 1e-6;
    const int64_t H = 24, Hv = 4, dv = 6, Kd = 16, Vd = Hv * dv, C = 2 * Kd + Vd, K = 4;
    Packed in = packed({C, Vd, Hv, Hv}, H, rng);
    Packed out_w = packed({H}, Vd, rng);
    Packed conv = packed({C}, K, rng);
    Packed vecs = packed({Hv, Hv, dv}, 1, rng);
    DeltaNetWeights separate;
    separate.qkv = LinearWeight::dense(in.parts[0]), separate.z = LinearWeight::dense(in.parts[1]);
    separate.b = LinearWeight::dense(in.parts[2]), separate.a = LinearWeight::dense(in.parts[3]);
    separate.out = LinearWeight::dense(out_w.parts[0]);
    separate.conv = conv.parts[0], separate.a_log = vecs.parts[0], separate.dt_bias = vecs.parts[1];
    separate.norm = vecs.parts[2];
    DeltaNetWeights fused = separate;
    fuse_projections(fused);
    ASSERT_TRUE(fused.in_proj.defined());
    EXPECT_EQ(fused.in_proj.data.shape(), (Shape{C + Vd + 2 * Hv, H}));

    auto backend = make_cpu_backend();
    ForwardBatchBuilder builder(4);
    const std::vector<int32_t> a_ids = {1, 2, 3, 4, 5}, b_ids = {6, 7, 8}, a_table = {0, 1}, b_table = {2};
    builder.add_sequence(a_ids, 0, a_table, 0);
    builder.add_sequence(b_ids, 0, b_table, 1);
    const ForwardBatch batch = builder.view();
    Packed x = packed({batch.num_tokens}, H, rng);
    std::vector<std::vector<float>> outputs;
    for (const DeltaNetWeights* weights : {&separate, &fused}) {
        std::vector<float> conv_state(static_cast<size_t>(2 * C * (K - 1))),
            state(static_cast<size_t>(2 * Hv * 8 * dv));
        Arena arena;
        arena.reserve(backend->allocator(), size_t{1} << 20);
        std::vector<float> out(static_cast<size_t>(batch.num_tokens * H));
        delta_net_forward(backend->ops(), spec, *weights, x.parts[0], batch,
                          Tensor(conv_state.data(), DType::F32, Shape{2, C, K - 1}),
                          Tensor(state.data(), DType::F32, Shape{2, Hv, 8, dv}), arena,
                          Tensor(out.data(), DType::F32, Shape{batch.num_tokens, H}));
        outputs.push_back(out);
    }
    for (size_t i = 0; i < outputs[0].size(); ++i)
        ASSERT_NEAR(outputs[1][i], outputs[0][i], 1e-6f * (1.0f + std::abs(outputs[0][i]))) << "element " << i;
}

}  // namespace
}  // namespace pagoda::model
