// The tensor-core GEMV's ring depth (kernels/cuda/gemm/ring_stages.h) on each GPU family's shared memory, and its two
// rules over a sweep of sizes: the depth chosen keeps two blocks an SM and the most x a block stages, one more does
// not.
#include <gtest/gtest.h>

#include "kernels/cuda/gemm/ring_stages.h"

namespace pagoda::kernels::cuda {
namespace {

// One stage of a block's 8 warps (gemv_mma.cu's ChunkRing): 32 lanes x 4 rows x (16 bytes of weights + 4 a raw
// parameter): fp8 a scale, int4 a scale and a zero point.
constexpr int kFp8Stage = 8 * 32 * 4 * (16 + 4);
constexpr int kInt4Stage = 8 * 32 * 4 * (16 + 8);
constexpr int kKb = 1024;

TEST(RingStagesTest, EachGpuFamily) {
    EXPECT_EQ(gemv_ring_stages(kFp8Stage, 227 * kKb), 4);  // H100, H200
    EXPECT_EQ(gemv_ring_stages(kInt4Stage, 227 * kKb), 4);
    EXPECT_EQ(gemv_ring_stages(kFp8Stage, 163 * kKb), 2);  // A100
    EXPECT_EQ(gemv_ring_stages(kInt4Stage, 163 * kKb), 2);
    EXPECT_EQ(gemv_ring_stages(kFp8Stage, 99 * kKb), 0);  // sm_86, sm_89: the register double buffer
    EXPECT_EQ(gemv_ring_stages(kInt4Stage, 99 * kKb), 0);
}

// x staged beside the ring (one token of K: K / 2 + 4 words): int4's four stages keep two blocks on Hopper up to the
// models' usual K = 4,096 and not at 5,120 (that launch reads x from global memory), fp8's up to 12,288; an A100's two
// stages at K = 4,096, not at the most x stages (16,376).
TEST(RingStagesTest, StagedXBesideTheRing) {
    auto x_bytes = [](int K) { return (K / 2 + 4) * 4; };
    EXPECT_TRUE(gemv_ring_keeps_two_blocks(4 * kInt4Stage + kGemvPartialBytes, x_bytes(4096), 227 * kKb));
    EXPECT_FALSE(gemv_ring_keeps_two_blocks(4 * kInt4Stage + kGemvPartialBytes, x_bytes(5120), 227 * kKb));
    EXPECT_TRUE(gemv_ring_keeps_two_blocks(4 * kFp8Stage + kGemvPartialBytes, x_bytes(12288), 227 * kKb));
    EXPECT_TRUE(gemv_ring_keeps_two_blocks(2 * kInt4Stage + kGemvStaticBytes, x_bytes(4096), 163 * kKb));
    EXPECT_FALSE(gemv_ring_keeps_two_blocks(2 * kInt4Stage + kGemvStaticBytes, x_bytes(16376), 163 * kKb));
}

bool fits(int stages, int stage_bytes, int max_block_smem) {
    const int ring = stages * stage_bytes;
    return 2 * (ring + kGemvBesideRing + kKb) <= max_block_smem + kKb &&
           ring + kGemvStaticBytes + kGemvMostXBytes <= max_block_smem;
}

TEST(RingStagesTest, DeepestThatFits) {
    for (int stage_bytes = 4 * kKb; stage_bytes <= 40 * kKb; stage_bytes += 2 * kKb) {
        for (int smem = 48 * kKb; smem <= 256 * kKb; smem += kKb) {
            const int got = gemv_ring_stages(stage_bytes, smem);
            ASSERT_TRUE(got == 0 || got == 2 || got == 4) << got;
            if (got > 0) {
                ASSERT_TRUE(fits(got, stage_bytes, smem)) << stage_bytes << " " << smem;
            }
            for (int deeper = got + 2; deeper <= 4; deeper += 2)
                ASSERT_FALSE(fits(deeper, stage_bytes, smem)) << stage_bytes << " " << smem << " " << deeper;
        }
    }
}

}  // namespace
}  // namespace pagoda::kernels::cuda
