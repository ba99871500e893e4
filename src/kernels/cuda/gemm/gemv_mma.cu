// fp8 weights for 1 to kGemvFp8MmaTokens tokens on tensor cores (gemv.h). Why: the plain fp8 GEMV (gemv.cu) turns
// each weight into f32 with two conversion instructions, rounds the scaled weight to bf16 with a third and multiplies
// on the CUDA cores, and conversions issue at a fraction of the FMA rate: at one token it read Qwen3-8B's fp8
// projections at 1.4-2.2 TB/s on an H100 whose copy bandwidth is 2.84 (qkv 18.0 us, the same as bf16's 19.3 for
// twice the bytes), and the weight-only mma GEMM that took 2-128 tokens read them at a third of that.
// Measured on that H100 (session 23, pagoda_op_bench --table qwen3-8b): 2-8 tokens cost what one does here, about
// half the weight-only mma GEMM's time (qkv 14.4 against 35.3 us at 2 tokens, gate_up 50.6 against 97.8, down 35.9
// against 66.5), so linear() takes it for 2-8 tokens. At one token it is no better than the plain GEMV (qkv 14.5
// against 18.1, gate_up 50.1 against 45.9, down 34.9 against 29.7): still instruction-bound at ~2 TB/s, and N = 4096
// gives 128 blocks, one an SM, too few loads in flight; that is the next thing to change here.
//
// Here each e4m3 byte becomes an f32 with integer instructions (one byte permute, one shift, one mask: the byte's
// exponent and mantissa land in the f32's low exponent bits, giving q · 2^-120 exactly, e4m3 subnormals included as
// f32 denormals), times 2^120 and the scale (exact, then one rounding: q · s as the dequantised copy computes it),
// and two such values are rounded to a bf16 pair by one conversion: bf16(q · s), the weight the cuBLASLt path's bf16
// copy holds, bit for bit. The products with x (rounded to bf16, as that path's input) and their fp32 sums are
// mma.sync m16n8k16's: a token is a column of the B operand, so 1 to 8 tokens cost the same instructions.
//
// A block takes 32 weight rows (two m16 tiles; with the fused gate/up, 16 gate rows and their 16 up rows, so one lane
// holds both sums of an output) and its 8 warps split K: warp w takes the 64-column chunks w, w + 8, ... Lane (g, t)
// (g = lane / 4, t = lane % 4) loads 16 bytes of each of its rows g, g + 8, g + 16, g + 24 at columns chunk + 16 t:
// every load is whole, and a warp's loads of one row are 64 contiguous bytes. The mma's k positions are a
// permutation of those columns (the sum does not care, as long as x is permuted alike): for mma j (0..3) of a chunk,
// lane t's A pairs (k 2t, 2t+1) and (k 2t+8, 2t+9) are its columns 16 t + 4 j + (0, 1) and + (2, 3), and the B pairs
// of token g the same columns of x. The warps' sums meet in shared memory and are added in warp order: the result
// does not depend on timing.
//
// e4m3's NaN bytes (0x7f, 0xff) come out as 480 here, where the dequantised copy has NaN: no checkpoint stores them
// (quantizers saturate at 448).
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm/column_groups.cuh"
#include "kernels/cuda/gemm/gemv.h"
#include "kernels/cuda/gemm/mma_tile.cuh"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kRows = 32;   // weight rows a block takes
constexpr int kChunk = 64;  // columns a warp takes per step: 4 lanes x 16 bytes of each row
constexpr int kUnroll = 2;  // chunks in flight per warp (8 16-byte loads a lane)

// Byte i of w (an e4m3 value q) as f32 q · 2^-120: a permute puts the byte at bits 16-23 and its sign, replicated, at
// 24-31; shifted left by 4 the byte's exponent and mantissa fill bits 20-26 (the f32 exponent's low bits and the
// mantissa's top) and the mask keeps them and bit 31.
template <int kByte>
__device__ __forceinline__ float e4m3_scaled_down(uint32_t w) {
    constexpr uint32_t kSelect = (0x8u | kByte) << 12 | uint32_t(kByte) << 8 | 0x44u;
    uint32_t p;
    asm("prmt.b32 %0, %1, 0, %2;" : "=r"(p) : "r"(w), "n"(kSelect));
    return __uint_as_float((p << 4) & 0x87F00000u);
}

