// Quantized weights (fp8, and int4 as its GEMV reads them) for 1 to kGemvMmaTokens tokens on tensor cores (gemv.h).
// Why, for fp8: the plain fp8 GEMV (gemv.cu) turns each weight into f32 with two conversion instructions, rounds the
// scaled weight to bf16 with a third and multiplies on the CUDA cores, and conversions issue at a fraction of the FMA
// rate: at one token it read Qwen3-8B's fp8 projections at 1.4-2.2 TB/s on an H100 whose copy bandwidth is 2.84
// (qkv 18.0 us, the same as bf16's 19.3 for twice the bytes), and the weight-only mma GEMM that took 2-128 tokens
// read them at a third of that. Measured on that H100 (session 23, pagoda_op_bench --table qwen3-8b, this kernel as
// first written, before it took int4 and was split into ChunkLoads / multiply_chunk with the same mma steps; not
// re-timed since): 2-8 tokens cost what one does here, about
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
// holds both sums of an output) and its W warps (8, or 16: gemv_mma_warps) split K: warp w takes the chunks w, w + W,
// ... (a chunk: 64 bytes of each row, 4 lanes' loads). Lane (g, t)
// (g = lane / 4, t = lane % 4) loads 16 bytes of each of its rows g, g + 8, g + 16, g + 24 at columns chunk + 16 t:
// every load is whole, and a warp's loads of one row are 64 contiguous bytes. The mma's k positions are a
// permutation of those columns (the sum does not care, as long as x is permuted alike): for mma j (0..3) of a chunk,
// lane t's A pairs (k 2t, 2t+1) and (k 2t+8, 2t+9) are its columns 16 t + 4 j + (0, 1) and + (2, 3), and the B pairs
// of token g the same columns of x. The warps' sums meet in shared memory and are added in warp order: the result
// does not depend on timing.
//
// e4m3's NaN bytes (0x7f, 0xff) come out as 480 here, where the dequantised copy has NaN: no checkpoint stores them
// (quantizers saturate at 448).
//
// int4 (round_to F16 or BF16) is the same kernel with 32 weights a 16-byte load (128-column chunks): each word's
// eight values become four bf16 pairs exactly as the int4 GEMV and the dequantised copy compute them
// (dequantize_word_pairs: pair i = values i and i + 4 of the word), and x is paired alike. Today int4 weights for 2 or
// more tokens are dequantised whole into bf16 scratch for cuBLASLt on every call (~9x the bytes of the packed weight
// for a few tokens); this path takes 2-8 tokens (PAGODA_INT4_GEMV_MMA, linear.cpp: 2-3x the copy path on an H100).
//
// Both formats also have f16 products (F16Products): the weights as exact f16 values without their scale (one
// conversion a pair for e4m3 on sm_89 and later, three integer instructions for int4: f16_weights.cuh), x as f16,
// and each chunk's f32 sums times the chunk's scale. Fewer instructions a weight, and no rounding of q · s; taken
// where the op bench found them faster (f16_products: fp8 at one token, int4 with f16 scales). Why not everywhere is
// not understood yet: fp8 at 8 tokens lost 8-18% with them (an ncu comparison of the two is the next step).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <type_traits>

#include <cooperative_groups.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm/column_groups.cuh"
#include "kernels/cuda/gemm/f16_weights.cuh"
#include "kernels/cuda/gemm/gemv.h"
#include "kernels/cuda/gemm/int4_dequant.cuh"
#include "kernels/cuda/gemm/mma_tile.cuh"
#include "kernels/cuda/gemm/ring_stages.h"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kRows = 32;        // weight rows a block takes
constexpr int kChunkBytes = 64;  // bytes of a row a warp takes per step: 4 lanes x 16

// What the kernel takes, whatever the weights' format.
struct MmaGemvArgs {
    const float* x;
    int64_t x_stride;
    float* y;
    int64_t y_stride;
    int64_t T, N, K;
    const void* bias;
    ElemType bias_type;
    int64_t glu_rows;
    const uint8_t* w;
    int64_t row_bytes;
    WeightScales scales;        // fp8
    const float* group_scales;  // int4: [N, K / group_size]
    const float* group_zeros;   // int4: the same, or null (symmetric: 8)
    int64_t group_size;
    // > 0: the tokens' x staged in shared memory as the products' pairs (stage_x), this many 32-bit words a token.
    int64_t x_shared_stride;
};

__device__ __forceinline__ uint32_t bf16_pair(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
}

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

// bf16(q · s) of bytes (lo_byte, lo_byte + 1) of w, as one bf16 pair.
template <int kLoByte>
__device__ __forceinline__ uint32_t dequantized_pair(uint32_t w, float s) {
    return bf16_pair(e4m3_scaled_down<kLoByte>(w) * 0x1p120f * s, e4m3_scaled_down<kLoByte + 1>(w) * 0x1p120f * s);
}

// x's pair for the bf16 products: x rounded to bf16, as the cuBLASLt path takes it.
struct Bf16Products {
    using Mma = __nv_bfloat16;
    static constexpr bool kScaleAfter = false;
    __device__ static uint32_t x_pair(float lo, float hi) { return bf16_pair(lo, hi); }
};

// The f16 products (PAGODA_GEMV_MMA_F16): weights as exact f16 values (f16_weights.cuh), x as the f16 of x · 2^-8
// (the scaling keeps activations up to 2^8 · 65,504 finite; below 2^-6 they keep f16's subnormal steps of 2^-16,
// where bf16 keeps 8 bits of any size), f32 sums of the exact products, and each chunk's sums times the chunk's scale
// (Params::s, which also undoes the 2^-8) before they join the row's: a chunk lies in one scale block or group (the
// launcher checks). The weights are then never rounded: the result is the exact product's f32 sum, not the bf16
// copy's (fp32 against the CPU's dequantised weights, within the bf16 tolerance the op harness holds both paths to).
struct F16Products {
    using Mma = __half;
    static constexpr bool kScaleAfter = true;
    static constexpr float kXScale = 0x1p-8f;
    __device__ static uint32_t x_pair(float lo, float hi) {
        const __half2 v = __floats2half2_rn(lo * kXScale, hi * kXScale);
        return *reinterpret_cast<const uint32_t*>(&v);
    }
};

