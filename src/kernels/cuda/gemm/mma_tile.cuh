// What the tensor-core GEMM kernels share (the MoE grouped passes, the weight-only fp8/int GEMM): mma.sync m16n8k16
// with fp32 accumulation, cp.async copies, and one 32-row x 32-column warp tile multiplied out of shared memory.
//
// The block tile both use: 8 warps as 2 x 4 over kBM = 64 rows of A (tokens) and kBN = 128 rows of B (weight rows), a
// K slice of kBK = 32 a stage, shared rows padded to kLd 16-bit values so that a warp's fragment loads hit 32
// different banks. Warp (wm, wn) owns A rows wm·32 .. +32 and B rows wn·32 .. +32; accumulator acc[mt][nt][2·half + c]
// is A row wm·32 + mt·16 + g + 8·half and B row wn·32 + nt·8 + 2·t4 + c (g = lane / 4, t4 = lane % 4).
#pragma once

#include <type_traits>

#include "kernels/cuda/common.cuh"

namespace pagoda::kernels::cuda::mma {

constexpr int kBM = 64, kBN = 128, kBK = 32;
constexpr int kLd = kBK + 8;
constexpr int kThreads = 256;

template <typename W>
__device__ __forceinline__ void mma_16816(float* c, const uint32_t* a, const uint32_t* b) {
    if constexpr (std::is_same_v<W, __nv_bfloat16>) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
}

// 16 bytes global -> shared without a register round trip; `valid` false writes zeros (src is then not read). The
// "memory" clobbers keep the compiler from moving shared-memory reads across the copies and the wait.
__device__ __forceinline__ void cp_async16(void* smem, const void* src, bool valid) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
// 4 bytes global -> shared (a scale; cp.async's .cg takes only 16-byte copies, .ca the smaller ones).
__device__ __forceinline__ void cp_async4(void* smem, const void* src) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ uint32_t lds32(const void* p) {
    return *static_cast<const uint32_t*>(p);
}

// acc += the warp's 32 x 32 tile of As · Bsᵀ over one kBK slice (As [kBM][kLd], Bs [kBN][kLd] of one stage).
template <typename W>
__device__ __forceinline__ void warp_tile_mma(const W (*As)[kLd], const W (*Bs)[kLd], int wm, int wn, int lane,
                                              float (&acc)[2][4][4]) {
    const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int ks = 0; ks < kBK; ks += 16) {
        uint32_t af[2][4], bf[4][2];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
            const int m = wm * 32 + mt * 16 + g;
            af[mt][0] = lds32(&As[m][ks + 2 * t4]);
            af[mt][1] = lds32(&As[m + 8][ks + 2 * t4]);
            af[mt][2] = lds32(&As[m][ks + 2 * t4 + 8]);
            af[mt][3] = lds32(&As[m + 8][ks + 2 * t4 + 8]);
        }
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
            const int nb = wn * 32 + nt * 8 + g;
            bf[nt][0] = lds32(&Bs[nb][ks + 2 * t4]);
            bf[nt][1] = lds32(&Bs[nb][ks + 2 * t4 + 8]);
        }
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
                mma_16816<W>(acc[mt][nt], af[mt], bf[nt]);
    }
}

}  // namespace pagoda::kernels::cuda::mma
