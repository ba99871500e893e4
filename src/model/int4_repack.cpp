#include "model/int4_repack.h"

#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "model/parallel_copy.h"

namespace pagoda::model {

namespace {

// Value i of a word of `bits`-bit values, low bits first.
int32_t value(int32_t word, int i, int bits) {
    return static_cast<int32_t>((static_cast<uint32_t>(word) >> (bits * i)) & ((1u << bits) - 1));
}

// Weight (n, k) of the layout: a nibble (even k low) at 4 bits, a byte at 8.
void set_code(const Int4Layout& out, int64_t n, int64_t k, int32_t q) {
    if (out.bits == 8) {
        out.data[n * out.K + k] = static_cast<uint8_t>(q);
        return;
    }
    uint8_t& byte = out.data[n * (out.K / 2) + k / 2];
    byte = k % 2 == 0 ? static_cast<uint8_t>((byte & 0xF0) | q) : static_cast<uint8_t>((byte & 0x0F) | (q << 4));
}

// scales [G, N] (and zeros, when given, [G, N]) → the layout's [N, G].
void transpose_groups(std::span<const float> scales, const Int4Layout& out) {
    const int64_t G = out.groups();
    PAGODA_CHECK(static_cast<int64_t>(scales.size()) == G * out.N);
    for (int64_t g = 0; g < G; ++g)
        for (int64_t n = 0; n < out.N; ++n)
            out.scales[n * G + g] = scales[g * out.N + n];
}

// qzeros [G, N/p] (p = 32 / out.bits values a word) with column p·c + order[i] in value i (+ offset) → zeros [N, G].
void unpack_zeros(std::span<const int32_t> qzeros, const int (&order)[8], int32_t offset, const Int4Layout& out) {
    const int per_word = 32 / out.bits;
    const int64_t G = out.groups(), words = out.N / per_word;
    PAGODA_CHECK(static_cast<int64_t>(qzeros.size()) == G * words);
    for (int64_t g = 0; g < G; ++g)
        for (int64_t c = 0; c < words; ++c)
            for (int i = 0; i < per_word; ++i)
                out.zeros[(per_word * c + order[i]) * G + g] =
                    static_cast<float>(value(qzeros[g * words + c], i, out.bits) + offset);
}

// The 8 x 8 matrix of nibbles whose row j is w[j] (nibble i at bits 4i), transposed in place: afterwards nibble j of
// w[i] is what nibble i of w[j] was. Swaps of ever larger blocks: each nibble pair of a 2 x 2 block, then 2 x 2 blocks
// of a 4 x 4, then 4 x 4 blocks.
void transpose_nibbles(uint32_t (&w)[8]) {
    const auto swap = [&w](int a, int b, int shift, uint32_t mask) {
        const uint32_t t = ((w[a] >> shift) ^ w[b]) & mask;
        w[b] ^= t;
        w[a] ^= t << shift;
    };
    for (int a : {0, 2, 4, 6})
        swap(a, a + 1, 4, 0x0F0F0F0Fu);
    for (int a : {0, 1, 4, 5})
        swap(a, a + 2, 8, 0x00FF00FFu);
    for (int a : {0, 1, 2, 3})
        swap(a, a + 4, 16, 0x0000FFFFu);
}

constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
constexpr int kSequential[8] = {0, 1, 2, 3, 4, 5, 6, 7};

void check_layout(const Int4Layout& out, int bits = 4) {
    PAGODA_CHECK(out.data && out.scales && out.N % 8 == 0 && out.K % 8 == 0 && out.group > 0 && out.group % 2 == 0 &&
                 out.K % out.group == 0);
    PAGODA_CHECK_MSG(out.bits == bits || (bits == 0 && (out.bits == 4 || out.bits == 8)),
                     "this packing is not of the layout's bits");
}

}  // namespace

void repack_awq_gemm(std::span<const int32_t> qweight, std::span<const int32_t> qzeros, std::span<const float> scales,
                     const Int4Layout& out, unsigned threads) {
    check_layout(out);
    PAGODA_CHECK(out.zeros && static_cast<int64_t>(qweight.size()) == out.K * (out.N / 8));
    const int64_t words = out.N / 8, row_bytes = out.K / 2;
    // Inputs k .. k + 7 of column n = 8c + kAwqOrder[i] are nibble i of words (k, c) .. (k + 7, c), and in the layout
    // they are the 4 bytes of row n at k / 2 (nibble j = input k + j, low nibbles first): nibble i of 8 words is the
    // 8 x 8 nibble matrix's column i, which transpose_nibbles makes word i. kBlock word columns a pass over every
    // input, 8 at a time: each input row's piece is one contiguous read, and each of the block's output rows is
    // written in order, 4 bytes at a time. (Nibble by nibble, input by input, the writes fell on every one of the N
    // rows for each input: ~40 s for an 8B model's weights.)
    constexpr int64_t kBlock = 16;
    parallel_for(
        static_cast<size_t>((words + kBlock - 1) / kBlock),
        [&](size_t block) {
            const int64_t c0 = static_cast<int64_t>(block) * kBlock, c1 = std::min(words, c0 + kBlock);
            for (int64_t k = 0; k < out.K; k += 8)
                for (int64_t c = c0; c < c1; ++c) {
                    uint32_t w[8];
                    for (int j = 0; j < 8; ++j)
                        w[j] = static_cast<uint32_t>(qweight[(k + j) * words + c]);
                    transpose_nibbles(w);
                    for (int i = 0; i < 8; ++i)
                        std::memcpy(out.data + (8 * c + kAwqOrder[i]) * row_bytes + k / 2, &w[i], 4);
                }
        },
        threads);
    unpack_zeros(qzeros, kAwqOrder, 0, out);
    transpose_groups(scales, out);
}

void repack_gptq(std::span<const int32_t> qweight, std::span<const int32_t> qzeros, std::span<const float> scales,
                 int32_t zero_offset, const Int4Layout& out, std::span<const int32_t> perm, unsigned threads) {
    check_layout(out, /*bits=*/0);
    const int per_word = 32 / out.bits;
    const int64_t R = out.K / per_word;
    PAGODA_CHECK(out.zeros && static_cast<int64_t>(qweight.size()) == R * out.N);
    PAGODA_CHECK(perm.empty() || static_cast<int64_t>(perm.size()) == out.K);
    if (perm.empty()) {
        // Word (r, n) holds inputs p·r .. p·r + p - 1 of column n, low bits first: the layout's bytes of those inputs
        // (4 bits: even k low; 8 bits: a byte each), so row n is column n of the words. A transpose, in tiles of
        // kTile x kTile words (a tile's reads and writes each kTile contiguous runs).
        constexpr int64_t kTile = 32;
        parallel_for(
            static_cast<size_t>((out.N + kTile - 1) / kTile),
            [&](size_t tile) {
                const int64_t n0 = static_cast<int64_t>(tile) * kTile, n1 = std::min(out.N, n0 + kTile);
                for (int64_t r0 = 0; r0 < R; r0 += kTile)
                    for (int64_t n = n0; n < n1; ++n)
                        for (int64_t r = r0; r < std::min(R, r0 + kTile); ++r)
                            std::memcpy(out.data + n * out.row_bytes() + 4 * r, &qweight[r * out.N + n], 4);
            },
            threads);
    } else {
        // The layout's input of each stored input: where it goes.
        std::vector<int64_t> position(static_cast<size_t>(out.K));
        for (int64_t k = 0; k < out.K; ++k)
            position[static_cast<size_t>(perm[static_cast<size_t>(k)])] = k;
        for (int64_t r = 0; r < R; ++r)
            for (int64_t n = 0; n < out.N; ++n)
                for (int i = 0; i < per_word; ++i)
                    set_code(out, n, position[static_cast<size_t>(per_word * r + i)],
                             value(qweight[r * out.N + n], i, out.bits));
    }
    unpack_zeros(qzeros, kSequential, zero_offset, out);
    transpose_groups(scales, out);
}

std::vector<int32_t> act_order_permutation(std::span<const int32_t> g_idx, int64_t group, int64_t groups,
                                           std::string& error) {
    const auto K = static_cast<int64_t>(g_idx.size());
    std::vector<int64_t> members(static_cast<size_t>(groups), 0);
    for (int64_t k = 0; k < K; ++k) {
        const int32_t g = g_idx[static_cast<size_t>(k)];
        if (g < 0 || g >= groups) {
            error = "input " + std::to_string(k) + " is in group " + std::to_string(g) + ", outside [0, " +
                    std::to_string(groups) + ")";
            return {};
        }
        ++members[static_cast<size_t>(g)];
    }
    for (int64_t g = 0; g < groups; ++g) {
        if (members[static_cast<size_t>(g)] != group) {
            error = "group " + std::to_string(g) + " has " + std::to_string(members[static_cast<size_t>(g)]) +
                    " inputs, not the group size " + std::to_string(group) +
                    ": the inputs sorted by group do not make contiguous groups";
            return {};
        }
    }
    // A counting sort: stable, and each group's inputs start at g · group.
    std::vector<int64_t> next(static_cast<size_t>(groups));
    for (int64_t g = 0; g < groups; ++g)
        next[static_cast<size_t>(g)] = g * group;
    std::vector<int32_t> perm(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k)
        perm[static_cast<size_t>(next[static_cast<size_t>(g_idx[static_cast<size_t>(k)])]++)] = static_cast<int32_t>(k);
    return perm;
}

void repack_pack_quantized(std::span<const int32_t> packed, std::span<const float> scales,
                           std::span<const int32_t> zero_points, const Int4Layout& out) {
    check_layout(out, /*bits=*/0);
    const int64_t words = out.K * out.bits / 32;
    PAGODA_CHECK(static_cast<int64_t>(packed.size()) == out.N * words &&
                 static_cast<int64_t>(scales.size()) == out.N * out.groups());
    // p values in input order are 4 bytes in the layout's order (4 bits: even k low; 8 bits: a byte each): the
    // int32's little-endian bytes.
    for (int64_t n = 0; n < out.N; ++n)
        for (int64_t c = 0; c < words; ++c) {
            const auto word = static_cast<uint32_t>(packed[n * words + c]);
            uint8_t* dst = out.data + n * out.row_bytes() + 4 * c;
            for (int b = 0; b < 4; ++b)
                dst[b] = static_cast<uint8_t>(word >> (8 * b));
        }
    std::copy(scales.begin(), scales.end(), out.scales);
    if (zero_points.empty()) return;
    // Zeros packed along the outputs: [N/p, G] is qzeros' [G, N/p] (GPTQ's sequential columns) transposed.
    PAGODA_CHECK(out.zeros);
    const int per_word = 32 / out.bits;
    const int64_t G = out.groups(), rows = out.N / per_word;
    PAGODA_CHECK(static_cast<int64_t>(zero_points.size()) == rows * G);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t g = 0; g < G; ++g)
            for (int i = 0; i < per_word; ++i)
                out.zeros[(per_word * r + i) * G + g] = static_cast<float>(value(zero_points[r * G + g], i, out.bits));
}

}  // namespace pagoda::model