// A format: kPerLoad weights a 16-byte load, kPairs pairs a 32-bit word of it (pair i of word w holding the load's
// values lo(kPairs w + i) and hi(...)); Row (a weight row's scales, found once), Columns (what maps a column to its
// scale), Params (one load's scale, and zero point), decode_word, and the products (Bf16Products: the weight pairs
// bf16(q · s); F16Products: exact f16 weights, scaled after each chunk).
// kAluE4m3 (with kF16; PAGODA_GEMV_MMA_E4M3=alu, an experiment not yet run on a GPU): the integer route to the f16
// weights (e4m3_pair_f16_scaled: four integer instructions a pair) where the GPU has its conversion. Why: the f16
// products lost 8-18% to the bf16 ones at 8 tokens though they take a third fewer instructions, and the conversion's
// issue rate is the first suspect.
template <bool kF16, bool kAluE4m3 = false>
struct Fp8 : std::conditional_t<kF16, F16Products, Bf16Products> {
    static_assert(kF16 || !kAluE4m3);
    static constexpr int kPerLoad = 16, kPairs = 2;
    static constexpr bool kRingByDefault = kF16;  // ring_stages: one token (the f16 products') was measured
    static constexpr __host__ __device__ int lo(int p) { return 2 * p; }
    static constexpr __host__ __device__ int hi(int p) { return 2 * p + 1; }
    struct Row {
        const float* scales;
        __device__ Row(const MmaGemvArgs& a, int64_t n)
            : scales(a.scales.data + ColumnGroups(a.scales.rows).of(n) * a.scales.stride) {}
    };
    struct Columns {
        ColumnGroups cols;
        __device__ explicit Columns(const MmaGemvArgs& a) : cols(a.scales.cols) {}
    };
    struct Params {
        float s = 0.0f;
    };
    // The column groups (the kernel finds a chunk's group by a shift: gemv_mma_kernel).
    __device__ static const ColumnGroups& groups(const Columns& c) { return c.cols; }
    // What a chunk's Params come from (kRawParams floats of the row's column group `group`: raw_param) and how
    // (from_raw): the scale.
    static constexpr int kRawParams = 1;
    __device__ static const float* raw_param(const Row& r, int64_t group, int) { return r.scales + group; }
    __device__ static Params from_raw(const float (&raw)[kRawParams]) {
        constexpr float kUnscale = kAluE4m3 ? 0x1p8f : kE4m3PairUnscale;        // what undoes the weight pairs' scaling
        if constexpr (kF16) return {raw[0] * kUnscale / F16Products::kXScale};  // exact: powers of two
        return {raw[0]};
    }
    __device__ static void decode_word(uint32_t w, const Params& p, const Columns&, uint32_t (&pairs)[kPairs]) {
        if constexpr (kAluE4m3) {
            pairs[0] = e4m3_pair_f16_scaled<0>(w), pairs[1] = e4m3_pair_f16_scaled<1>(w);
        } else if constexpr (kF16) {
            pairs[0] = e4m3_pair_f16<0>(w), pairs[1] = e4m3_pair_f16<1>(w);
        } else {
            pairs[0] = dequantized_pair<0>(w, p.s), pairs[1] = dequantized_pair<2>(w, p.s);
        }
    }
};

// int4 with the bf16 products (Int4F16 below keeps its rows and columns with the f16 ones). kBf16: the format's
// scales are bf16 (else f16), which decides how a word is dequantised (int4_dequant.cuh).
template <bool kBf16, class Products = Bf16Products>
struct Int4 : Products {
    static constexpr int kPerLoad = 32, kPairs = 4;
    static constexpr bool kRingByDefault = false;  // ring_stages
    static constexpr __host__ __device__ int lo(int p) { return 8 * (p / 4) + p % 4; }
    static constexpr __host__ __device__ int hi(int p) { return lo(p) + 4; }
    struct Row {
        const float* scales;
        const float* zeros;
        __device__ Row(const MmaGemvArgs& a, int64_t n)
            : scales(a.group_scales + n * (a.K / a.group_size)),
              zeros(a.group_zeros ? a.group_zeros + n * (a.K / a.group_size) : nullptr) {}
    };
    struct Columns {
        ColumnGroups groups;
        __device__ explicit Columns(const MmaGemvArgs& a) : groups(a.group_size) {}
    };
    struct Params {
        float s = 0.0f, z = 0.0f;
    };
    __device__ static const ColumnGroups& groups(const Columns& c) { return c.groups; }
    // The group's scale and zero point (a symmetric format has none: its callers take kNoZeroPoint instead).
    static constexpr int kRawParams = 2;
    __device__ static const float* raw_param(const Row& r, int64_t g, int i) {
        return (i == 0 ? r.scales : r.zeros) + g;
    }
    __device__ static Params from_raw(const float (&raw)[kRawParams]) { return {raw[0], raw[1]}; }
    __device__ static void decode_word(uint32_t w, const Params& p, const Columns&, uint32_t (&pairs)[kPairs]) {
        // Exact: a whole zero point below 1024, and scales that are values of the format's f16 or bf16 (int4.cu).
        __nv_bfloat162 pr[kPairs];
        dequantize_word_pairs<4>(w, PackedGroup<4, kBf16>(p.s, p.z), pr);
#pragma unroll
        for (int j = 0; j < kPairs; ++j)
            pairs[j] = *reinterpret_cast<const uint32_t*>(&pr[j]);
    }
};

// int4 with the f16 products: the values minus the zero point exactly, the scale (f16 or bf16 alike: an f32 here)
// after the chunk, whose 128 columns lie in one group.
struct Int4F16 : Int4<false, F16Products> {
    struct Params {
        float s = 0.0f;
        __half2 zero1024, zero64;  // int4_pairs_f16's
    };
    __device__ static Params from_raw(const float (&raw)[kRawParams]) {
        return {raw[0] / F16Products::kXScale, int4_zero_f16(raw[1]), int4_zero64_f16(raw[1])};
    }
    __device__ static void decode_word(uint32_t w, const Params& p, const Columns&, uint32_t (&pairs)[kPairs]) {
        int4_pairs_f16(w, p.zero1024, p.zero64, pairs);
    }
};

// The four weight rows of lane g (tile m, half h: local row 16 m + 8 h + g) in the weight; -1 where past the rows.
__device__ __forceinline__ int64_t weight_row(const MmaGemvArgs& a, int64_t block, int local) {
    if (a.glu_rows) {  // tile 0: gate rows, tile 1: the same outputs' up rows
        const int64_t n = block * (kRows / 2) + (local & 15);
        return n < a.N ? n + (local >= 16 ? a.glu_rows : 0) : -1;
    }
    const int64_t n = block * kRows + local;
    return n < a.N ? n : -1;
}

// Weight row n of the lane's row r (0..3) in row tile `block`, or row 0 past the rows (loaded, never stored).
__device__ __forceinline__ int64_t lane_row(const MmaGemvArgs& a, int64_t block, int g, int r) {
    const int64_t n = weight_row(a, block, 8 * r + g);
    return n >= 0 ? n : 0;
}

// Lane (g, t)'s rows: pointers at its 16 bytes of each, and their scales.
template <class F>
struct LaneRows {
    const uint8_t* w[4];
    typename F::Row rows[4];
    __device__ __forceinline__ LaneRows(const MmaGemvArgs& a, int64_t block, int g, int t)
        : w{a.w + lane_row(a, block, g, 0) * a.row_bytes + 16 * t,
            a.w + lane_row(a, block, g, 1) * a.row_bytes + 16 * t,
            a.w + lane_row(a, block, g, 2) * a.row_bytes + 16 * t,
            a.w + lane_row(a, block, g, 3) * a.row_bytes + 16 * t},
          rows{{a, lane_row(a, block, g, 0)},
               {a, lane_row(a, block, g, 1)},
               {a, lane_row(a, block, g, 2)},
               {a, lane_row(a, block, g, 3)}} {}
};

