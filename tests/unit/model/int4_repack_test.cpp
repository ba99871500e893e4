// The int4 repacking of each checkpoint format: random 4-bit values, zero points and scales packed here the way each
// tool writes them (AutoAWQ's interleaved GEMM order, GPTQ's input-major words and its zero - 1, compressed-tensors'
// q + 8), then repacked; every nibble, scale and zero must come back where LinearWeight's int4 layout puts it.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "model/int4_repack.h"

namespace pagoda::model {
namespace {

struct Values {
    int64_t N, K, group;
    std::vector<int> q;         // [N, K]
    std::vector<int> zeros;     // [N, G]
    std::vector<float> scales;  // [N, G]
    int64_t G() const { return K / group; }
};

Values random_values(int64_t N, int64_t K, int64_t group, std::mt19937& rng) {
    Values v{N, K, group, {}, {}, {}};
    std::uniform_int_distribution<int> nibble(0, 15), zero(1, 15);
    std::uniform_real_distribution<float> scale(1e-3f, 1e-1f);
    v.q.resize(N * K);
    for (int& q : v.q)
        q = nibble(rng);
    v.zeros.resize(N * v.G());
    for (int& z : v.zeros)
        z = zero(rng);  // >= 1: GPTQ's v1 format stores zero - 1
    v.scales.resize(N * v.G());
    for (float& s : v.scales)
        s = scale(rng);
    return v;
}

// Packs 8 values into one int32, value i in bits [4i, 4i + 4).
int32_t word(const int (&values)[8]) {
    uint32_t w = 0;
    for (int i = 0; i < 8; ++i)
        w |= static_cast<uint32_t>(values[i]) << (4 * i);
    return static_cast<int32_t>(w);
}

// The layout's values: nibble (n, k), and scales/zeros [N, G].
struct Repacked {
    std::vector<uint8_t> data;
    std::vector<float> scales, zeros;
    Int4Layout layout;
    explicit Repacked(const Values& v, bool zero_points)
        : data(v.N * v.K / 2), scales(v.N * v.G()), zeros(zero_points ? v.N * v.G() : 0) {
        layout = {data.data(), scales.data(), zero_points ? zeros.data() : nullptr, v.N, v.K, v.group};
    }
    int at(int64_t n, int64_t k) const { return (data[n * (layout.K / 2) + k / 2] >> (4 * (k % 2))) & 0xF; }
};

void expect_values(const Repacked& r, const Values& v, bool zero_points) {
    for (int64_t n = 0; n < v.N; ++n)
        for (int64_t k = 0; k < v.K; ++k)
            ASSERT_EQ(r.at(n, k), v.q[n * v.K + k]) << "n=" << n << " k=" << k;
    for (int64_t i = 0; i < v.N * v.G(); ++i) {
        ASSERT_EQ(r.scales[i], v.scales[i]) << i;
        if (zero_points) {
            ASSERT_EQ(r.zeros[i], static_cast<float>(v.zeros[i])) << i;
        }
    }
}

// scales as the AWQ/GPTQ checkpoints store them: [G, N].
std::vector<float> scales_by_group(const Values& v) {
    std::vector<float> s(v.G() * v.N);
    for (int64_t n = 0; n < v.N; ++n)
        for (int64_t g = 0; g < v.G(); ++g)
            s[g * v.N + n] = v.scales[n * v.G() + g];
    return s;
}

// qzeros [G, N/8] with column 8c + order[i] in nibble i, each stored as zero - minus.
std::vector<int32_t> pack_zeros(const Values& v, const int (&order)[8], int minus) {
    std::vector<int32_t> out;
    for (int64_t g = 0; g < v.G(); ++g)
        for (int64_t c = 0; c < v.N / 8; ++c) {
            int vals[8];
            for (int i = 0; i < 8; ++i)
                vals[i] = v.zeros[(8 * c + order[i]) * v.G() + g] - minus;
            out.push_back(word(vals));
        }
    return out;
}

constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
constexpr int kSequential[8] = {0, 1, 2, 3, 4, 5, 6, 7};

// Shapes for the packings that work in blocks of rows: one partial block (N = 24), and several blocks with a partial
// last one (N = 264: 33 AWQ words of 8 columns, 9 GPTQ tiles of 32 rows; K = 320: 40 GPTQ words a row, 1 tile and a
// part), repacked by the caller's thread alone and by every core.
struct Case {
    int64_t N, K, group;
    unsigned threads;
};
constexpr Case kBlockCases[] = {
    {24, 128, 32, 1}, {24, 128, 64, 1}, {24, 128, 128, 1}, {264, 320, 64, 1}, {264, 320, 64, 0}};

TEST(Int4Repack, AwqGemm) {
    std::mt19937 rng(1);
    for (const Case& c : kBlockCases) {
        const Values v = random_values(c.N, c.K, c.group, rng);
        std::vector<int32_t> qweight;  // [K, N/8]: weight^T, 8 columns per word in AWQ's order
        for (int64_t k = 0; k < v.K; ++k)
            for (int64_t w = 0; w < v.N / 8; ++w) {
                int vals[8];
                for (int i = 0; i < 8; ++i)
                    vals[i] = v.q[(8 * w + kAwqOrder[i]) * v.K + k];
                qweight.push_back(word(vals));
            }
        Repacked r(v, true);
        repack_awq_gemm(qweight, pack_zeros(v, kAwqOrder, 0), scales_by_group(v), r.layout, c.threads);
        expect_values(r, v, true);
    }
}

// qweight [K/8, N] as GPTQ packs it: 8 consecutive inputs per word.
std::vector<int32_t> gptq_words(const Values& v) {
    std::vector<int32_t> qweight;
    for (int64_t r = 0; r < v.K / 8; ++r)
        for (int64_t n = 0; n < v.N; ++n) {
            int vals[8];
            for (int i = 0; i < 8; ++i)
                vals[i] = v.q[n * v.K + 8 * r + i];
            qweight.push_back(word(vals));
        }
    return qweight;
}

TEST(Int4Repack, GptqV1AndV2GroupsAndPerChannel) {
    std::mt19937 rng(2);
    for (const auto& [minus, group] : {std::pair{1, 32}, std::pair{0, 32}, std::pair{1, 96}}) {  // 96: one group a row
        const Values v = random_values(16, 96, group, rng);
        Repacked r(v, true);
        repack_gptq(gptq_words(v), pack_zeros(v, kSequential, minus), scales_by_group(v), minus, r.layout);
        expect_values(r, v, true);
    }
    for (const Case& c : kBlockCases) {
        const Values v = random_values(c.N, c.K, c.group, rng);
        Repacked r(v, true);
        repack_gptq(gptq_words(v), pack_zeros(v, kSequential, 1), scales_by_group(v), 1, r.layout, {}, c.threads);
        expect_values(r, v, true);
    }
}

TEST(Int4Repack, PackQuantizedSymmetricAndWithZeroPoints) {
    std::mt19937 rng(3);
    for (const bool zero_points : {false, true})
        for (int64_t group : {16, 128}) {
            const Values v = random_values(16, 128, group, rng);
            std::vector<int32_t> packed;  // [N, K/8]: 8 consecutive inputs per word, q + 8 of a signed q
            for (int64_t n = 0; n < v.N; ++n)
                for (int64_t c = 0; c < v.K / 8; ++c) {
                    int vals[8];
                    for (int i = 0; i < 8; ++i)
                        vals[i] = (v.q[n * v.K + 8 * c + i] - 8) + 8;
                    packed.push_back(word(vals));
                }
            // weight_zero_point [N/8, G]: 8 consecutive outputs per word (pack_to_int32 along dim 0), zero + 8 of a
            // signed zero.
            std::vector<int32_t> zeros;
            for (int64_t r = 0; zero_points && r < v.N / 8; ++r)
                for (int64_t g = 0; g < v.G(); ++g) {
                    int vals[8];
                    for (int i = 0; i < 8; ++i)
                        vals[i] = (v.zeros[(8 * r + i) * v.G() + g] - 8) + 8;
                    zeros.push_back(word(vals));
                }
            Repacked r(v, zero_points);
            repack_pack_quantized(packed, v.scales, zeros, r.layout);
            expect_values(r, v, zero_points);
        }
}

// compressed-tensors W8A16: weight_packed [N, K/4] holds 4 consecutive inputs per int32 (byte i is input 4c + i),
// weight_zero_point [N/4, G] 4 consecutive outputs per int32; every byte of a word differs (a byte read from the
// wrong place shows).
TEST(Int8Repack, PackQuantizedWithZeroPoints) {
    constexpr int64_t N = 8, K = 16, group = 8, G = K / group;
    const auto q = [](int64_t n, int64_t k) { return static_cast<uint32_t>((n * 37 + k * 11 + 5) % 256); };
    const auto zero = [](int64_t n, int64_t g) { return static_cast<uint32_t>((n * 29 + g * 101 + 3) % 256); };
    std::vector<int32_t> packed, zeros;
    for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < K / 4; ++c)
            packed.push_back(static_cast<int32_t>(q(n, 4 * c) | q(n, 4 * c + 1) << 8 | q(n, 4 * c + 2) << 16 |
                                                  q(n, 4 * c + 3) << 24));
    for (int64_t r = 0; r < N / 4; ++r)
        for (int64_t g = 0; g < G; ++g)
            zeros.push_back(static_cast<int32_t>(zero(4 * r, g) | zero(4 * r + 1, g) << 8 | zero(4 * r + 2, g) << 16 |
                                                 zero(4 * r + 3, g) << 24));
    std::vector<float> scales(N * G);
    for (int64_t i = 0; i < N * G; ++i)
        scales[i] = 0.5f + static_cast<float>(i);
    std::vector<uint8_t> data(N * K, 0xEE);
    std::vector<float> out_scales(N * G), out_zeros(N * G);
    const Int4Layout layout{data.data(), out_scales.data(), out_zeros.data(), N, K, group, 8};
    repack_pack_quantized(packed, scales, zeros, layout);
    for (int64_t n = 0; n < N; ++n) {
        for (int64_t k = 0; k < K; ++k)
            ASSERT_EQ(data[n * K + k], q(n, k)) << "n=" << n << " k=" << k;
        for (int64_t g = 0; g < G; ++g) {
            ASSERT_EQ(out_zeros[n * G + g], static_cast<float>(zero(n, g))) << "n=" << n << " g=" << g;
            ASSERT_EQ(out_scales[n * G + g], scales[n * G + g]);
        }
    }
}

// GPTQ 8-bit: qweight [K/4, N] holds 4 consecutive inputs per int32 (byte i is input 4r + i, low byte first), qzeros
// [G, N/4] 4 consecutive columns per int32, each stored zero - 1 (v1). Values chosen so that every byte of a word
// differs (a byte read from the wrong place shows), the words written here by shifts and the layout read back as
// bytes [N, K].
TEST(Int8Repack, GptqV1AndV2) {
    constexpr int64_t N = 8, K = 16, group = 8, G = K / group;
    const auto q = [](int64_t n, int64_t k) { return static_cast<int>((n * 37 + k * 11 + 5) % 256); };
    const auto zero = [](int64_t n, int64_t g) { return static_cast<int>(1 + (n * 29 + g * 101) % 255); };  // 1..255
    for (int minus : {1, 0}) {
        std::vector<int32_t> qweight;  // [K/4, N]
        for (int64_t r = 0; r < K / 4; ++r)
            for (int64_t n = 0; n < N; ++n)
                qweight.push_back(static_cast<int32_t>(
                    static_cast<uint32_t>(q(n, 4 * r)) | static_cast<uint32_t>(q(n, 4 * r + 1)) << 8 |
                    static_cast<uint32_t>(q(n, 4 * r + 2)) << 16 | static_cast<uint32_t>(q(n, 4 * r + 3)) << 24));
        std::vector<int32_t> qzeros;  // [G, N/4]
        for (int64_t g = 0; g < G; ++g)
            for (int64_t c = 0; c < N / 4; ++c) {
                uint32_t w = 0;
                for (int i = 0; i < 4; ++i)
                    w |= static_cast<uint32_t>(zero(4 * c + i, g) - minus) << (8 * i);
                qzeros.push_back(static_cast<int32_t>(w));
            }
        std::vector<float> scales(G * N);  // [G, N]
        for (int64_t i = 0; i < G * N; ++i)
            scales[i] = 0.25f + static_cast<float>(i);
        std::vector<uint8_t> data(N * K, 0xEE);
        std::vector<float> out_scales(N * G), out_zeros(N * G);
        Int4Layout layout{data.data(), out_scales.data(), out_zeros.data(), N, K, group, 8};
        EXPECT_EQ(layout.row_bytes(), K);
        repack_gptq(qweight, qzeros, scales, minus, layout);
        for (int64_t n = 0; n < N; ++n) {
            for (int64_t k = 0; k < K; ++k)
                ASSERT_EQ(data[n * K + k], q(n, k)) << "n=" << n << " k=" << k;
            for (int64_t g = 0; g < G; ++g) {
                ASSERT_EQ(out_zeros[n * G + g], static_cast<float>(zero(n, g))) << "n=" << n << " g=" << g;
                ASSERT_EQ(out_scales[n * G + g], scales[g * N + n]) << "n=" << n << " g=" << g;
            }
        }
    }
}

// GPTQ act-order: g_idx[k] is the group of input k. The permutation sorts the inputs by group, stably; worked out by
// hand for 8 inputs in 4 groups of 2.
TEST(ActOrderPermutation, SortsInputsByGroupStably) {
    std::string error;
    const std::vector<int32_t> g_idx = {2, 0, 3, 1, 0, 2, 1, 3};
    EXPECT_EQ(act_order_permutation(g_idx, 2, 4, error), (std::vector<int32_t>{1, 4, 3, 6, 0, 5, 2, 7}));
    EXPECT_EQ(error, "");
    const std::vector<int32_t> trivial = {0, 0, 1, 1, 2, 2, 3, 3};
    EXPECT_EQ(act_order_permutation(trivial, 2, 4, error), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(ActOrderPermutation, RefusesGroupsThatAreNotWhole) {
    std::string error;
    const std::vector<int32_t> uneven = {0, 0, 0, 1, 2, 2, 3, 3};  // group 0 has 3 inputs, group 1 one
    EXPECT_TRUE(act_order_permutation(uneven, 2, 4, error).empty());
    EXPECT_NE(error.find("group 0 has 3 inputs"), std::string::npos) << error;
    const std::vector<int32_t> outside = {0, 0, 1, 1, 2, 2, 3, 4};
    EXPECT_TRUE(act_order_permutation(outside, 2, 4, error).empty());
    EXPECT_NE(error.find("input 7 is in group 4"), std::string::npos) << error;
    const std::vector<int32_t> negative = {-1, 0, 1, 1, 2, 2, 3, 3};
    EXPECT_TRUE(act_order_permutation(negative, 2, 4, error).empty());
    EXPECT_NE(error.find("input 0 is in group -1"), std::string::npos) << error;
}

// An act-order checkpoint stores its inputs in their own order, each dequantised with its group's (g_idx's) scale and
// zero. The repack puts input perm[j] at the layout's j; the layout with x gathered by perm must compute the same
// product as the checkpoint read with g_idx, computed here from the stored values directly (GPTQ's dequantisation).
TEST(Int4Repack, GptqActOrderKeepsEachInputWithItsGroup) {
    std::mt19937 rng(4);
    constexpr int64_t N = 16, K = 64, group = 8, G = K / group;
    // A random g_idx of whole groups: group j / group for the j-th input of a random order.
    std::vector<int32_t> order(K);
    for (int64_t k = 0; k < K; ++k)
        order[k] = static_cast<int32_t>(k);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<int32_t> g_idx(K);
    for (int64_t j = 0; j < K; ++j)
        g_idx[order[j]] = static_cast<int32_t>(j / group);
    std::string error;
    const std::vector<int32_t> perm = act_order_permutation(g_idx, group, G, error);
    ASSERT_EQ(perm.size(), static_cast<size_t>(K)) << error;
    for (int64_t j = 0; j < K; ++j)
        ASSERT_EQ(g_idx[perm[j]], j / group) << j;

    // The checkpoint: codes q[n, k] of input k (stored order), zeros/scales per (n, group).
    Values v = random_values(N, K, group, rng);
    Repacked r(v, true);  // gptq_words: 8 consecutive (stored-order) inputs per word
    repack_gptq(gptq_words(v), pack_zeros(v, kSequential, 1), scales_by_group(v), 1, r.layout, perm);

    std::uniform_real_distribution<double> unit(-1.0, 1.0);
    std::vector<double> x(K);
    for (double& e : x)
        e = unit(rng);
    for (int64_t n = 0; n < N; ++n) {
        double want = 0, got = 0;
        for (int64_t k = 0; k < K; ++k) {  // the checkpoint's product: input k with group g_idx[k]
            const int64_t g = g_idx[k];
            want += (v.q[n * K + k] - v.zeros[n * G + g]) * static_cast<double>(v.scales[n * G + g]) * x[k];
        }
        for (int64_t j = 0; j < K; ++j) {  // the layout's: input j with group j / group, x gathered by perm
            const int64_t g = j / group;
            got += (r.at(n, j) - r.zeros[n * G + g]) * static_cast<double>(r.scales[n * G + g]) * x[perm[j]];
            ASSERT_EQ(r.at(n, j), v.q[n * K + perm[j]]) << "n=" << n << " j=" << j;
        }
        EXPECT_NEAR(got, want, 1e-12) << "n=" << n;
    }
}

}  // namespace
}  // namespace pagoda::model
