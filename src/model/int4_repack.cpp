#include "model/int4_repack.h"

#include <algorithm>

#include "common/check.h"

namespace pagoda::model {

namespace {

int32_t nibble(int32_t word, int i) {
    return (static_cast<uint32_t>(word) >> (4 * i)) & 0xF;
}

void set_nibble(const Int4Layout& out, int64_t n, int64_t k, int32_t q) {
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

// qzeros [G, N/8] with column 8c + order[i] in nibble i (+ offset) → zeros [N, G].
void unpack_zeros(std::span<const int32_t> qzeros, const int (&order)[8], int32_t offset, const Int4Layout& out) {
    const int64_t G = out.groups(), words = out.N / 8;
    PAGODA_CHECK(static_cast<int64_t>(qzeros.size()) == G * words);
    for (int64_t g = 0; g < G; ++g)
        for (int64_t c = 0; c < words; ++c)
            for (int i = 0; i < 8; ++i)
                out.zeros[(8 * c + order[i]) * G + g] = static_cast<float>(nibble(qzeros[g * words + c], i) + offset);
}

constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
constexpr int kSequential[8] = {0, 1, 2, 3, 4, 5, 6, 7};

void check_layout(const Int4Layout& out) {
    PAGODA_CHECK(out.data && out.scales && out.N % 8 == 0 && out.K % 8 == 0 && out.group > 0 && out.group % 2 == 0 &&
                 out.K % out.group == 0);
}

}  // namespace

void repack_awq_gemm(std::span<const int32_t> qweight, std::span<const int32_t> qzeros, std::span<const float> scales,
                     const Int4Layout& out) {
    check_layout(out);
    PAGODA_CHECK(out.zeros && static_cast<int64_t>(qweight.size()) == out.K * (out.N / 8));
    const int64_t words = out.N / 8;
    for (int64_t k = 0; k < out.K; ++k)
        for (int64_t c = 0; c < words; ++c)
            for (int i = 0; i < 8; ++i)
                set_nibble(out, 8 * c + kAwqOrder[i], k, nibble(qweight[k * words + c], i));
    unpack_zeros(qzeros, kAwqOrder, 0, out);
    transpose_groups(scales, out);
}

void repack_gptq(std::span<const int32_t> qweight, std::span<const int32_t> qzeros, std::span<const float> scales,
                 int32_t zero_offset, const Int4Layout& out) {
    check_layout(out);
    PAGODA_CHECK(out.zeros && static_cast<int64_t>(qweight.size()) == (out.K / 8) * out.N);
    for (int64_t r = 0; r < out.K / 8; ++r)
        for (int64_t n = 0; n < out.N; ++n)
            for (int i = 0; i < 8; ++i)
                set_nibble(out, n, 8 * r + i, nibble(qweight[r * out.N + n], i));
    unpack_zeros(qzeros, kSequential, zero_offset, out);
    transpose_groups(scales, out);
}

void repack_pack_quantized(std::span<const int32_t> packed, std::span<const float> scales, const Int4Layout& out) {
    check_layout(out);
    const int64_t words = out.K / 8;
    PAGODA_CHECK(static_cast<int64_t>(packed.size()) == out.N * words &&
                 static_cast<int64_t>(scales.size()) == out.N * out.groups());
    // Eight nibbles in input order are four bytes in the layout's order: the int32's little-endian bytes.
    for (int64_t n = 0; n < out.N; ++n)
        for (int64_t c = 0; c < words; ++c) {
            const auto word = static_cast<uint32_t>(packed[n * words + c]);
            uint8_t* dst = out.data + n * (out.K / 2) + 4 * c;
            for (int b = 0; b < 4; ++b)
                dst[b] = static_cast<uint8_t>(word >> (8 * b));
        }
    std::copy(scales.begin(), scales.end(), out.scales);
}

}  // namespace pagoda::model