// Asks L2 for the warp's first chunk (`chunk`) of each of the lane's rows in row tile `block`. Issued before the
// prologue: weights are written by no kernel, so they stream in while the kernel before this one finishes.
template <class F>
__device__ __forceinline__ void prefetch_first_loads(const MmaGemvArgs& a, int64_t block, int64_t chunk, int lane) {
    if (chunk >= a.K / (4 * F::kPerLoad)) return;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const uint8_t* p = a.w + lane_row(a, block, lane >> 2, r) * a.row_bytes + 16 * (lane & 3);
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p + chunk * kChunkBytes));
    }
}

// 16 bytes of weights through the read-only path, where the source puts the load: an `asm volatile` keeps its place
// among the mma steps (also volatile), which the kernel's overlap of loads and multiplies depends on (ptxas may move an
// __ldg).
__device__ __forceinline__ uint4 load_weights16(const uint8_t* p) {
    uint4 v;
    asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

// Where a warp's next chunk is (chunk, chunk + stride, ... in turn): the lane's four rows' pointers, and its first
// column (k), whose group has the chunk's scales.
template <class F>
struct ChunkCursor {
    const uint8_t* w[4];
    int64_t k;
    int64_t stride;
    int group_shift;  // < 0: one group covers K (group_shift_fits)
    __device__ ChunkCursor(const LaneRows<F>& rows, const typename F::Columns& cols, int64_t chunk, int64_t stride,
                           int t)
        : w{rows.w[0] + chunk * kChunkBytes, rows.w[1] + chunk * kChunkBytes, rows.w[2] + chunk * kChunkBytes,
            rows.w[3] + chunk * kChunkBytes},
          k(chunk * 4 * F::kPerLoad + F::kPerLoad * t),
          stride(stride),
          group_shift(F::groups(cols).shift) {}
    __device__ int64_t group() const { return group_shift >= 0 ? k >> group_shift : 0; }
    __device__ void advance() {
#pragma unroll
        for (int r = 0; r < 4; ++r)
            w[r] += stride * kChunkBytes;
        k += stride * 4 * F::kPerLoad;
    }
};

// A raw parameter the format does not have (a symmetric int4's zero point): 8.
inline constexpr float kNoZeroPoint = 8.0f;

// One chunk's loads of a lane: 16 bytes of each of its four rows and their scales as loaded (raw), which become the
// chunk's Params (F::from_raw) only when it is multiplied (multiply_chunk). Why not at the load: the register double
// buffer loads a chunk before it multiplies the one before, and an arithmetic use of the scales right after their
// loads makes the warp wait for them there, a whole memory latency every chunk before the previous chunk's products.
// So it was until session 46: in the 90a SASS of int4's loop (Int4F16, kEither) the FADDs and F2FPs of from_raw
// followed the scale and zero-point LDGs within ~20 instructions and came before the previous chunk's first HMMA,
// and ncu (session 43) had found the double buffer stalled on its loads' scoreboard (3.6-5.4 cycles an issued
// instruction for int4). Kept raw, the loads are first used one chunk later, as the weights are. Int4F16 also keeps
// two floats a row where its Params take three registers.
template <class F>
struct ChunkLoads {
    uint4 v[4];
    float raw[4][F::kRawParams];
    // The chunk at `at`: its four rows' loads, and the scales of its column group (has_zeros: the format's zero points;
    // without, kNoZeroPoint).
    __device__ __forceinline__ void load(const ChunkCursor<F>& at, const typename F::Row (&rows)[4], bool has_zeros) {
        const int64_t group = at.group();
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            v[r] = load_weights16(at.w[r]);
#pragma unroll
            for (int i = 0; i < F::kRawParams; ++i)
                raw[r][i] = i == 0 || has_zeros ? __ldg(F::raw_param(rows[r], group, i)) : kNoZeroPoint;
        }
    }
};

// The chunks a warp has in flight in shared memory (kStages > 0: gemv_mma_kernel's ring). Stage s of warp w holds,
// for each of the lane's rows r, its 16 bytes of weights (words [s][w][r][lane]: a warp's read of one row's is 512
// contiguous bytes, no bank conflicts) and the row's raw params for the chunk. Each lane copies (cp.async) and later
// reads only its own slots, so the lane's own wait_group is all the ordering it needs: no barrier among the warps.
template <class F, int kWarps, int kStages>
struct ChunkRing {
    static constexpr int kStageBytes = 32 * 4 * (16 + 4 * F::kRawParams);  // one warp's stage
    static constexpr int kBytes = kStages * kWarps * kStageBytes;
    uint8_t* base;  // this warp's stage 0
    __device__ ChunkRing(uint8_t* ring, int warp) : base(ring + warp * kStageBytes) {}
    __device__ uint4* weights(int stage, int r, int lane) const {
        return reinterpret_cast<uint4*>(base + stage * kWarps * kStageBytes) + 32 * r + lane;
    }
    __device__ float* raw(int stage, int r, int i, int lane) const {
        return reinterpret_cast<float*>(base + stage * kWarps * kStageBytes + 32 * 4 * 16) + 32 * (4 * i + r) + lane;
    }
    // Copies the chunk at `at` and its column group's params into `stage`, as one group of copies.
    __device__ __forceinline__ void copy(int stage, const ChunkCursor<F>& at, const typename F::Row (&rows)[4],
                                         bool has_zeros, int lane) const {
        const int64_t group = at.group();
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            mma::cp_async16(weights(stage, r, lane), at.w[r], true);
#pragma unroll
            for (int i = 0; i < F::kRawParams; ++i)
                if (i == 0 || has_zeros) mma::cp_async4(raw(stage, r, i, lane), F::raw_param(rows[r], group, i));
        }
        mma::cp_async_commit();
    }
    // The chunk in `stage` (its copies landed: cp_async_wait), as ChunkLoads.
    __device__ __forceinline__ void read(int stage, bool has_zeros, int lane, ChunkLoads<F>& out) const {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            out.v[r] = *weights(stage, r, lane);
#pragma unroll
            for (int i = 0; i < F::kRawParams; ++i)
                out.raw[r][i] = i == 0 || has_zeros ? *this->raw(stage, r, i, lane) : kNoZeroPoint;
        }
    }
};

// The kernel's dynamic shared memory: its ring (kStages > 0), then x staged (stage_x).
__device__ __forceinline__ uint8_t* gemv_shared() {
    extern __shared__ __align__(16) uint8_t dynamic_shared[];
    return dynamic_shared;
}

