// The prefill kernels' offsets of a thread's K/V rows (kv_rows.h: one division a call, the rows stepped through the
// block table) against the row-by-row formula they replace, for block sizes below, at and above the rows a pass
// copies, first keys inside and at the edges of blocks, and ends inside, at and past the rows asked for.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cuda/attention/kv_rows.h"

namespace pagoda::kernels::cuda {
namespace {

template <int kPasses, int kRowsPerPass>
void check_all(const std::vector<int32_t>& table, int row_elems, int head) {
    for (int block_size : {1, 3, 7, 8, 15, 16, 17, 31, 32, 33, 64, 100, 256}) {
        const int keys = block_size * static_cast<int>(table.size());
        for (int key0 = 0; key0 + kPasses * kRowsPerPass <= keys; key0 += key0 < 2 * block_size ? 1 : 37) {
            for (int kv_end :
                 {0, key0, key0 + 1, key0 + kRowsPerPass * kPasses / 2 + 3, key0 + kPasses * kRowsPerPass, keys}) {
                int64_t off[kPasses];
                kv_row_offsets<kPasses, kRowsPerPass>(table.data(), block_size, row_elems, head, key0, kv_end, off);
                for (int p = 0; p < kPasses; ++p) {
                    const int key = key0 + p * kRowsPerPass;
                    const int64_t want =
                        key < kv_end ? kv_row_offset(table.data(), block_size, row_elems, head, key) : -1;
                    ASSERT_EQ(off[p], want) << "block size " << block_size << ", first key " << key0 << ", end "
                                            << kv_end << ", pass " << p << " of " << kPasses << " x " << kRowsPerPass;
                }
            }
        }
    }
}

TEST(KvRowsTest, SteppedOffsetsEqualTheRowByRowFormula) {
    std::mt19937 rng(3);
    std::vector<int32_t> table(40);
    for (auto& b : table)
        b = static_cast<int32_t>(rng() % 5000);  // blocks in any order, as the pool hands them out
    // Qwen3-8B's 8 KV heads at head_dim 128 (rows of 1,024 elements): head 5, chunk 3.
    check_all<8, 16>(table, 8 * 128, 5 * 128 + 3 * 8);  // wgmma at head_dim 128: 8 passes of 16 rows
    check_all<4, 32>(table, 8 * 64, 7 * 64 + 8);        // head_dim 64
    check_all<8, 8>(table, 2 * 256, 256 + 31 * 8);      // head_dim 256, 64-key tiles
    check_all<16, 8>(table, 4 * 256, 0);                // 8 warps, 128 keys at head_dim 256
    check_all<2, 32>(table, 1 * 128, 0);
}

// The offsets of blocks far into a large pool: a block index times a block's elements past 2^31.
TEST(KvRowsTest, OffsetsPastTwoToTheThirtyOneFitTheirSixtyFourBits) {
    const std::vector<int32_t> table = {2000000, 1999999, 7, 2100000000 / (16 * 1024)};
    int64_t off[8];
    kv_row_offsets<8, 16>(table.data(), 16, 1024, 1000, 0, 64, off);
    for (int p = 0; p < 8; ++p)
        EXPECT_EQ(off[p], p < 4 ? kv_row_offset(table.data(), 16, 1024, 1000, 16 * p) : -1);
    EXPECT_EQ(off[0], int64_t(2000000) * 16 * 1024 + 1000);
}

}  // namespace
}  // namespace pagoda::kernels::cuda
