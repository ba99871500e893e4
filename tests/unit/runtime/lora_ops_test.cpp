// Ops::linear with adapters (runtime/lora.h) on the CPU against a naive double-precision reference: tokens of a step
// mixed over adapter slots (and the base), slices at row offsets of one projection (the parts of a fused q/k/v), and
// the token grouping the backends share.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "runtime/cpu_ops.h"
#include "runtime/forward_batch.h"
#include "runtime/lora.h"

namespace pagoda {
namespace {

std::vector<float> random_values(size_t n, std::mt19937& rng, float scale = 0.5f) {
    std::uniform_real_distribution<float> d(-scale, scale);
    std::vector<float> v(n);
    for (float& x : v)
        x = d(rng);
    return v;
}

TEST(LoraTokenGroups, GroupsTokensBySlotInOrder) {
    LoraTokenGroups g;
    const std::vector<int32_t> slots = {1, -1, 0, 1, 2, -1, 0};
    g.build(slots, 3);
    EXPECT_EQ(std::vector<int32_t>(g.tokens(0).begin(), g.tokens(0).end()), (std::vector<int32_t>{2, 6}));
    EXPECT_EQ(std::vector<int32_t>(g.tokens(1).begin(), g.tokens(1).end()), (std::vector<int32_t>{0, 3}));
    EXPECT_EQ(std::vector<int32_t>(g.tokens(2).begin(), g.tokens(2).end()), (std::vector<int32_t>{4}));
    g.build(std::vector<int32_t>{-1, -1}, 1);  // reused: nothing left over
    EXPECT_TRUE(g.tokens(0).empty());
}

TEST(LoraTokenGroups, TilesCoverEachSlotsTokensAndPadToTheBound) {
    // 40 tokens over slots 0..2 and the base: slot 0 has 20 (a full tile and 4), slot 2 has 17 (16 and 1), slot 1 none.
    std::vector<int32_t> slots(40);
    for (size_t t = 0; t < slots.size(); ++t)
        slots[t] = t < 20 ? 0 : t < 37 ? 2 : -1;
    LoraTokenGroups g;
    g.build(slots, 3);
    const int32_t bound = lora_tile_bound(40, 3);
    EXPECT_EQ(bound, 3 + 3);
    g.tile(40, bound);
    ASSERT_EQ(g.tiles.size(), static_cast<size_t>(bound));
    const std::vector<std::array<int32_t, 3>> want = {{0, 0, 16}, {0, 16, 4}, {2, 20, 16}, {2, 36, 1}};
    for (size_t i = 0; i < g.tiles.size(); ++i) {
        const LoraTile& t = g.tiles[i];
        if (i < want.size()) {
            EXPECT_EQ((std::array<int32_t, 3>{t.slot, t.begin, t.count}), want[i]) << "tile " << i;
        } else {
            EXPECT_EQ(t.count, 0) << "padding tile " << i;
        }
    }
    ASSERT_EQ(g.order.size(), 40u);  // padded to the step's tokens
    for (int32_t i = 0; i < 37; ++i)
        EXPECT_EQ(g.order[static_cast<size_t>(i)], i);
    // The bound holds for the worst case: every slot one token more than whole tiles.
    std::vector<int32_t> worst;
    for (int32_t s = 0; s < 4; ++s)
        worst.insert(worst.end(), 17, s);
    g.build(worst, 4);
    g.tile(static_cast<int32_t>(worst.size()), lora_tile_bound(static_cast<int32_t>(worst.size()), 4));
    EXPECT_EQ(std::count_if(g.tiles.begin(), g.tiles.end(), [](const LoraTile& t) { return t.count > 0; }), 8);
    EXPECT_LE(8, lora_tile_bound(68, 4));
}

TEST(LoraOps, LinearAddsEachTokensAdapterDelta) {
    std::mt19937 rng(7);
    const int64_t T = 6, K = 24, N = 20;
    std::vector<float> x = random_values(static_cast<size_t>(T * K), rng);
    std::vector<float> w = random_values(static_cast<size_t>(N * K), rng);
    // Slot 0: one adapter over rows [0, 8) (a "q" part) and another slice over rows [8, 20) ("k/v"), rank 3.
    // Slot 1: rank 5 over every row. Slot 2: nothing on this projection.
    struct Part {
        int64_t off, rows, rank;
        float scale;
        std::vector<float> a, b;
    };
    std::vector<Part> parts0 = {{0, 8, 3, 2.0f, {}, {}}, {8, 12, 3, 0.5f, {}, {}}};
    std::vector<Part> parts1 = {{0, N, 5, 1.25f, {}, {}}};
    LoraAdapterSet set;
    set.slots.resize(3);
    for (auto* parts : {&parts0, &parts1}) {
        const size_t slot = parts == &parts0 ? 0 : 1;
        for (Part& p : *parts) {
            p.a = random_values(static_cast<size_t>(p.rank * K), rng);
            p.b = random_values(static_cast<size_t>(p.rows * p.rank), rng);
            set.slots[slot].push_back(LoraSlice{p.off, Tensor(p.a.data(), DType::F32, Shape{p.rank, K}),
                                                Tensor(p.b.data(), DType::F32, Shape{p.rows, p.rank}), p.scale});
        }
    }
    LinearWeight weight = LinearWeight::dense(Tensor(w.data(), DType::F32, Shape{N, K}));
    weight.lora = &set;
    const std::vector<int32_t> token_slots = {1, -1, 0, 0, 2, 1};

    std::vector<float> y(static_cast<size_t>(T * N));
    auto ops = make_cpu_ops();
    ForwardBatch batch;
    batch.num_tokens = static_cast<int32_t>(T);
    batch.lora_slots = token_slots;
    ops->begin_step(batch);
    ops->linear(Tensor(x.data(), DType::F32, Shape{T, K}), weight, Tensor(y.data(), DType::F32, Shape{T, N}));
    ops->end_step();

    for (int64_t t = 0; t < T; ++t) {
        std::vector<double> want(static_cast<size_t>(N));
        for (int64_t n = 0; n < N; ++n)
            for (int64_t k = 0; k < K; ++k)
                want[n] += double(x[t * K + k]) * w[n * K + k];
        const int32_t slot = token_slots[static_cast<size_t>(t)];
        const std::vector<Part>* parts = slot == 0 ? &parts0 : slot == 1 ? &parts1 : nullptr;
        for (const Part& p : parts ? *parts : std::vector<Part>{}) {
            for (int64_t n = 0; n < p.rows; ++n) {
                double d = 0;
                for (int64_t j = 0; j < p.rank; ++j) {
                    double u = 0;
                    for (int64_t k = 0; k < K; ++k)
                        u += double(x[t * K + k]) * p.a[j * K + k];
                    d += u * p.b[n * p.rank + j];
                }
                want[p.off + n] += p.scale * d;
            }
        }
        for (int64_t n = 0; n < N; ++n)
            EXPECT_NEAR(y[t * N + n], want[n], 1e-4) << "token " << t << " (slot " << slot << ") row " << n;
    }

    // Without the step's slots (the base model alone), the same weight adds nothing.
    std::vector<float> base(static_cast<size_t>(T * N));
    ops->linear(Tensor(x.data(), DType::F32, Shape{T, K}), weight, Tensor(base.data(), DType::F32, Shape{T, N}));
    for (int64_t n = 0; n < N; ++n)
        EXPECT_EQ(base[n + N], y[n + N]) << "token 1 has no adapter";
    EXPECT_NE(base[0], y[0]);
}

}  // namespace
}  // namespace pagoda
