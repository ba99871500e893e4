// fp8 (e4m3) KV caches on the CPU, the reference the CUDA kernels are held to: the flag's names, the pool's bytes and
// per-layer scales, the quantising write (e4m3(x · 1/scale), nearest even, saturating at ±448: the one rounding,
// f32_to_f8e4m3), scales calculated from the rows stored, and attention over an fp8 cache: the same as attention over
// the values it holds (fp32 tolerance), and within a stated bound of attention over the F32 cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "runtime/backend.h"
#include "runtime/cache_pools.h"
#include "runtime/forward_batch.h"
#include "runtime/ops.h"
#include "test_util.h"

namespace pagoda {
namespace {

TEST(KvCacheDtype, ParsesVllmsNames) {
    EXPECT_EQ(*parse_kv_cache_dtype("auto"), KvCacheDtype::kAuto);
    EXPECT_EQ(*parse_kv_cache_dtype("bfloat16"), KvCacheDtype::kBf16);
    EXPECT_EQ(*parse_kv_cache_dtype("fp8"), KvCacheDtype::kFp8E4M3);
    EXPECT_EQ(*parse_kv_cache_dtype("fp8_e4m3"), KvCacheDtype::kFp8E4M3);
    const auto e5m2 = parse_kv_cache_dtype("fp8_e5m2");
    ASSERT_FALSE(e5m2.ok());
    EXPECT_NE(e5m2.message().find("use fp8"), std::string::npos) << e5m2.message();
    EXPECT_FALSE(parse_kv_cache_dtype("int8").ok());
    EXPECT_EQ(kv_cache_dtype_name(KvCacheDtype::kFp8E4M3), "fp8_e4m3");
}

TEST(KvCachePoolFp8, OneByteAnElementAndScalesPerLayer) {
    KvCacheConfig c{2, 4, 16, 2, 8, DType::F32};
    EXPECT_EQ(KvCachePool::bytes_per_block(c), 2u * 2 * 16 * 2 * 8 * 4);
    auto f32 = KvCachePool::create(host_allocator(), c);
    ASSERT_TRUE(f32.ok()) << f32.message();
    EXPECT_EQ(f32->layer(1).scales, nullptr);

    c.dtype = DType::F8_E4M3;
    EXPECT_EQ(KvCachePool::bytes_per_block(c), 2u * 2 * 16 * 2 * 8);
    auto fp8 = KvCachePool::create(host_allocator(), c);
    ASSERT_TRUE(fp8.ok()) << fp8.message();
    const KvCacheLayer layer = fp8->layer(1);
    EXPECT_EQ(layer.key.dtype(), DType::F8_E4M3);
    ASSERT_NE(layer.scales, nullptr);
    EXPECT_NE(layer.scales, fp8->layer(0).scales);  // one pair a layer
    EXPECT_EQ(layer.scales->k, 1.0f);               // vLLM's default without scales
    EXPECT_EQ(layer.scales->v, 1.0f);
    EXPECT_FALSE(layer.scales->pending);
    KvCachePool moved = std::move(fp8).value();
    EXPECT_EQ(moved.layer(1).scales, layer.scales);  // the ops hold on to them across a move of the pool

    c.layer_scales = {{0.5f, 0.25f, false}, {2.0f, 4.0f, false}};
    auto given = KvCachePool::create(host_allocator(), c);
    ASSERT_TRUE(given.ok()) << given.message();
    EXPECT_EQ(given->scales(1).k, 2.0f);
    EXPECT_EQ(given->scales(1).v, 4.0f);
    c.calculate_scales = true;
    auto calculated = KvCachePool::create(host_allocator(), c);
    ASSERT_TRUE(calculated.ok());
    EXPECT_TRUE(calculated->scales(0).pending);

    c.layer_scales.pop_back();
    EXPECT_FALSE(KvCachePool::create(host_allocator(), c).ok());  // one pair a layer or none
    c.layer_scales.clear();
    c.dtype = DType::F32;
    EXPECT_FALSE(KvCachePool::create(host_allocator(), c).ok());  // scales belong to fp8 caches only
}

// One sequence of `L` tokens, all new, over blocks 0.. of `block_size`; its K/V [L, H, D].
struct Written {
    std::vector<float> k, v;
    std::vector<int32_t> table;
};
constexpr int64_t kH = 2, kD = 16;
constexpr int32_t kBlock = 4;

ForwardBatch one_sequence(ForwardBatchBuilder& b, int32_t L, std::vector<int32_t>& table) {
    table.resize(static_cast<size_t>((L + kBlock - 1) / kBlock));
    std::iota(table.begin(), table.end(), 0);
    const std::vector<int32_t> tokens(static_cast<size_t>(L), 1);
    b.add_sequence(tokens, 0, table, 0);
    return b.view();
}

Tensor rows(std::vector<float>& x, int64_t T) {
    return Tensor(x.data(), DType::F32, {T, kH, kD});
}

// T rows [T, H, D] of values in [-range, range].
std::vector<float> random_rows(int64_t T, std::mt19937& rng, float range) {
    const HostTensor t = testing::random_f32({T, kH, kD}, rng, -range, range);
    return std::vector<float>(t.tensor.data_as<float>(), t.tensor.data_as<float>() + T * kH * kD);
}

TEST(KvCacheFp8, WriteQuantisesWithTheLayerScale) {
    auto backend = make_cpu_backend();
    KvCacheConfig c{1, 4, kBlock, kH, kD, DType::F8_E4M3};
    c.layer_scales = {{0.01f, 0.5f, false}};
    auto pool = KvCachePool::create(backend->allocator(), c);
    ASSERT_TRUE(pool.ok()) << pool.message();
    std::mt19937 rng(3);
    const int32_t T = 6;
    // K up to ±6: beyond 448 · 0.01 = 4.48, so some values saturate.
    std::vector<float> kx = random_rows(T, rng, 6.0f), vx = random_rows(T, rng, 1.0f);
    ForwardBatchBuilder b(kBlock);
    std::vector<int32_t> table;
    const ForwardBatch fb = one_sequence(b, T, table);
    backend->ops().write_kv(rows(kx, T), rows(vx, T), fb, pool->layer(0));

    const auto* kc = pool->key(0).data_as<uint8_t>();
    const auto* vc = pool->value(0).data_as<uint8_t>();
    int saturated = 0;
    for (int64_t i = 0; i < T * kH * kD; ++i) {  // slot t is row t here: blocks 0.. in order
        EXPECT_EQ(kc[i], f32_to_f8e4m3(kx[i] * (1.0f / 0.01f))) << i;
        EXPECT_EQ(vc[i], f32_to_f8e4m3(vx[i] * (1.0f / 0.5f))) << i;
        const float deq = f8e4m3_to_f32(kc[i]) * 0.01f;
        if (std::fabs(kx[i]) > 4.48f) {
            EXPECT_FLOAT_EQ(std::fabs(deq), 4.48f) << "saturates at ±448 · scale";
            ++saturated;
        } else {
            // Round to nearest with 3 mantissa bits: within 1/16 of the value, or 2^-10 · scale below e4m3's normals.
            EXPECT_LE(std::fabs(deq - kx[i]), std::max(std::fabs(kx[i]) / 16, 0x1p-10f * 0.01f) * 1.0001f) << i;
        }
    }
    EXPECT_GT(saturated, 0);
}

// Per-head scales (a checkpoint's [num_kv_heads] k_scale / v_scale): head h is stored with (1 / k) / k_heads[h] and
// read with k · k_heads[h]; attention over such a cache equals attention over the values it holds. Calculated
// scales replace them (one per layer, as vLLM's --calculate-kv-scales).
TEST(KvCacheFp8, PerHeadScalesStoreAndReadEachHeadWithItsOwn) {
    auto backend = make_cpu_backend();
    Ops& ops = backend->ops();
    constexpr int64_t Hq = 4;
    const int32_t L = 13;
    const float k_heads[kH] = {0.02f, 0.005f}, v_heads[kH] = {0.25f, 1.0f};
    KvCacheConfig c{1, 8, kBlock, kH, kD, DType::F8_E4M3};
    c.layer_scales = {KvScales{.k_heads = k_heads, .v_heads = v_heads}};
    auto pool = KvCachePool::create(backend->allocator(), c);
    c.dtype = DType::F32, c.layer_scales.clear();
    auto held = KvCachePool::create(backend->allocator(), c);  // F32 copy of what the fp8 cache holds
    ASSERT_TRUE(pool.ok() && held.ok());
    std::mt19937 rng(9);
    std::vector<float> kx = random_rows(L, rng, 2.0f), vx = random_rows(L, rng, 2.0f);
    ForwardBatchBuilder b(kBlock);
    std::vector<int32_t> table;
    const ForwardBatch fb = one_sequence(b, L, table);
    ops.write_kv(rows(kx, L), rows(vx, L), fb, pool->layer(0));
    const auto* kc = pool->key(0).data_as<uint8_t>();
    const auto* vc = pool->value(0).data_as<uint8_t>();
    for (int64_t i = 0; i < L * kH * kD; ++i) {
        const int64_t h = i / kD % kH;
        ASSERT_EQ(kc[i], f32_to_f8e4m3(kx[i] * (1.0f / k_heads[h]))) << i;
        ASSERT_EQ(vc[i], f32_to_f8e4m3(vx[i] * (1.0f / v_heads[h]))) << i;
        held->key(0).data_as<float>()[i] = f8e4m3_to_f32(kc[i]) * k_heads[h];
        held->value(0).data_as<float>()[i] = f8e4m3_to_f32(vc[i]) * v_heads[h];
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(kD));
    auto q = testing::random_f32({L, Hq, kD}, rng);
    auto attend = [&](const KvCachePool& p) {
        HostTensor out = HostTensor::empty(DType::F32, {L, Hq, kD});
        ops.paged_attention(q.tensor, p.layer(0), fb, scale, out.tensor);
        return std::vector<float>(out.tensor.data_as<float>(), out.tensor.data_as<float>() + L * Hq * kD);
    };
    const std::vector<float> got = attend(*pool), want = attend(*held);
    float worst = 0;
    for (size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, std::fabs(got[i] - want[i]));
    EXPECT_LE(worst, 1e-6f);

    c.dtype = DType::F8_E4M3, c.layer_scales = {KvScales{.k_heads = k_heads, .v_heads = v_heads}};
    c.calculate_scales = true;
    auto calculated = KvCachePool::create(backend->allocator(), c);
    ASSERT_TRUE(calculated.ok());
    EXPECT_TRUE(calculated->scales(0).pending);
    EXPECT_EQ(calculated->scales(0).k_heads, nullptr);
}

TEST(KvCacheFp8, CalculatedScalesComeFromTheStoredRowsAmax) {
    auto backend = make_cpu_backend();
    KvCacheConfig c{1, 4, kBlock, kH, kD, DType::F8_E4M3};
    c.calculate_scales = true;
    auto pool = KvCachePool::create(backend->allocator(), c);
    ASSERT_TRUE(pool.ok()) << pool.message();
    std::mt19937 rng(4);
    const int32_t T = 5;
    std::vector<float> kx = random_rows(T, rng, 3.0f), vx = random_rows(T, rng, 1.0f);
    kx[3 * kH * kD] = 1000.0f;  // token 3 is not stored below: no part of the amax
    ForwardBatchBuilder b(kBlock);
    std::vector<int32_t> table;
    ForwardBatch fb = one_sequence(b, T, table);
    std::vector<int64_t> slots(fb.slot_mapping.begin(), fb.slot_mapping.end());

    std::vector<int64_t> none(slots.size(), -1);  // a step that stores nothing (the warm-up's) leaves them pending
    fb.slot_mapping = none;
    backend->ops().write_kv(rows(kx, T), rows(vx, T), fb, pool->layer(0));
    EXPECT_TRUE(pool->scales(0).pending);

    slots[3] = -1;
    fb.slot_mapping = slots;
    backend->ops().write_kv(rows(kx, T), rows(vx, T), fb, pool->layer(0));
    float amax_k = 0, amax_v = 0;
    for (int64_t t = 0; t < T; ++t) {
        if (t == 3) continue;
        for (int64_t i = 0; i < kH * kD; ++i) {
            amax_k = std::max(amax_k, std::fabs(kx[t * kH * kD + i]));
            amax_v = std::max(amax_v, std::fabs(vx[t * kH * kD + i]));
        }
    }
    const KvScales s = pool->scales(0);
    EXPECT_FALSE(s.pending);
    EXPECT_EQ(s.k, amax_k / 448.0f);
    EXPECT_EQ(s.v, amax_v / 448.0f);
    // The largest stored value is stored as 448 exactly.
    const auto* kc = pool->key(0).data_as<uint8_t>();
    float stored_max = 0;
    for (int64_t i = 0; i < T * kH * kD; ++i)
        if (i / (kH * kD) != 3) stored_max = std::max(stored_max, std::fabs(f8e4m3_to_f32(kc[i])));
    EXPECT_EQ(stored_max, 448.0f);

    // Later writes keep them.
    for (float& x : kx)
        x *= 10.0f;
    backend->ops().write_kv(rows(kx, T), rows(vx, T), fb, pool->layer(0));
    EXPECT_EQ(pool->scales(0).k, s.k);
}

// Attention over an fp8 cache is attention over what it holds, and close to the F32 cache's. The bound: an output is a
// convex combination of V rows, each V element stored within half an e4m3 step; with the amax scale (1/448 for these
// unit-range values) the largest step is 32 (values in [256, 448)), so V moves an output by at most 16/448 = 0.036;
// K's error only reweighs rows of V, within a few thousandths here. Bound 0.05 (measured 0.032, the first token, whose
// output is its own V row).
TEST(KvCacheFp8, AttentionReadsTheStoredValuesAndStaysClose) {
    auto backend = make_cpu_backend();
    Ops& ops = backend->ops();
    constexpr int64_t Hq = 4;
    const int32_t L = 23, num_blocks = 8;
    KvCacheConfig c{1, num_blocks, kBlock, kH, kD, DType::F8_E4M3};
    c.calculate_scales = true;
    auto fp8 = KvCachePool::create(backend->allocator(), c);
    c.dtype = DType::F32, c.calculate_scales = false;
    auto f32 = KvCachePool::create(backend->allocator(), c);
    auto held = KvCachePool::create(backend->allocator(), c);  // F32 copy of what the fp8 cache holds
    ASSERT_TRUE(fp8.ok() && f32.ok() && held.ok());
    std::mt19937 rng(5);
    auto k = testing::random_f32({L, kH, kD}, rng), v = testing::random_f32({L, kH, kD}, rng);
    auto q = testing::random_f32({L, Hq, kD}, rng);
    ForwardBatchBuilder b(kBlock);
    std::vector<int32_t> table;
    const ForwardBatch fb = one_sequence(b, L, table);
    for (const KvCachePool* pool : {&*fp8, &*f32})
        ops.write_kv(k.tensor, v.tensor, fb, pool->layer(0));
    const KvScales s = fp8->scales(0);
    const int64_t n = fp8->key(0).numel();
    for (int64_t i = 0; i < n; ++i) {
        held->key(0).data_as<float>()[i] = f8e4m3_to_f32(fp8->key(0).data_as<uint8_t>()[i]) * s.k;
        held->value(0).data_as<float>()[i] = f8e4m3_to_f32(fp8->value(0).data_as<uint8_t>()[i]) * s.v;
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(kD));
    auto attend = [&](const KvCachePool& pool) {
        HostTensor out = HostTensor::empty(DType::F32, {L, Hq, kD});
        ops.paged_attention(q.tensor, pool.layer(0), fb, scale, out.tensor);
        return std::vector<float>(out.tensor.data_as<float>(), out.tensor.data_as<float>() + L * Hq * kD);
    };
    const std::vector<float> got = attend(*fp8), want_held = attend(*held), want_f32 = attend(*f32);
    float to_held = 0, to_f32 = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        to_held = std::max(to_held, std::fabs(got[i] - want_held[i]));
        to_f32 = std::max(to_f32, std::fabs(got[i] - want_f32[i]));
    }
    EXPECT_LE(to_held, 1e-6f);
    EXPECT_LE(to_f32, 0.05f);
    EXPECT_GT(to_f32, 0.0f);
    std::printf("fp8 KV attention: max|Δ| %.3g to the values it holds, %.3g to the F32 cache (outputs within ±1)\n",
                to_held, to_f32);
}

}  // namespace
}  // namespace pagoda