// The warp's first chunks (first_chunk, + stride, ...), before the kernel's prologue: weights and their scales are
// written by no kernel, so they stream in while the kernel before this one finishes. With a ring its first kStages
// chunks are copied into it (empty groups past the warp's last chunk: the loop's waits count kStages groups behind);
// without, the first chunk is asked of L2.
template <class F, int kWarps, int kStages>
__device__ __forceinline__ void prefetch_chunks(const MmaGemvArgs& a, int64_t block, int64_t first_chunk,
                                                int64_t stride, int lane) {
    if constexpr (kStages == 0) {
        prefetch_first_loads<F>(a, block, first_chunk, lane);
    } else {
        const LaneRows<F> rows(a, block, lane >> 2, lane & 3);
        ChunkCursor<F> next(rows, typename F::Columns(a), first_chunk, stride, lane & 3);
        const ChunkRing<F, kWarps, kStages> ring(gemv_shared(), static_cast<int>(threadIdx.x >> 5));
        const int64_t chunks = a.K / (4 * F::kPerLoad);
#pragma unroll
        for (int s = 0; s < kStages; ++s) {
            if (first_chunk + s * stride < chunks) {
                ring.copy(s, next, rows.rows, a.group_zeros != nullptr, lane);
                next.advance();
            } else {
                mma::cp_async_commit();
            }
        }
    }
}

// x staged (where x_shared_stride below says): each block first stages the tokens' x in shared memory as the pairs the
// products take (F::x_pair of columns L + lo(p) and L + hi(p) at word L / 2 + p, for a load of kPerLoad columns from
// L), so that the loop reads a word's pairs with one shared load where it otherwise loads x from global memory (L1 or
// L2) and converts it for every chunk, just before its products need it: the suspect in the kernel's low issue rate
// (session 29: a third fewer instructions gained 4-5%). The block's loads of its first chunk are issued before.
template <class F>
__device__ __forceinline__ void stage_x(const MmaGemvArgs& a, uint32_t* xs) {
    constexpr int kLoadPairs = F::kPerLoad / 2;
    const int pairs = static_cast<int>(a.K / 2);
    for (int token = 0; token < static_cast<int>(a.T); ++token) {
        const float* row = a.x + token * a.x_stride;
        uint32_t* out = xs + token * a.x_shared_stride;
        for (int q = static_cast<int>(threadIdx.x); q < pairs; q += static_cast<int>(blockDim.x)) {
            const int L = q / kLoadPairs * F::kPerLoad, p = q % kLoadPairs;
            out[q] = F::x_pair(row[L + F::lo(p)], row[L + F::hi(p)]);
        }
    }
}

// Where a kernel's products read x: staged in shared memory (stage_x) or from global memory, or either as the launch
// says (x_shared_stride), for the register double buffer's kernels. A kernel of one source holds no instructions of
// the other: the loop issues a predicated-off instruction all the same (the ring's int4 loop had ~56 a chunk of the
// global path where x was staged).
enum class XSource { kEither, kGlobal, kStaged };

// acc += chunk c's products with token g's x (x: the token's row at this lane's columns; token 0's where the lane has
// no token: gemv_mma_kernel), paired as the weights are, over both m16 tiles, a 32-bit word of weights at a time (each
// tile's mma steps in the same order as a loop over tiles outside the words would take them). With F::kScaleAfter the
// chunk's products are summed apart and join acc times their row's scale. xs: the lane's token's staged pairs at its
// columns (stage_x), or null (x from global memory).
template <class F, XSource kX>
__device__ __forceinline__ void multiply_chunk(const ChunkLoads<F>& in, const typename F::Columns& cols, const float* x,
                                               const uint32_t* xs, int64_t c, float (&acc)[2][4]) {
    constexpr int kPerWord = F::kPerLoad / 4;  // a word's values, and the columns of x they take
    typename F::Params p[4];                   // the rows' scales (ChunkLoads: made here, not at the load)
#pragma unroll
    for (int r = 0; r < 4; ++r)
        p[r] = F::from_raw(in.raw[r]);
    float chunk[2][4] = {};
    float(&sums)[2][4] = *(F::kScaleAfter ? &chunk : &acc);
#pragma unroll
    for (int w = 0; w < 4; ++w) {
        uint32_t b[F::kPairs];  // token g's x at word w's columns, paired as its weights are
        if (kX == XSource::kStaged || (kX == XSource::kEither && xs != nullptr)) {
            const uint32_t* src = xs + c * 2 * F::kPerLoad + F::kPairs * w;  // 8- or 16-byte aligned (stage_x's rows)
            if constexpr (F::kPairs == 4) {
                const uint4 v = *reinterpret_cast<const uint4*>(src);
                b[0] = v.x, b[1] = v.y, b[2] = v.z, b[3] = v.w;
            } else {
                static_assert(F::kPairs == 2);
                const uint2 v = *reinterpret_cast<const uint2*>(src);
                b[0] = v.x, b[1] = v.y;
            }
        } else {
            float4 x4[kPerWord / 4];
#pragma unroll
            for (int q = 0; q < kPerWord / 4; ++q)
                x4[q] = __ldg(reinterpret_cast<const float4*>(x + c * 4 * F::kPerLoad + kPerWord * w + 4 * q));
            const float* xv = reinterpret_cast<const float*>(x4);
#pragma unroll
            for (int i = 0; i < F::kPairs; ++i)
                b[i] =
                    F::x_pair(xv[F::lo(F::kPairs * w + i) - kPerWord * w], xv[F::hi(F::kPairs * w + i) - kPerWord * w]);
        }
#pragma unroll
        for (int m = 0; m < 2; ++m) {
            uint32_t lo[F::kPairs], hi[F::kPairs];  // rows 16 m + g and 16 m + g + 8
            F::decode_word(reinterpret_cast<const uint32_t*>(&in.v[2 * m])[w], p[2 * m], cols, lo);
            F::decode_word(reinterpret_cast<const uint32_t*>(&in.v[2 * m + 1])[w], p[2 * m + 1], cols, hi);
#pragma unroll
            for (int i = 0; i < F::kPairs; i += 2) {
                const uint32_t af[4] = {lo[i], hi[i], lo[i + 1], hi[i + 1]};
                const uint32_t bf[2] = {b[i], b[i + 1]};
                mma::mma_16816<typename F::Mma>(sums[m], af, bf);
            }
        }
    }
    if constexpr (F::kScaleAfter) {
        // acc[m][2 h + e] is local row 16 m + 8 h + g, whose loads (and scale) are in.v / p [2 m + h].
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
            for (int q = 0; q < 4; ++q)
                acc[m][q] += chunk[m][q] * p[2 * m + q / 2].s;
    }
}

// Row tile `block`'s outputs from its rows' sums: sum_of(r) is local row r's sum for `token` (the thread's pair of
// local row and token; threads past the tile's outputs or the tokens store nothing).
template <class SumOf>
__device__ __forceinline__ void store_outputs(const MmaGemvArgs& a, int64_t block, int local, int token,
                                              SumOf&& sum_of) {
    if (token >= a.T || local >= kRows) return;
    float* y = a.y + token * a.y_stride;
    if (a.glu_rows) {
        const int64_t n = block * (kRows / 2) + local;
        if (local >= kRows / 2 || n >= a.N) return;
        float gate = sum_of(local), up = sum_of(local + kRows / 2);
        if (a.bias) {
            gate += load_as_f32(a.bias, a.bias_type, n);
            up += load_as_f32(a.bias, a.bias_type, n + a.glu_rows);
        }
        y[n] = silu(gate) * up;
    } else {
        const int64_t n = block * kRows + local;
        if (n >= a.N) return;
        y[n] = sum_of(local) + (a.bias ? load_as_f32(a.bias, a.bias_type, n) : 0.0f);
    }
}

