// Where the decode kernel's staged e4m3 paths (decode_attention.cu) keep a tile's raw rows in shared memory and, on
// the direct path, which bytes of a row each mma fragment takes: plain integer arithmetic, no CUDA, so that a host
// test (tests/unit/kernels/e4m3_tile_test.cpp) holds the layout to bijections and the loads to 32 different banks.
#pragma once

namespace pagoda::kernels::cuda {

// A raw row's 16-byte chunk ch (a row of D bytes has D / 16) lies at chunk ch ^ e4m3_chunk_swizzle(row, D / 16) of
// the row. Unswizzled, rows of 128 or 256 bytes all start on bank 0, and the direct path's loads would collide: its
// 16-byte loads of K (the 8 lanes of a phase read rows 2p and 2p + 1, the same four chunks of each) two ways, its
// 4-byte loads of V (a warp reads rows 2c + e, c = 0..3, at the same bytes of each) four ways. Row bit 0 moves the
// row's chunks to the other half of their 128-byte line (chunk bit 2), row bits 1-2 among its chunk pairs (chunk
// bits 1-2): a permutation of each line's 8 chunks, masked to D = 64's four.
constexpr int e4m3_chunk_swizzle(int row, int chunks) {
    return ((((row >> 1) & 3) << 1) ^ ((row & 1) << 2)) & (chunks - 1);
}

// The byte offset of row `row`'s chunk ch in a stage's K (or V) rows of D bytes: where the copy puts it and the loads
// find it.
constexpr int e4m3_chunk_offset(int row, int ch, int D) {
    return row * D + 16 * (ch ^ e4m3_chunk_swizzle(row, D / 16));
}

// The direct path (D = 128 or 256) takes Q·Kᵀ's dims in an order of its own (the sum is the same in any order, Q's
// fragments are built in it too): quad lane c's k-step s (16 dims) is bytes 4 (s % 4) .. +3 of chunk 4 (s / 4) + c
// of a K row, so a lane loads its whole share of a row in D / 64 16-byte loads (e4m3_k_load) and each pair of bytes
// is one f16x2 register of a B fragment. Element b of lane c's step-s fragment (b = 0, 1: the step's dims 2c, 2c + 1;
// b = 2, 3: 2c + 8, 2c + 9) is the row's dim e4m3_k_dim(s, c, b).
constexpr int e4m3_k_dim(int s, int c, int b) {
    return 64 * (s / 4) + 16 * c + 4 * (s % 4) + b;
}
constexpr int e4m3_k_load(int row, int q, int c, int D) {
    return e4m3_chunk_offset(row, 4 * q + c, D);
}

// P·V's output dims come out in an order of their own too: n-tile i's column n is dim e4m3_v_dim(i, n), so that lane
// g's B fragments of n-tiles 4 j .. 4 j + 3 are the four bytes of one word of each V row it reads (e4m3_v_load: dims
// 32 j + 4 g .. +3), turned into f16x2 pairs of two rows by byte permutes.
constexpr int e4m3_v_dim(int i, int n) {
    return 32 * (i / 4) + 4 * n + (i % 4);
}
constexpr int e4m3_v_load(int row, int j, int g, int D) {
    return e4m3_chunk_offset(row, 2 * j + g / 4, D) + 4 * (g % 4);
}

}  // namespace pagoda::kernels::cuda
