// The int4 repacking of each checkpoint format: random 4-bit values, zero points and scales packed here the way each
// tool writes them (AutoAWQ's interleaved GEMM order, GPTQ's input-major words and its zero - 1, compressed-tensors'
// q + 8), then repacked; every nibble, scale and zero must come back where LinearWeight's int4 layout puts it.
#include <gtest/gtest.h>

#include <random>
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

TEST(Int4Repack, AwqGemm) {
    std::mt19937 rng(1);
    for (int64_t group : {32, 64, 128}) {
        const Values v = random_values(24, 128, group, rng);
        std::vector<int32_t> qweight;  // [K, N/8]: weight^T, 8 columns per word in AWQ's order
        for (int64_t k = 0; k < v.K; ++k)
            for (int64_t c = 0; c < v.N / 8; ++c) {
                int vals[8];
                for (int i = 0; i < 8; ++i)
                    vals[i] = v.q[(8 * c + kAwqOrder[i]) * v.K + k];
                qweight.push_back(word(vals));
            }
        Repacked r(v, true);
        repack_awq_gemm(qweight, pack_zeros(v, kAwqOrder, 0), scales_by_group(v), r.layout);
        expect_values(r, v, true);
    }
}

TEST(Int4Repack, GptqV1AndV2GroupsAndPerChannel) {
    std::mt19937 rng(2);
    for (const auto& [minus, group] : {std::pair{1, 32}, std::pair{0, 32}, std::pair{1, 96}}) {  // 96: one group a row
        const Values v = random_values(16, 96, group, rng);
        std::vector<int32_t> qweight;  // [K/8, N]: 8 consecutive inputs per word
        for (int64_t r = 0; r < v.K / 8; ++r)
            for (int64_t n = 0; n < v.N; ++n) {
                int vals[8];
                for (int i = 0; i < 8; ++i)
                    vals[i] = v.q[n * v.K + 8 * r + i];
                qweight.push_back(word(vals));
            }
        Repacked r(v, true);
        repack_gptq(qweight, pack_zeros(v, kSequential, minus), scales_by_group(v), minus, r.layout);
        expect_values(r, v, true);
    }
}

TEST(Int4Repack, PackQuantizedIsSymmetric) {
    std::mt19937 rng(3);
    for (int64_t group : {16, 128}) {
        const Values v = random_values(8, 128, group, rng);
        std::vector<int32_t> packed;  // [N, K/8]: 8 consecutive inputs per word, q + 8 of a signed q
        for (int64_t n = 0; n < v.N; ++n)
            for (int64_t c = 0; c < v.K / 8; ++c) {
                int vals[8];
                for (int i = 0; i < 8; ++i)
                    vals[i] = (v.q[n * v.K + 8 * c + i] - 8) + 8;
                packed.push_back(word(vals));
            }
        Repacked r(v, false);
        repack_pack_quantized(packed, v.scales, r.layout);
        expect_values(r, v, false);
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

}  // namespace
}  // namespace pagoda::model