// kStages 0 (the register double buffer): each chunk's loads are issued before the previous chunk is multiplied, so a
// warp always has a chunk in flight (9-17% faster for fp8 at 2-8 tokens on an H100 than loading two chunks and then
// multiplying both, session 24). That is one chunk (2 KB a warp) ahead, and ncu found it too little (session 43, one
// token, H100): warps stalled on the loads' scoreboard 6.6 cycles an issued instruction for fp8 gate/up (DRAM at 65%
// of its peak), 3.6-5.4 for int4 (32-44%). kStages 2 or 4 (fp8's default at one token, ring_stages: as deep as the
// device's shared memory holds with two blocks an SM, ring_stages.h): a ring of kStages chunks a warp in shared
// memory, filled by cp.async without registers, the first kStages before the kernel's prologue (the weights stream in
// while the kernel before finishes; at N = 4,096 a warp has 4 or 8 chunks in all), each stage refilled kStages chunks
// ahead once it is multiplied: up to kStages chunks a warp in flight, and the registers of one chunk where the double
// buffer holds two.
//
// kWarps warps split K (gemv_mma_warps, gemv.h): 8, two blocks an SM at up to 128 registers a thread, or 16, one
// block of twice the warps. kSplit > 1 (sm_90: split_for below) splits K further over a cluster of kSplit blocks that
// take the same row tile: block r of the cluster takes the chunks r·kWarps + w, + kSplit·kWarps, ... (warp w), so that
// a grid of few row tiles (N = 4,096: 128 tiles for 132 SMs of two blocks each) or a ragged last wave (6,144 rows: 192
// tiles) still fills the GPU. Every sum is added in a fixed order (a block's warps in warp order, then the cluster's
// blocks in rank order, read by block 0 from their shared memory): the result depends on kWarps and kSplit (chosen
// from N, K and the GPU, never from T), not on timing.
//
// The loop around the loads, products and sums is lean: ncu on an H100 (session 40, one token, caches flushed) found
// the kernel issue-bound: the fp8 gate/up GEMV (24,576 x 4,096) executed 20.0 M warp instructions, as many as the bf16
// GEMV's 20.8 M for half the bytes, ~400 a warp's chunk where its loads, conversions and eight mma steps are ~70, with
// 4 warps a scheduler (108-128 registers) each waiting ~8 cycles between instructions (DRAM at 51% of its peak for
// fp8 gate/up, 30-45% for the other fp8 and int4 shapes). Its SASS spent the chunk (a) recomputing the four rows'
// addresses from the thread index, (b) working out the scale's column group four times, each with the predicated
// 32-bit division of ColumnGroups::of issuing whether taken or not, and (c) in each of the four words, branching on
// the lane's token: at one token lanes 0-3 read x and the others took zeros, and the warp ran both sides. So the loop
// (a) advances four pointers by the warp's stride, (b) finds the group once a chunk by a shift (gemv_*_mma_fits take
// only groups whose width is a power of two or covers K: every format's blocks and groups, and per-channel scales),
// and (c) has every lane multiply x, token 0's where the lane has no token (those columns of the mma are never
// stored, so the tokens' sums do not change). Its fp8 loop has 431 SASS instructions a pair of chunks where the one
// before had 796, int4's 1,014 where it had 1,319. Measured on an H100 (session 41, 9ee1014's binaries with this loop
// as PAGODA_GEMV_MMA_LEAN=1, pagoda_op_bench --table qwen3-8b --cold, one token, µs, before / lean, two rounds
// alike): fp8 qkv 17.9 / 14.4, o 13.0 / 11.4, gate_up 49.7 / 44.5, down 29.9 / 26.2; AWQ int4 gate_up 41.1 / 34.9,
// down 24.5 / 22.4, 12,288 x 4,096 25.9 / 22.0; batch-1 decode of the Qwen3-8B shape fp8 202.0 -> 223.6 tok/s, AWQ
// 236.2 -> 249.9.
template <class F, int kWarps, int kSplit, int kStages, XSource kX>
__global__ void __launch_bounds__(kWarps * 32, 16 / kWarps) gemv_mma_kernel(MmaGemvArgs a) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int64_t block = blockIdx.x / kSplit;  // the row tile; the block's rank in its cluster is blockIdx.x % kSplit
    const int64_t first_chunk = int64_t(blockIdx.x % kSplit) * kWarps + warp, stride = int64_t(kSplit) * kWarps;
    prefetch_chunks<F, kWarps, kStages>(a, block, first_chunk, stride, lane);
    PAGODA_KERNEL_PROLOGUE();
    const LaneRows<F> rows(a, block, g, t);
    const typename F::Columns cols(a);
    const int64_t chunks = a.K / (4 * F::kPerLoad);
    int64_t c = first_chunk;
    // The next chunk to load or copy: with a ring, the one after those prefetch_chunks copied.
    ChunkCursor<F> next(rows, cols, c + kStages * stride, stride, t);
    const ChunkRing<F, kWarps, kStages> ring(gemv_shared(), warp);
    // The lanes of B's columns past the tokens (g >= T) multiply token 0's x: their sums are never stored (an mma's
    // output columns are independent), so the tokens' bits are those of zeros there.
    const bool own_token = g < a.T;
    const bool has_zeros = a.group_zeros != nullptr;  // int4's zero points (else kNoZeroPoint)
    const float* x = a.x + (own_token ? g : 0) * a.x_stride + F::kPerLoad * t;

    float acc[2][4] = {};
    ChunkLoads<F> first, second;  // kStages 0: chunks c and c + stride of the warp's; else `first` alone
    auto load_next = [&](ChunkLoads<F>& into) {
        into.load(next, rows.rows, has_zeros);
        next.advance();
    };
    if constexpr (kStages == 0)
        if (c < chunks) load_next(first);
    uint32_t* const x_shared = reinterpret_cast<uint32_t*>(gemv_shared() + decltype(ring)::kBytes);
    const uint32_t* xs = nullptr;
    if (kX == XSource::kStaged || (kX == XSource::kEither && a.x_shared_stride > 0)) {  // the same for the whole block
        stage_x<F>(a, x_shared);
        __syncthreads();
        xs = x_shared + (own_token ? g : 0) * a.x_shared_stride + F::kPerLoad / 2 * t;
    }
    if constexpr (kStages > 0) {
        for (int stage = 0; c < chunks; c += stride) {
            mma::cp_async_wait<kStages - 1>();  // this lane's copies of chunk c have landed
            ring.read(stage, has_zeros, lane, first);
            multiply_chunk<F, kX>(first, cols, x, xs, c, acc);
            // The stage is free again (its words are in registers, which the products above have taken): the chunk
            // kStages ahead goes into it.
            if (c + kStages * stride < chunks) {
                ring.copy(stage, next, rows.rows, has_zeros, lane);
                next.advance();
            } else {
                mma::cp_async_commit();
            }
            stage = stage + 1 == kStages ? 0 : stage + 1;
        }
        mma::cp_async_wait<0>();  // only empty groups are left; waited for all the same, so no copy outlives the loop
    } else {
        for (; c < chunks; c += 2 * stride) {
            const int64_t c2 = c + stride;
            if (c2 < chunks) load_next(second);
            multiply_chunk<F, kX>(first, cols, x, xs, c, acc);
            if (c2 >= chunks) break;  // the same for the whole warp
            if (c2 + stride < chunks) load_next(first);
            multiply_chunk<F, kX>(second, cols, x, xs, c2, acc);
        }
    }

    // acc[m][2 h + e] is local row 16 m + 8 h + g, token 2 t + e.
    __shared__ float partial[kWarps][kRows][kGemvMmaTokens];
    static_assert(kWarps != 8 || sizeof(partial) == kGemvPartialBytes, "ring_stages.h counts this array");
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 2; ++e)
                partial[warp][16 * m + 8 * h + g][2 * t + e] = acc[m][2 * h + e];
    __syncthreads();
    // Thread (local, token) of the first kRows x 8 sums local row `local`'s warps for `token`.
    const int local = threadIdx.x / kGemvMmaTokens, token = threadIdx.x % kGemvMmaTokens;
    auto block_sum = [&](int r) {
        float s = 0.0f;
#pragma unroll
        for (int q = 0; q < kWarps; ++q)
            s += partial[q][r][token];
        return s;
    };
    if constexpr (kSplit == 1) {
        store_outputs(a, block, local, token, block_sum);
    } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        // The block's sums, for block 0 of the cluster to read; every thread of every block reaches both cluster
        // barriers (the second keeps this shared memory alive until block 0 has read it).
        __shared__ float sums[kRows][kGemvMmaTokens];
        static_assert(sizeof(sums) == kGemvClusterSumBytes, "ring_stages.h counts this array");
        if (local < kRows) sums[local][token] = block_sum(local);
        namespace cg = cooperative_groups;
        const cg::cluster_group cluster = cg::this_cluster();
        cluster.sync();
        if (cluster.block_rank() == 0) {
            store_outputs(a, block, local, token, [&](int r) {
                float s = 0.0f;
#pragma unroll
                for (int q = 0; q < kSplit; ++q)
                    s += cluster.map_shared_rank(&sums[0][0], q)[r * kGemvMmaTokens + token];
                return s;
            });
        }
        cluster.sync();
