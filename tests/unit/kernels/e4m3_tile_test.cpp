// The decode kernel's raw e4m3 tile layout and the direct path's fragment bytes (kernels/cuda/attention/e4m3_tile.h):
// every row's chunks a permutation, the direct path's dim orders bijections that its loads deliver, and each of its
// shared-memory loads spread over 32 banks (a bank conflict would only slow the kernel; a wrong order would break it).
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "kernels/cuda/attention/e4m3_tile.h"

namespace pagoda::kernels::cuda {
namespace {

constexpr int kTileKeys = 64;  // the decode kernel's tiles at 4 warps: 16 keys a warp

TEST(E4m3TileTest, EveryRowsChunksArePermuted) {
    for (int D : {64, 128, 256}) {
        for (int row = 0; row < kTileKeys; ++row) {
            std::set<int> at;
            for (int ch = 0; ch < D / 16; ++ch) {
                const int off = e4m3_chunk_offset(row, ch, D);
                EXPECT_GE(off, row * D);
                EXPECT_LT(off, (row + 1) * D);
                EXPECT_EQ(off % 16, 0);
                at.insert(off);
            }
            EXPECT_EQ(static_cast<int>(at.size()), D / 16) << "D " << D << ", row " << row;
        }
    }
}

// The bytes a lane's K loads bring are the dims e4m3_k_dim gives its fragments, each dim of a row once over the quad.
TEST(E4m3TileTest, KLoadsDeliverTheFragmentsDims) {
    for (int D : {128, 256}) {
        std::vector<int> seen(D, 0);
        for (int c = 0; c < 4; ++c) {
            for (int s = 0; s < D / 16; ++s) {
                for (int b = 0; b < 4; ++b) {
                    const int dim = e4m3_k_dim(s, c, b);
                    ASSERT_GE(dim, 0);
                    ASSERT_LT(dim, D);
                    ++seen[dim];
                    // Load s / 4 of lane c, word s % 4, byte b: the logical place in the row of the chunk it
                    // loads (the swizzle undone: XOR is its own inverse) is the dim.
                    const int row = 5;
                    const int chunk = (e4m3_k_load(row, s / 4, c, D) - row * D) / 16;
                    EXPECT_EQ(16 * (chunk ^ e4m3_chunk_swizzle(row, D / 16)) + 4 * (s % 4) + b, dim)
                        << "D " << D << ", c " << c << ", s " << s;
                }
            }
        }
        for (int d = 0; d < D; ++d)
            EXPECT_EQ(seen[d], 1) << "D " << D << ", dim " << d;
    }
}

// Byte b of lane g's V load j is column g of n-tile 4 j + b; every output dim once.
TEST(E4m3TileTest, VLoadsDeliverTheOutputsDims) {
    for (int D : {128, 256}) {
        std::vector<int> seen(D, 0);
        for (int i = 0; i < D / 8; ++i)
            for (int n = 0; n < 8; ++n)
                ++seen[e4m3_v_dim(i, n)];
        for (int d = 0; d < D; ++d)
            EXPECT_EQ(seen[d], 1) << "D " << D << ", dim " << d;
        const int row = 11;
        for (int j = 0; j < D / 32; ++j) {
            for (int g = 0; g < 8; ++g) {
                const int at = e4m3_v_load(row, j, g, D) - row * D;
                const int logical = 16 * ((at / 16) ^ e4m3_chunk_swizzle(row, D / 16)) + at % 16;
                for (int byte = 0; byte < 4; ++byte)
                    EXPECT_EQ(logical + byte, e4m3_v_dim(4 * j + byte, g)) << "D " << D << ", j " << j << ", g " << g;
            }
        }
    }
}

// The 4-byte banks a set of loads touches (a 16-byte load four): all different, or the loads would be serialised.
void expect_distinct_banks(const std::vector<int>& offsets, int bytes, const char* what, int D) {
    std::set<int> banks;
    for (int off : offsets)
        for (int w = 0; w < bytes / 4; ++w)
            banks.insert((off / 4 + w) % 32);
    EXPECT_EQ(banks.size(), offsets.size() * bytes / 4) << what << " at D " << D;
}

TEST(E4m3TileTest, KLoadsHit32BanksAPhase) {
    // A 16-byte load of a warp runs as four phases of 8 lanes; lane (g = lane / 4, c = lane % 4) of a warp reads key
    // row warp · 16 + n · 8 + g (n: the 8-key n-tile).
    for (int D : {128, 256})
        for (int warp = 0; warp < kTileKeys / 16; ++warp)
            for (int n = 0; n < 2; ++n)
                for (int q = 0; q < D / 64; ++q)
                    for (int phase = 0; phase < 4; ++phase) {
                        std::vector<int> offsets;
                        for (int lane = 8 * phase; lane < 8 * phase + 8; ++lane)
                            offsets.push_back(e4m3_k_load(warp * 16 + n * 8 + lane / 4, q, lane % 4, D));
                        expect_distinct_banks(offsets, 16, "K", D);
                    }
}

TEST(E4m3TileTest, VLoadsHit32Banks) {
    // A 4-byte load of a warp: lane (g, c) reads row warp · 16 + 2c + e (+ 8), dims 32 j + 4 g .. +3.
    for (int D : {128, 256})
        for (int warp = 0; warp < kTileKeys / 16; ++warp)
            for (int row_in : {0, 1, 8, 9})
                for (int j = 0; j < D / 32; ++j) {
                    std::vector<int> offsets;
                    for (int lane = 0; lane < 32; ++lane)
                        offsets.push_back(e4m3_v_load(warp * 16 + 2 * (lane % 4) + row_in, j, lane / 4, D));
                    expect_distinct_banks(offsets, 4, "V", D);
                }
}

}  // namespace
}  // namespace pagoda::kernels::cuda
