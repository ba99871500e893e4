// Paged KV write + paged causal attention equal dense causal attention (written here) for several sequences
// with cached prefixes, shuffled block tables and GQA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "runtime/backend.h"
#include "runtime/cache_pools.h"
#include "runtime/forward_batch.h"
#include "runtime/ops.h"
#include "test_util.h"

namespace pagoda {
namespace {

struct Seq {
    int32_t ctx, fresh;  // cached tokens, new tokens
};

void run(int64_t Hq, int64_t Hkv, int64_t D, int32_t block_size, const std::vector<Seq>& seqs, uint32_t seed) {
    std::mt19937 rng(seed);
    auto backend = make_cpu_backend();
    Ops& ops = backend->ops();
    const int32_t num_blocks = 96;
    auto pool = KvCachePool::create(backend->allocator(), {1, num_blocks, block_size, static_cast<int32_t>(Hkv),
                                                           static_cast<int32_t>(D), DType::F32});
    ASSERT_TRUE(pool.ok()) << pool.message();
    // Poison the cache so reading an unwritten slot shows up.
    {
        Tensor kc = pool->key(0), vc = pool->value(0);
        std::fill(kc.data_as<float>(), kc.data_as<float>() + kc.numel(), std::nanf(""));
        std::fill(vc.data_as<float>(), vc.data_as<float>() + vc.numel(), std::nanf(""));
    }
    std::vector<int32_t> free_blocks(num_blocks);
    for (int32_t i = 0; i < num_blocks; ++i)
        free_blocks[i] = i;
    std::shuffle(free_blocks.begin(), free_blocks.end(), rng);

    // Full K/V/Q per sequence [L, H, D].
    std::vector<testing::Weight> K, V, Q;
    std::vector<std::vector<int32_t>> tables;
    for (const Seq& s : seqs) {
        const int32_t L = s.ctx + s.fresh;
        K.push_back(testing::random_weight(DType::F32, {L, Hkv, D}, rng));
        V.push_back(testing::random_weight(DType::F32, {L, Hkv, D}, rng));
        Q.push_back(testing::random_weight(DType::F32, {L, Hq, D}, rng));
        std::vector<int32_t> t;
        for (int32_t b = 0; b < (L + block_size - 1) / block_size; ++b) {
            t.push_back(free_blocks.back());
            free_blocks.pop_back();
        }
        tables.push_back(t);
    }

    // Step 1: write the cached prefixes (as an earlier prefill would have).
    {
        ForwardBatchBuilder b(block_size);
        std::vector<float> k, v;
        for (size_t i = 0; i < seqs.size(); ++i) {
            if (seqs[i].ctx == 0) continue;
            std::vector<int32_t> toks(seqs[i].ctx, 1);
            b.add_sequence(toks, 0, tables[i], 0);
            k.insert(k.end(), K[i].values.begin(), K[i].values.begin() + seqs[i].ctx * Hkv * D);
            v.insert(v.end(), V[i].values.begin(), V[i].values.begin() + seqs[i].ctx * Hkv * D);
        }
        ForwardBatch fb = b.view();
        if (fb.num_tokens > 0) {
            ops.write_kv(Tensor(k.data(), DType::F32, {fb.num_tokens, Hkv, D}),
                         Tensor(v.data(), DType::F32, {fb.num_tokens, Hkv, D}), fb, pool->layer(0));
        }
    }
    // Step 2: the new tokens of every sequence in one batch.
    ForwardBatchBuilder b(block_size);
    std::vector<float> k, v, q;
    for (size_t i = 0; i < seqs.size(); ++i) {
        std::vector<int32_t> toks(seqs[i].fresh, 1);
        b.add_sequence(toks, seqs[i].ctx, tables[i], 0);
        const int64_t c = seqs[i].ctx, n = seqs[i].fresh;
        k.insert(k.end(), K[i].values.begin() + c * Hkv * D, K[i].values.begin() + (c + n) * Hkv * D);
        v.insert(v.end(), V[i].values.begin() + c * Hkv * D, V[i].values.begin() + (c + n) * Hkv * D);
        q.insert(q.end(), Q[i].values.begin() + c * Hq * D, Q[i].values.begin() + (c + n) * Hq * D);
    }
    ForwardBatch fb = b.view();
    const int64_t T = fb.num_tokens;
    ops.write_kv(Tensor(k.data(), DType::F32, {T, Hkv, D}), Tensor(v.data(), DType::F32, {T, Hkv, D}), fb,
                 pool->layer(0));
    std::vector<float> out(T * Hq * D, -7.0f);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    ops.paged_attention(Tensor(q.data(), DType::F32, {T, Hq, D}), pool->layer(0), fb, scale,
                        Tensor(out.data(), DType::F32, {T, Hq, D}));

    // Dense reference.
    int64_t row = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
        for (int32_t n = 0; n < seqs[i].fresh; ++n, ++row) {
            const int64_t p = seqs[i].ctx + n;
            for (int64_t h = 0; h < Hq; ++h) {
                const int64_t kvh = h / (Hq / Hkv);
                std::vector<double> s(p + 1);
                double mx = -1e300;
                for (int64_t j = 0; j <= p; ++j) {
                    double d = 0;
                    for (int64_t e = 0; e < D; ++e)
                        d += double(Q[i].values[(p * Hq + h) * D + e]) * K[i].values[(j * Hkv + kvh) * D + e];
                    s[j] = d * scale;
                    mx = std::max(mx, s[j]);
                }
                double z = 0;
                for (auto& x : s)
                    z += (x = std::exp(x - mx));
                std::vector<double> ref(D, 0.0);
                for (int64_t j = 0; j <= p; ++j)
                    for (int64_t e = 0; e < D; ++e)
                        ref[e] += s[j] / z * V[i].values[(j * Hkv + kvh) * D + e];
                testing::expect_close(out.data() + (row * Hq + h) * D, ref, 0, 2e-6, "paged_attention");
            }
        }
    }
}

TEST(PagedAttention, MixedPrefillDecodeWithCachedPrefixGqa) {
    run(4, 2, 16, 4, {{5, 3}, {0, 7}, {10, 1}, {0, 1}, {16, 16}}, 1);
}

TEST(PagedAttention, MultiHeadNoGqaLargerBlocks) {
    run(3, 3, 32, 16, {{0, 40}, {33, 2}, {47, 1}}, 2);
}

TEST(PagedAttention, ManyQueryHeadsPerKvHead) {
    run(8, 1, 64, 8, {{3, 20}, {60, 1}}, 3);
}

}  // namespace
}  // namespace pagoda