#else
        __trap();  // launched with clusters only where the kernel's binary is sm_90 or newer (launch below)
#endif
    }
}

// Kernel's ring bytes (0 without one), after letting it take them beside the most x may take (kGemvMostXBytes).
template <auto Kernel, class F, int kWarps, int kStages>
size_t allow_ring() {
    const size_t ring_bytes = kStages > 0 ? ChunkRing<F, kWarps, kStages>::kBytes : 0;
    if (ring_bytes > 0) allow_dynamic_smem<Kernel>(static_cast<int>(ring_bytes + kGemvMostXBytes));
    return ring_bytes;
}

template <class F, int kWarps, int kSplit, int kStages, XSource kX>
void launch_shape(const MmaGemvArgs& a, unsigned tiles, cudaStream_t stream) {
    constexpr auto kernel = gemv_mma_kernel<F, kWarps, kSplit, kStages, kX>;
    const size_t ring_bytes = allow_ring<kernel, F, kWarps, kStages>();
    const size_t x_bytes = static_cast<size_t>(a.T * a.x_shared_stride) * sizeof(uint32_t);
    launch_kernel_cluster<kernel>(tiles * kSplit, kWarps * 32, ring_bytes + x_bytes, stream, kSplit, a);
}

// Whether x is staged in shared memory (stage_x): PAGODA_GEMV_MMA_X_SHARED=1 wherever it fits, =0 nowhere; by default
// for one token and 12,288 rows or more. Measured on an H100 (session 30, pagoda_op_bench --cold, one token, µs off /
// on, two rounds alike): fp8 gate_up 24,576 x 4,096 53.6 / 48.9, its silu·mul form 52.2 / 49.8, int4 12,288 x 4,096
// 28.8 / 25.8, int4 gate_up 24,576 41.4 / 40.9; but fewer rows lose (int4 4,096 x 4,096 10.9 / 13.2, 6,144 x 4,096
// 14.4 / 15.5, down 4,096 x 12,288 24.3 / 29.7; fp8 o 13.0 / 14.6, down 29.8 / 33.7): the staging delays every
// block's first products, and only where a block has many rows to take does it pay back. Several tokens: not measured.
int64_t x_shared_stride(int64_t T, int64_t N, int64_t K) {
    static const int setting = [] {
        const char* env = std::getenv("PAGODA_GEMV_MMA_X_SHARED");
        return env == nullptr ? -1 : std::strcmp(env, "1") == 0 ? 1 : 0;
    }();
    // A row of K / 2 words and 4 more, so that the tokens' rows start on other banks (and stay 16-byte aligned: K is
    // a multiple of 64 here).
    const int64_t stride = K / 2 + 4;
    const bool on = setting == 1 || (setting < 0 && T == 1 && N >= 12288);
    return on && T * stride * int64_t(sizeof(uint32_t)) <= kGemvMostXBytes ? stride : 0;
}

// The x source of the kernel whose attributes split_for asks for a ring of kStages (a ring's two sources' kernels
// take the same shared memory, registers within a few, and clusters alike).
template <int kStages>
inline constexpr XSource kAskedX = kStages == 0 ? XSource::kEither : XSource::kStaged;

// The cluster size for a grid of `tiles` row tiles over `chunks` chunks: PAGODA_GEMV_MMA_SPLIT=N (1, 2 or 4) as it
// says; by default the largest of 4, 2, 1 whose blocks (split · tiles) all fit the GPU's resident blocks at once, while
// every warp keeps a chunk. Measured on an H100 (session 28, pagoda_op_bench --cold at one token, 264 resident blocks):
// 128 tiles took 10.7 µs split over 2 against 12.8 in one block (int4 4,096 x 4,096; fp8 o 11.8 against 14.4; down
// 4,096 x 12,288: int4 22.2 against 30.8, fp8 27.2 against 38.5), 32 tiles 7.3 over 4 against 11.8; but 192 tiles
// over 4 (three waves) 26.3 against 14.1 in one block, and 384 over 2 28.9 against 27.8. Clusters need the kernel's
// binary to be sm_90 or newer (elsewhere: 1).
template <class F, int kStages>
int split_for(int64_t tiles, int64_t chunks) {
    static const int setting = [] {
        const char* env = std::getenv("PAGODA_GEMV_MMA_SPLIT");
        const int n = env != nullptr ? std::atoi(env) : 0;
        return n == 1 || n == 2 || n == 4 ? n : 0;
    }();
    if (setting == 1 || !cluster_launch_allowed<gemv_mma_kernel<F, 8, 2, kStages, kAskedX<kStages>>>()) return 1;
    if (setting > 1) return chunks >= int64_t(setting) * 8 ? setting : 1;
    // The GPU's resident blocks (with the ring's shared memory), asked once (a process drives one kind of GPU).
    static const int64_t resident = [] {
        constexpr auto kernel = gemv_mma_kernel<F, 8, 1, kStages, kAskedX<kStages>>;
        return int64_t{resident_blocks<kernel>(8 * 32, allow_ring<kernel, F, 8, kStages>())};
    }();
    for (int split : {4, 2})
        if (chunks >= int64_t(split) * 8 && tiles * split <= resident) return split;
    return 1;
}

