// The Hopper prefill attention kernel's shared-memory tiles against the PTX ISA's description of what wgmma reads
// (no GPU needed): the tiles are written as wgmma_layout.h places them, then every element of every wgmma operand the
// kernel issues is looked up where the hardware would fetch it, from the descriptor's fields and the ISA's canonical
// 128-byte-swizzle layouts (as CUTLASS's mma_sm90_desc.hpp / mma_traits_sm90_gmma.hpp also write them, T = 8 bf16 in
// 16 bytes): K-major ((8,m),(T,2)) : ((8T,SBO),(1,T)), MN-major ((T,8,m),(8,k)) : ((1,T,LBO),(8T,SBO)), then bits 4-6
// of the byte address XOR bits 7-9. A swapped LBO/SBO, a wrong k-step or an unswizzled write shows up as a wrong
// element.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/attention/wgmma_layout.h"

namespace pagoda::kernels::cuda::wgmma {
namespace {

constexpr uint32_t kBase = 5 * kAtomBytes;  // where the kernel's rounded-up dynamic shared memory might begin

struct Fields {
    uint32_t start, lbo, sbo, base_offset, swizzle;
};
Fields decode(uint64_t d) {
    return {uint32_t(d & 0x3FFF) << 4, uint32_t((d >> 16) & 0x3FFF) << 4, uint32_t((d >> 32) & 0x3FFF) << 4,
            uint32_t((d >> 49) & 7), uint32_t(d >> 62)};
}
uint32_t swizzle128(uint32_t addr) {
    return addr ^ (((addr >> 7) & 7) << 4);
}
// Byte address of element (mn, k) of a 16-deep wgmma operand, as the ISA lays out each major-ness.
uint32_t k_major_address(const Fields& f, int mn, int k) {
    return swizzle128(f.start + (mn % 8) * 128 + (mn / 8) * f.sbo + (k % 8) * 2 + (k / 8) * 16);
}
uint32_t mn_major_address(const Fields& f, int mn, int k) {
    return swizzle128(f.start + (mn % 8) * 2 + (mn / 8 % 8) * 16 + (mn / 64) * f.lbo + (k % 8) * 128 + (k / 8) * f.sbo);
}

// Shared memory as 2-byte cells, each holding which (tile, row, dim) the kernel stored there.
struct Image {
    std::vector<int64_t> cell;
    explicit Image(uint32_t bytes) : cell(bytes / 2, -1) {}
    static int64_t tag(int tile, int row, int dim) { return (int64_t(tile) << 32) | (int64_t(row) << 16) | dim; }
    // A tile of `rows` x D at byte `at`, written in 16-byte chunks as the kernel's cp.async and Q stores do.
    void write(int tile, uint32_t at, int rows, int D) {
        for (int r = 0; r < rows; ++r)
            for (int ch = 0; ch < D / 8; ++ch)
                for (int e = 0; e < 8; ++e) {
                    const uint32_t byte = at + chunk_offset(rows, r, ch) + 2 * e;
                    ASSERT_EQ(cell.at(byte / 2), -1) << "two elements in one place";
                    cell[byte / 2] = tag(tile, r, ch * 8 + e);
                }
    }
    int64_t at(uint32_t byte) const { return cell.at(byte / 2); }
};

template <int D, int kBlockK>
void check_tiles() {
    constexpr int kBlockQ = 128, kStages = 2;
    using S = PrefillSmem<D, kBlockQ, kBlockK, kStages>;
    SCOPED_TRACE(testing::Message() << "D=" << D << " kBlockK=" << kBlockK);
    ASSERT_LE(kBase + S::kBytes - kAtomBytes, 227u * 1024) << "past Hopper's shared memory a block";
    Image smem(kBase + S::kBytes);
    enum { kQ, kK0, kV0, kK1, kV1 };
    smem.write(kQ, kBase, kBlockQ, D);
    for (int st = 0; st < kStages; ++st) {
        ASSERT_EQ((kBase + S::k_tile(st)) % kAtomBytes, 0u);
        ASSERT_EQ((kBase + S::v_tile(st)) % kAtomBytes, 0u);
        smem.write(kK0 + 2 * st, kBase + S::k_tile(st), kBlockK, D);
        smem.write(kV0 + 2 * st, kBase + S::v_tile(st), kBlockK, D);
    }

    // S = Q · Kᵀ: A = 64 rows of Q from warpgroup wg's first row, B = the stage's kBlockK keys; 16 dims a step.
    for (int wg = 0; wg < kBlockQ / 64; ++wg) {
        const uint64_t q_desc = descriptor(kBase + k_major_start(kBlockQ, wg * 64, 0), kKMajorLbo, kKMajorSbo);
        for (int kd = 0; kd < D / 16; ++kd) {
            const Fields f = decode(advance(q_desc, k_major_start(kBlockQ, 0, kd)));
            ASSERT_EQ(f.swizzle, 1u);
            ASSERT_EQ(f.base_offset, 0u);
            for (int m = 0; m < 64; ++m)
                for (int k = 0; k < 16; ++k)
                    ASSERT_EQ(smem.at(k_major_address(f, m, k)), Image::tag(kQ, wg * 64 + m, kd * 16 + k))
                        << "Q: wg " << wg << " k-step " << kd << " row " << m << " k " << k;
        }
    }
    const uint64_t k_desc = descriptor(kBase + S::k_tile(0), kKMajorLbo, kKMajorSbo);
    const uint64_t v_desc = descriptor(kBase + S::v_tile(0), mn_major_lbo(kBlockK), kMnMajorSbo);
    const uint32_t stage_bytes = S::k_tile(1) - S::k_tile(0);
    for (int st = 0; st < kStages; ++st) {
        for (int kd = 0; kd < D / 16; ++kd) {
            const Fields f = decode(advance(k_desc, st * stage_bytes + k_major_start(kBlockK, 0, kd)));
            for (int n = 0; n < kBlockK; ++n)
                for (int k = 0; k < 16; ++k)
                    ASSERT_EQ(smem.at(k_major_address(f, n, k)), Image::tag(kK0 + 2 * st, n, kd * 16 + k))
                        << "K: stage " << st << " k-step " << kd << " key " << n << " dim-in-step " << k;
        }
        // O += P · V: B = V's keys 16j .. 16j + 15 (K) x all D dims (N), transposed.
        for (int j = 0; j < kBlockK / 16; ++j) {
            const Fields f = decode(advance(v_desc, st * stage_bytes + mn_major_start(j)));
            ASSERT_EQ(f.swizzle, 1u);
            for (int n = 0; n < D; ++n)
                for (int k = 0; k < 16; ++k)
                    ASSERT_EQ(smem.at(mn_major_address(f, n, k)), Image::tag(kV0 + 2 * st, j * 16 + k, n))
                        << "V: stage " << st << " key step " << j << " dim " << n << " key-in-step " << k;
        }
    }
}

TEST(WgmmaLayout, OperandsReadWhatTheTilesHold) {
    check_tiles<64, 128>();
    check_tiles<128, 128>();
    check_tiles<256, 64>();
    check_tiles<128, 64>();
}

TEST(WgmmaLayout, DescriptorFields) {
    // Start 0x12340 (bits 4-17), LBO 16 KB, SBO 1 KB, 128-byte swizzle; nothing else set.
    const uint64_t d = descriptor(0x12340, 16384, 1024);
    EXPECT_EQ(d & 0x3FFF, 0x1234u);
    EXPECT_EQ((d >> 16) & 0x3FFF, 1024u);
    EXPECT_EQ((d >> 32) & 0x3FFF, 64u);
    EXPECT_EQ(d >> 62, 1u);
    EXPECT_EQ(d & ~(uint64_t(0x3FFF) | uint64_t(0x3FFF) << 16 | uint64_t(0x3FFF) << 32 | uint64_t(3) << 62), 0u);
    EXPECT_EQ(decode(advance(d, 2048)).start, 0x12340u + 2048);
}

}  // namespace
}  // namespace pagoda::kernels::cuda::wgmma