__device__ __forceinline__ uint32_t bf16_pair(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
}

// bf16(q · s) of bytes (lo_byte, lo_byte + 1) of w, as one bf16 pair.
template <int kLoByte>
__device__ __forceinline__ uint32_t dequantized_pair(uint32_t w, float s) {
    return bf16_pair(e4m3_scaled_down<kLoByte>(w) * 0x1p120f * s, e4m3_scaled_down<kLoByte + 1>(w) * 0x1p120f * s);
}

struct Fp8MmaArgs {
    GemvArgs g;
    int64_t T, x_stride, y_stride;
};

// The four weight rows of lane g (tile m, half h: local row 16 m + 8 h + g) in the weight; -1 where past the rows.
__device__ __forceinline__ int64_t weight_row(const Fp8MmaArgs& a, int64_t block, int local) {
    if (a.g.glu_rows) {  // tile 0: gate rows, tile 1: the same outputs' up rows
        const int64_t n = block * (kRows / 2) + (local & 15);
        return n < a.g.N ? n + (local >= 16 ? a.g.glu_rows : 0) : -1;
    }
    const int64_t n = block * kRows + local;
    return n < a.g.N ? n : -1;
}

// Lane (g, t)'s rows as row pointers (at its 16 columns) and rows of the scale grid.
struct LaneRows {
    const uint8_t* w[4];
    const float* scales[4];
    __device__ __forceinline__ LaneRows(const Fp8MmaArgs& a, int g, int t) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int64_t n = weight_row(a, blockIdx.x, 8 * r + g);
            w[r] = static_cast<const uint8_t*>(a.g.w) + (n >= 0 ? n : 0) * a.g.w_stride + 16 * t;
            scales[r] = a.g.scales.data + ColumnGroups(a.g.scales.rows).of(n >= 0 ? n : 0) * a.g.scales.stride;
        }
    }
};

// Asks L2 for the warp's first chunk of each of the lane's rows. Issued before the prologue: weights are written by no
// kernel, so they stream in while the kernel before this one finishes.
__device__ __forceinline__ void prefetch_first_loads(const Fp8MmaArgs& a, int warp, int lane) {
    if (warp >= a.g.K / kChunk) return;
    const LaneRows rows(a, lane >> 2, lane & 3);
#pragma unroll
    for (int r = 0; r < 4; ++r)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(rows.w[r] + int64_t(warp) * kChunk));
}

__global__ void __launch_bounds__(kWarps * 32) gemv_fp8_mma_kernel(Fp8MmaArgs a) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    prefetch_first_loads(a, warp, lane);
    PAGODA_KERNEL_PROLOGUE();
    const LaneRows rows(a, g, t);
    const ColumnGroups cols(a.g.scales.cols);
    const int64_t block = blockIdx.x, chunks = a.g.K / kChunk;
    const bool has_token = g < a.T;
    const float* x = a.g.x + (has_token ? g : 0) * a.x_stride + 16 * t;

    float acc[2][4] = {};
    for (int64_t c0 = warp; c0 < chunks; c0 += int64_t(kWarps) * kUnroll) {
        uint4 v[kUnroll][4];
        float s[kUnroll][4];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int64_t c = c0 + int64_t(u) * kWarps;
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const bool in = c < chunks;
                v[u][r] = in ? __ldg(reinterpret_cast<const uint4*>(rows.w[r] + c * kChunk)) : make_uint4(0, 0, 0, 0);
                s[u][r] = in ? __ldg(rows.scales[r] + cols.of(c * kChunk + 16 * t)) : 0.0f;
            }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int64_t c = c0 + int64_t(u) * kWarps;
            if (c >= chunks) break;  // the same for the whole warp
            uint32_t b[8];           // token g's x at this lane's 16 columns, as bf16 pairs
            if (has_token) {
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const float4 xv = __ldg(reinterpret_cast<const float4*>(x + c * kChunk + 4 * q));
                    b[2 * q] = bf16_pair(xv.x, xv.y), b[2 * q + 1] = bf16_pair(xv.z, xv.w);
                }
            } else {
#pragma unroll
                for (int q = 0; q < 8; ++q)
                    b[q] = 0;
            }