// The 8-warp kernel's chunks in flight: by default the ring of gemv_ring_stages' depth (4 on Hopper, 2 on an A100,
// none on sm_86 / sm_89) for the formats whose kRingByDefault says so (fp8 with the f16 products, i.e. one token),
// else 0 (int4, and fp8 at 2-8 tokens: not measured with the ring): the register double buffer. Measured on an H100
// (session 44, Qwen3-8B shape, batch-1 decode replayed in CUDA graphs, one run each): fp8 227.9 -> 251.3 tok/s with the
// ring, AWQ int4 254.0 -> 210.1. Alone with cold caches (pagoda_op_bench --cold, µs) the ring lost for both: fp8
// gate_up 43.3 -> 48.1, qkv 14.2 -> 15.1, down 25.8 -> 25.7; int4 gate_up 33.4 -> 46.0, down 22.1 -> 26.6. So fp8's
// gain in the model lies in what the op bench cannot show, presumably the first four chunks a warp copies before its
// PDL wait while the kernel before it finishes; int4's ring loop is slower in itself (neither profiled).
// PAGODA_GEMV_MMA_STAGES=auto: the ring for every format; =2 or =4: that many where a block of them fits (with every x
// it may stage), else as auto; any other value (0): the double buffer for every format.
template <class F>
int ring_stages() {
    static const int stages = [] {
        constexpr int kStageBytes = ChunkRing<F, 8, 1>::kBytes;
        const int most = max_block_smem();
        const char* env = std::getenv("PAGODA_GEMV_MMA_STAGES");
        if (env == nullptr) return F::kRingByDefault ? gemv_ring_stages(kStageBytes, most) : 0;
        const std::string_view asked(env);
        if ((asked == "2" || asked == "4") &&
            (asked[0] - '0') * kStageBytes + kGemvStaticBytes + kGemvMostXBytes <= most)
            return asked[0] - '0';
        if (asked != "auto" && asked != "2" && asked != "4") return 0;  // "0", and anything it does not know
        return gemv_ring_stages(kStageBytes, most);
    }();
    return stages;
}

template <class F, int kStages, XSource kX>
void launch_split(const MmaGemvArgs& a, unsigned grid, int split, cudaStream_t stream) {
    switch (split) {
        case 4:
            launch_shape<F, 8, 4, kStages, kX>(a, grid, stream);
            break;
        case 2:
            launch_shape<F, 8, 2, kStages, kX>(a, grid, stream);
            break;
        default:
            launch_shape<F, 8, 1, kStages, kX>(a, grid, stream);
    }
}

// The ring's kernels, of the launch's x source: staged where x_shared_stride says, unless that would leave one block
// an SM beside the ring (int4's 96 KB ring with x of K > 4,480 on Hopper): then from global memory, as the ring's
// loads in flight matter more than x's conversion.
template <class F, int kStages>
void launch_ring(const MmaGemvArgs& a, unsigned grid, int64_t tiles, cudaStream_t stream) {
    const int split = split_for<F, kStages>(tiles, a.K / (4 * F::kPerLoad));
    const int x_bytes = static_cast<int>(a.T * a.x_shared_stride * int64_t(sizeof(uint32_t)));
    const int static_bytes = kGemvPartialBytes + (split > 1 ? kGemvClusterSumBytes : 0);  // the kernel's own arrays
    if (a.x_shared_stride > 0 &&
        gemv_ring_keeps_two_blocks(ChunkRing<F, 8, kStages>::kBytes + static_bytes, x_bytes, max_block_smem())) {
        launch_split<F, kStages, XSource::kStaged>(a, grid, split, stream);
    } else {
        MmaGemvArgs global = a;
        global.x_shared_stride = 0;
        launch_split<F, kStages, XSource::kGlobal>(global, grid, split, stream);
    }
}

// PAGODA_GEMV_MMA_ONE_X=1: the register double buffer's kernels of one x source each (kStaged where x_shared_stride
// stages x, else kGlobal), as the ring's are, where by default one kernel takes either (kEither). Why: in int4's
// kEither loop (Int4F16, cuobjdump of the 90a build, session 45) the global path, which q/k/v, o and down take,
// rebuilds x's address from the thread index for every word (an S2R and ~14 integer instructions: the compiler
// rematerialises it). SASS of a pair of chunks, kEither / kGlobal / kStaged: Int4F16 814 / 670 / 561 (kGlobal
// reloads three spilled values a chunk from local memory: ptxas at the 128-register bound), fp8 at one token (f16
// products) 399 / 298 / 260, at 2-8 tokens 942 / 878 / 876. Not yet run on a GPU: bench/gpu/plans/checks-after-45.plan
// checks it against the CPU and times it.
bool double_buffer_one_x_source() {
    static const bool on = [] {
        const char* env = std::getenv("PAGODA_GEMV_MMA_ONE_X");
        return env != nullptr && std::strcmp(env, "1") == 0;
    }();
    return on;
}

template <class F>
void launch_warps(const MmaGemvArgs& a, unsigned grid, int64_t tiles, cudaStream_t stream) {
    if (gemv_mma_warps() == 16) {
        launch_shape<F, 16, 1, 0, XSource::kEither>(a, grid, stream);
        return;
    }
    switch (ring_stages<F>()) {
        case 4:
            launch_ring<F, 4>(a, grid, tiles, stream);
            break;
        case 2:
            launch_ring<F, 2>(a, grid, tiles, stream);
            break;
        default: {
            const int split = split_for<F, 0>(tiles, a.K / (4 * F::kPerLoad));
            if (!double_buffer_one_x_source())
                launch_split<F, 0, XSource::kEither>(a, grid, split, stream);
            else if (a.x_shared_stride > 0)
                launch_split<F, 0, XSource::kStaged>(a, grid, split, stream);
            else
                launch_split<F, 0, XSource::kGlobal>(a, grid, split, stream);
        }
    }
}

template <class F>
void launch(MmaGemvArgs a, cudaStream_t stream) {
    a.x_shared_stride = x_shared_stride(a.T, a.glu_rows ? 2 * a.N : a.N, a.K);
    const int64_t outputs_per_block = a.glu_rows ? kRows / 2 : kRows;
    const int64_t tiles = (a.N + outputs_per_block - 1) / outputs_per_block;
    PAGODA_KERNEL_REQUIRE(tiles * 4 <= 0x7fffffff, "tensor-core GEMV grid too large");
    const auto grid = static_cast<unsigned>(tiles);
    launch_warps<F>(a, grid, tiles, stream);
    PAGODA_CUDA_CHECK_LAUNCH();
}

