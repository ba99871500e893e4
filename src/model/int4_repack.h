// The int4 packings of AWQ, GPTQ and compressed-tensors checkpoints (and GPTQ's 8-bit one), rewritten at load into the
// one grouped layout every kernel reads (LinearWeight's kInt4: U8 [N, K/2] with even k in the low nibble; kInt8: U8
// [N, K], one value a byte; F32 scales and zero points [N, K/group]). Plain functions over host arrays (no tensors, no
// checkpoint) so that each packing is tested alone.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace pagoda::model {

// Where the repacked weight goes: data [N, K * bits / 8] bytes, scales [N, K/group] and zeros [N, K/group] (null for
// a symmetric format, whose zero is 8).
struct Int4Layout {
    uint8_t* data = nullptr;
    float* scales = nullptr;
    float* zeros = nullptr;
    int64_t N = 0, K = 0, group = 0;  // group divides K and is even
    int bits = 4;                     // 4 (kInt4), or 8 (kInt8: GPTQ and compressed-tensors)
    int64_t groups() const { return K / group; }
    int64_t row_bytes() const { return K * bits / 8; }
};

// AutoAWQ's GEMM packing (version "gemm"): qweight I32 [K, N/8] and qzeros I32 [K/group, N/8] hold 8 output columns
// per int32 in AWQ's interleaved order (nibble i holds column 8c + {0, 2, 4, 6, 1, 3, 5, 7}[i]); scales [K/group, N]
// (already f32). value(n, k) = (q - zero) · scale. out.bits must be 4. `threads`: how many share the weight's rows
// (parallel_for's max_threads: 0 every core; 1, the caller's thread alone, where the caller runs several at once).
void repack_awq_gemm(std::span<const int32_t> qweight, std::span<const int32_t> qzeros, std::span<const float> scales,
                     const Int4Layout& out, unsigned threads = 1);

// GPTQ (AutoGPTQ / GPTQModel, 4 or 8 bits: out.bits): with p = 32 / bits values per int32, qweight I32 [K/p, N] holds
// p consecutive inputs per int32 (value i, bits [i·bits, (i+1)·bits), is input p·r + i), qzeros I32 [K/group, N/p] p
// consecutive columns per int32 likewise, scales [K/group, N]. `zero_offset` is added to each stored zero: 1 for the
// "gptq" (v1) checkpoint format, which stores zero - 1, 0 for "gptq_v2". `perm` (act-order; empty: the identity)
// puts input perm[k] at the layout's input k: the layout then holds W[:, perm], whose group k / group must be input
// perm[k]'s (act_order_permutation gives such a perm). `threads` as repack_awq_gemm's (without perm).
void repack_gptq(std::span<const int32_t> qweight, std::span<const int32_t> qzeros, std::span<const float> scales,
                 int32_t zero_offset, const Int4Layout& out, std::span<const int32_t> perm = {}, unsigned threads = 1);

// GPTQ act-order: g_idx[k] is the group of input k, groups formed in the order GPTQ processed the inputs. The stable
// sort of the inputs by group (perm[j] is the j-th input of that order), or an empty vector with `error` saying why
// when the order does not give `groups` contiguous groups of `group` inputs each (a group of another size, a g_idx
// outside [0, groups)). The identity for the trivial g_idx (k / group).
std::vector<int32_t> act_order_permutation(std::span<const int32_t> g_idx, int64_t group, int64_t groups,
                                           std::string& error);

// compressed-tensors pack-quantized (4 or 8 bits: out.bits), with p = 32 / bits values per int32: weight_packed I32
// [N, K/p] holds p consecutive inputs per int32 (value i is input p·c + i), each stored as q + 2^(bits-1) of a signed
// q; weight_scale [N, K/group] (already f32). Symmetric (`zero_points` empty): value = (stored - 2^(bits-1)) · scale,
// the layout's symmetric zero, so out.zeros is not written (may be null). With zero points: weight_zero_point I32
// [N/p, K/group] packed along the outputs (value i of word (r, g) is output p·r + i's zero of group g), each stored
// as its signed zero + 2^(bits-1) like the weights, so value = (stored - stored zero) · scale.
void repack_pack_quantized(std::span<const int32_t> packed, std::span<const float> scales,
                           std::span<const int32_t> zero_points, const Int4Layout& out);

}  // namespace pagoda::model
