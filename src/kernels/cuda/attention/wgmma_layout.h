// Where the Hopper prefill attention kernel (prefill_attention_wgmma.cu) puts its bf16 tiles in shared memory, and the
// wgmma matrix descriptors that read them back: plain arithmetic, no CUDA, so that a host test
// (tests/unit/kernels/wgmma_layout_test.cpp) checks it against the PTX ISA's canonical layouts without a GPU.
#pragma once

#include <cstdint>

namespace pagoda::kernels::cuda::wgmma {

// A tile is `rows` rows (query tokens or keys) of `dims` bf16 values (one head's), stored as dims / 64 column blocks
// of `rows` rows of 128 bytes each; in a row, 16-byte chunk c (dims 8c .. 8c + 7 of the block) sits at chunk
// c ^ (row % 8): the 128-byte swizzle, which puts the 8 rows of a wgmma core matrix in 8 different bank groups. The
// hardware applies the swizzle to address bits 4-6 (from bits 7-9), so every column block starts on a 1024-byte
// boundary (the pattern's period: 8 rows), which lets descriptors keep their base offset 0.
inline constexpr uint32_t kRowBytes = 128;    // one swizzled row: 64 bf16
inline constexpr uint32_t kAtomBytes = 1024;  // 8 rows: the swizzle's period and the alignment of every block

constexpr uint32_t tile_bytes(int rows, int dims) {
    return uint32_t(rows) * uint32_t(dims) * 2;
}

// The byte offset in a tile of `rows` rows of 16-byte chunk `chunk` (dims 8 · chunk ...) of row `row`.
constexpr uint32_t chunk_offset(int rows, int row, int chunk) {
    return uint32_t(chunk / 8) * uint32_t(rows) * kRowBytes + uint32_t(row) * kRowBytes +
           uint32_t((chunk % 8) ^ (row % 8)) * 16;
}

// A wgmma shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"): bits 0-13 the start address, 16-29
// the leading dimension byte offset (LBO), 32-45 the stride dimension byte offset (SBO), each in 16-byte units;
// bits 49-51 the base offset (0: the swizzle pattern starts on 1024-byte boundaries); bits 62-63 the swizzle mode,
// 1 = 128 bytes. Addresses are shared-window addresses (below 256 KB: 14 bits of 16-byte units).
constexpr uint64_t descriptor(uint32_t start, uint32_t lbo, uint32_t sbo) {
    return uint64_t((start & 0x3FFFF) >> 4) | uint64_t((lbo & 0x3FFFF) >> 4) << 16 |
           uint64_t((sbo & 0x3FFFF) >> 4) << 32 | uint64_t(1) << 62;
}
// The same descriptor `bytes` further on (a multiple of 16; the start stays within the 14 bits).
constexpr uint64_t advance(uint64_t desc, uint32_t bytes) {
    return desc + (bytes >> 4);
}

// K-major operands (Q as A and K as B of S = Q · Kᵀ: rows with their head dims contiguous). One wgmma reads 16 dims
// (slice k16) of 64 (A) or N (B) rows from row0 on. Its core matrices are 8 rows x 16 bytes: the two of a row group in
// K are adjacent chunks of the same 128-byte rows (LBO is not used by swizzled K-major layouts; the ISA assumes 1, as
// set here), and row groups lie 8 rows = 1024 bytes apart (SBO). Slice k16 begins 32 bytes into its column block's
// rows: the hardware swizzles the address it forms, so the chunks it reads are the ones chunk_offset placed.
constexpr uint32_t k_major_start(int rows, int row0, int k16) {
    return uint32_t(k16 / 4) * uint32_t(rows) * kRowBytes + uint32_t(row0) * kRowBytes + uint32_t(k16 % 4) * 32;
}
inline constexpr uint32_t kKMajorLbo = 16;
inline constexpr uint32_t kKMajorSbo = 8 * kRowBytes;

// MN-major operand (V as B of O = P · V: K is the keys, N the head dims, contiguous in a key's row; the wgmma's
// transpose-B bit). One wgmma reads keys 16 · k16 .. + 15 of every dim: core matrices are 8 dims (16 bytes) x 8 keys;
// a key's 64 dims of a column block are one 128-byte row, 8 keys make one swizzle period, the next 8 keys follow
// 1024 bytes on (SBO) and the next 64 dims a column block (rows · 128 bytes) on (LBO).
constexpr uint32_t mn_major_start(int k16) {
    return uint32_t(k16) * 16 * kRowBytes;
}
constexpr uint32_t mn_major_lbo(int rows) {
    return uint32_t(rows) * kRowBytes;
}
inline constexpr uint32_t kMnMajorSbo = 8 * kRowBytes;

// A block's shared memory: the Q tile (kBlockQ rows), then kStages stages of a K tile and a V tile (kBlockK rows), each
// a whole number of 1024-byte periods; kBytes adds 1024 so that the kernel can round its base up to a period.
template <int D, int kBlockQ, int kBlockK, int kStages>
struct PrefillSmem {
    static constexpr uint32_t kQBytes = tile_bytes(kBlockQ, D);
    static constexpr uint32_t kKvBytes = tile_bytes(kBlockK, D);
    static constexpr uint32_t k_tile(int stage) { return kQBytes + uint32_t(stage) * 2 * kKvBytes; }
    static constexpr uint32_t v_tile(int stage) { return k_tile(stage) + kKvBytes; }
    static constexpr uint32_t kBytes = kQBytes + kStages * 2 * kKvBytes + kAtomBytes;
    static_assert(D % 64 == 0 && kBlockQ % 64 == 0 && kBlockK % 64 == 0, "whole column blocks and 8-row periods");
    static_assert(kQBytes % kAtomBytes == 0 && kKvBytes % kAtomBytes == 0, "every tile on a 1024-byte boundary");
};

}  // namespace pagoda::kernels::cuda::wgmma
