// Where a prefill attention kernel's thread finds its rows of a K/V tile in the paged cache (prefill_attention.cu,
// prefill_attention_wgmma.cu): plain arithmetic, no CUDA, so that a host test (tests/unit/kernels/kv_rows_test.cpp)
// holds the kernels' stepping to the row-by-row formula for every block size.
#pragma once

#include <cstdint>

#if defined(__CUDA_ARCH__)  // the device pass; a host compiler warns on the pragma
#define PAGODA_KV_ROWS_UNROLL _Pragma("unroll")
#else
#define PAGODA_KV_ROWS_UNROLL
#endif

namespace pagoda::kernels::cuda {

// The element offset in the paged cache of key `key`'s row of one KV head: the key's block from the sequence's block
// `table`, rows of row_elems elements (H_kv · D), `head` the head's (and the thread's chunk's) first element in a row.
constexpr int64_t kv_row_offset(const int32_t* table, int block_size, int row_elems, int head, int key) {
    return int64_t(table[key / block_size]) * (int64_t(row_elems) * block_size) +
           int64_t(key % block_size) * row_elems + head;
}

// kv_row_offset of keys key0 + p · kRowsPerPass (p < kPasses), -1 for keys at or past kv_end, as a thread of a prefill
// kernel copies them (kRowsPerPass: the rows its block copies at once, 8-32). Where the block size is kRowsPerPass or
// more (blocks of 16 by default) one division a call, where the kernels took one a row (a runtime block size: ~25
// instructions, eight a thread a K/V tile at head_dim 128): the rows after the first step through the table, at most
// a block a row; smaller blocks take a division a row. A block's elements must fit an int (prefill_grid checks), so an
// offset takes one 32 x 32 -> 64-bit multiply.
template <int kPasses, int kRowsPerPass>
constexpr void kv_row_offsets(const int32_t* table, int block_size, int row_elems, int head, int key0, int kv_end,
                              int64_t (&off)[kPasses]) {
    const int block_elems = row_elems * block_size;
    if (block_size >= kRowsPerPass) {
        int block = key0 / block_size, row = key0 - block * block_size;
        PAGODA_KV_ROWS_UNROLL
        for (int p = 0; p < kPasses; ++p) {
            off[p] =
                key0 + p * kRowsPerPass < kv_end ? int64_t(table[block]) * block_elems + row * row_elems + head : -1;
            row += kRowsPerPass;
            if (row >= block_size) row -= block_size, ++block;
        }
    } else {
        PAGODA_KV_ROWS_UNROLL
        for (int p = 0; p < kPasses; ++p) {
            const int key = key0 + p * kRowsPerPass;
            off[p] = key < kv_end
                         ? int64_t(table[key / block_size]) * block_elems + (key % block_size) * row_elems + head
                         : -1;
        }
    }
}

}  // namespace pagoda::kernels::cuda