#pragma unroll
            for (int m = 0; m < 2; ++m) {
                const uint32_t* lo = reinterpret_cast<const uint32_t*>(&v[u][2 * m]);      // row 16 m + g
                const uint32_t* hi = reinterpret_cast<const uint32_t*>(&v[u][2 * m + 1]);  // row 16 m + g + 8
                const float s_lo = s[u][2 * m], s_hi = s[u][2 * m + 1];
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const uint32_t af[4] = {dequantized_pair<0>(lo[j], s_lo), dequantized_pair<0>(hi[j], s_hi),
                                            dequantized_pair<2>(lo[j], s_lo), dequantized_pair<2>(hi[j], s_hi)};
                    const uint32_t bf[2] = {b[2 * j], b[2 * j + 1]};
                    mma::mma_16816<__nv_bfloat16>(acc[m], af, bf);
                }
            }
        }
    }

    // acc[m][2 h + e] is local row 16 m + 8 h + g, token 2 t + e.
    __shared__ float partial[kWarps][kRows][kGemvFp8MmaTokens];
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 2; ++e)
                partial[warp][16 * m + 8 * h + g][2 * t + e] = acc[m][2 * h + e];
    __syncthreads();
    const int local = threadIdx.x / kGemvFp8MmaTokens, token = threadIdx.x % kGemvFp8MmaTokens;
    if (token >= a.T) return;
    auto sum_of = [&](int r) {
        float v = 0.0f;
#pragma unroll
        for (int q = 0; q < kWarps; ++q)
            v += partial[q][r][token];
        return v;
    };
    float* y = a.g.y + token * a.y_stride;
    if (a.g.glu_rows) {
        const int64_t n = block * (kRows / 2) + local;
        if (local >= kRows / 2 || n >= a.g.N) return;
        float gate = sum_of(local), up = sum_of(local + kRows / 2);
        if (a.g.bias) {
            gate += load_as_f32(a.g.bias, a.g.bias_type, n);
            up += load_as_f32(a.g.bias, a.g.bias_type, n + a.g.glu_rows);
        }
        y[n] = silu(gate) * up;
    } else {
        const int64_t n = block * kRows + local;
        if (n >= a.g.N) return;
        y[n] = sum_of(local) + (a.g.bias ? load_as_f32(a.g.bias, a.g.bias_type, n) : 0.0f);
    }
}

}  // namespace

bool gemv_fp8_mma_fits(const GemvArgs& a, int64_t T, int64_t x_stride) {
    const auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    return a.w_type == ElemType::F8E4M3 && T >= 1 && T <= kGemvFp8MmaTokens && a.K % kChunk == 0 &&
           a.w_stride % 16 == 0 && aligned16(a.w) && aligned16(a.x) && (T == 1 || x_stride % 4 == 0) &&
           a.scales.data != nullptr && a.scales.rows > 0 && a.scales.cols > 0 && a.scales.cols % 16 == 0 &&
           (a.glu_rows == 0 || a.glu_rows == a.N);
}

void launch_gemv_fp8_mma(const GemvArgs& a, int64_t T, int64_t x_stride, int64_t y_stride, cudaStream_t stream) {
    if (a.N == 0 || T == 0) return;
    PAGODA_KERNEL_REQUIRE(gemv_fp8_mma_fits(a, T, x_stride), "fp8 tensor-core GEMV: shape or alignment not taken");
    const int64_t outputs_per_block = a.glu_rows ? kRows / 2 : kRows;
    const int64_t blocks = (a.N + outputs_per_block - 1) / outputs_per_block;
    PAGODA_KERNEL_REQUIRE(blocks <= 0x7fffffff, "fp8 tensor-core GEMV grid too large");
    launch_kernel<gemv_fp8_mma_kernel>(static_cast<unsigned>(blocks), kWarps * 32, 0, stream,
                                       Fp8MmaArgs{a, T, x_stride, y_stride});
    PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::kernels::cuda