// What both formats' launchers fill alike: the tokens' x and y rows, the sizes, the bias and the weight's rows.
MmaGemvArgs token_args(const float* x, int64_t x_stride, float* y, int64_t y_stride, int64_t T, int64_t N, int64_t K,
                       const void* bias, ElemType bias_type, const void* w, int64_t row_bytes) {
    MmaGemvArgs m{};
    m.x = x, m.x_stride = x_stride, m.y = y, m.y_stride = y_stride, m.T = T, m.N = N, m.K = K;
    m.bias = bias, m.bias_type = bias_type;
    m.w = static_cast<const uint8_t*>(w), m.row_bytes = row_bytes;
    return m;
}

// Whether a launch takes the f16 products (F16Products; the launchers also check that every chunk lies in one scale
// block or group). PAGODA_GEMV_MMA_F16=1: always, 0: never; by default where they were measured faster on an H100
// (session 29, pagoda_op_bench --table qwen3-8b --cold, µs, bf16 products / f16): int4 with f16 scales (AWQ) at one
// token q/k/v 14.1 / 13.2, gate_up 40.4 / 37.6, down 22.2 / 22.0, at 8 tokens 15.8 / 15.2, 48.0 / 46.3, 25.7 / 26.0;
// fp8 at one token (against its plain GEMV, which one token took before) q/k/v 17.9 / 16.2, gate_up + SiLU·mul 53.8
// / 48.3, down 29.5 / 28.2, o 11.6 / 12.1. Not taken: fp8 at 2-8 tokens (o 12.6 / 13.6, gate_up 52.9 / 58.2, down
// 28.9 / 34.0 at 8 tokens) and int4 with bf16 scales, whose bf16 route is already four instructions a pair (q/k/v
// 12.6 / 12.7, down 20.2 / 21.4 at one token). Batch-1 decode of the Qwen3-8B shape: AWQ 217.7 -> 226.4 tok/s, fp8
// 190.5 -> 200.4.
bool f16_products(bool fp8, bool f16_scales, int64_t T) {
    static const int setting = [] {
        const char* env = std::getenv("PAGODA_GEMV_MMA_F16");
        return env == nullptr ? -1 : std::strcmp(env, "1") == 0 ? 1 : std::strcmp(env, "0") == 0 ? 0 : -1;
    }();
    if (setting >= 0) return setting == 1;
    return fp8 ? T == 1 : f16_scales;
}

// Column groups (scale blocks, quantisation groups) whose chunk the kernel finds by a shift: a width that is a power of
// two, or one group covering K (per-channel scales). Others (none of the formats' own) take the other GEMVs.
bool group_shift_fits(int64_t width, int64_t K) {
    return width > 0 && ((width & (width - 1)) == 0 || width >= K);
}

// 1 to kGemvMmaTokens tokens whose rows take 16-byte loads.
bool tokens_fit(const float* x, int64_t T, int64_t x_stride) {
    return T >= 1 && T <= kGemvMmaTokens && aligned(x, 16) && (T == 1 || x_stride % 4 == 0);
}

}  // namespace

int gemv_mma_warps() {
    static const int warps = [] {
        const char* env = std::getenv("PAGODA_GEMV_MMA_WARPS");
        return env != nullptr && std::strcmp(env, "16") == 0 ? 16 : 8;
    }();
    return warps;
}

bool gemv_fp8_mma_fits(const GemvArgs& a, int64_t T, int64_t x_stride) {
    return a.w_type == ElemType::F8E4M3 && tokens_fit(a.x, T, x_stride) && a.K % (4 * Fp8<false>::kPerLoad) == 0 &&
           a.w_stride % 16 == 0 && aligned(a.w, 16) && a.scales.data != nullptr && a.scales.rows > 0 &&
           a.scales.cols % 16 == 0 && group_shift_fits(a.scales.cols, a.K) && (a.glu_rows == 0 || a.glu_rows == a.N);
}

void launch_gemv_fp8_mma(const GemvArgs& a, int64_t T, int64_t x_stride, int64_t y_stride, cudaStream_t stream) {
    if (a.N == 0 || T == 0) return;
    PAGODA_KERNEL_REQUIRE(gemv_fp8_mma_fits(a, T, x_stride), "fp8 tensor-core GEMV: shape or alignment not taken");
    MmaGemvArgs m = token_args(a.x, x_stride, a.y, y_stride, T, a.N, a.K, a.bias, a.bias_type, a.w, a.w_stride);
    m.glu_rows = a.glu_rows, m.scales = a.scales;
    // A chunk (4 * kPerLoad columns from a multiple of them) in one scale block: block widths that are multiples.
    static const bool alu = [] {
        const char* env = std::getenv("PAGODA_GEMV_MMA_E4M3");
        return env != nullptr && std::strcmp(env, "alu") == 0;
    }();
    if (f16_products(/*fp8=*/true, false, T) && a.scales.cols % (4 * Fp8<true>::kPerLoad) == 0)
        alu ? launch<Fp8<true, true>>(m, stream) : launch<Fp8<true>>(m, stream);
    else
        launch<Fp8<false>>(m, stream);
}

bool gemv_int4_mma_fits(const GemvInt4Args& a, int64_t T, int64_t x_stride) {
    return a.w.bits == 4 && (a.w.round_to == ElemType::F16 || a.w.round_to == ElemType::BF16) &&
           tokens_fit(a.x, T, x_stride) && a.K % (4 * Int4<false>::kPerLoad) == 0 &&
           group_shift_fits(a.w.group_size, a.K) && a.w.group_size % Int4<false>::kPerLoad == 0 &&
           a.K % a.w.group_size == 0 && a.w.row_bytes % 16 == 0 && a.w.data != nullptr && aligned(a.w.data, 16) &&
           a.w.scales != nullptr && (a.glu_rows == 0 || a.glu_rows == a.N);
}

void launch_gemv_int4_mma(const GemvInt4Args& a, int64_t T, int64_t x_stride, int64_t y_stride, cudaStream_t stream) {
    if (a.N == 0 || T == 0) return;
    PAGODA_KERNEL_REQUIRE(gemv_int4_mma_fits(a, T, x_stride), "int4 tensor-core GEMV: shape or alignment not taken");
    MmaGemvArgs m = token_args(a.x, x_stride, a.y, y_stride, T, a.N, a.K, a.bias, a.bias_type, a.w.data, a.w.row_bytes);
    m.group_scales = a.w.scales, m.group_zeros = a.w.zeros, m.group_size = a.w.group_size, m.glu_rows = a.glu_rows;
    if (f16_products(/*fp8=*/false, a.w.round_to == ElemType::F16, T) && a.w.group_size % (4 * Int4F16::kPerLoad) == 0)
        launch<Int4F16>(m, stream);
    else if (a.w.round_to == ElemType::BF16)
        launch<Int4<true>>(m, stream);
    else
        launch<Int4<false>>(m, stream);
}

}  // namespace pagoda::kernels::cuda
