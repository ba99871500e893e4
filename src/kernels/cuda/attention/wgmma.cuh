// Hopper's warpgroup MMA (wgmma.mma_async, sm_90a only) as the prefill attention kernel uses it: bf16 in, fp32
// accumulators, m64nNk16. A warpgroup (4 warps, 128 threads) computes 64 rows; warp w of it holds rows 16w .. 16w + 15
// of the accumulator in the mma.sync m16n8 layout, N / 8 blocks of 4 registers (rows g and g + 8, columns 2c and
// 2c + 1 of each 8 columns; g = lane / 4, c = lane % 4), and gives A from registers in the m16n8k16 A layout. Callable
// only from code compiled for sm_90a (the kernels guard their bodies with __CUDA_ARCH_FEAT_SM90_ALL); nothing else
// calls them, so the other targets' code never holds the instructions.
#pragma once

#include <cstdint>

namespace pagoda::kernels::cuda {

// Orders this thread's register accesses before the wgmma that follows (its accumulators and A fragments written by
// ordinary instructions); needed before the first wgmma of each batch that reads such registers.
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Until at most N committed groups are still in flight: their accumulators and A registers may then be touched.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Shared memory written by ordinary stores or cp.async (the generic proxy) becomes visible to wgmma's reads (the
// async proxy) only through this fence, by each writing thread after its writes landed and before the barrier that
// precedes the wgmma.
__device__ __forceinline__ void fence_proxy_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Named barrier `id` (0 is __syncthreads') completes once `threads` threads (a multiple of 32) have reached it: sync
// waits for that, arrive counts the calling warp without waiting. Orders warpgroups of a block against each other.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// No instruction: tells the compiler the registers change here. Before wgmma_fence, so that every ordinary write of
// an accumulator or A register lands before the fence (not moved past it); after wgmma_wait, so that it neither reads
// an accumulator before the wait nor reuses an A register while the wgmma may still read it (undefined until then).
template <int N>
__device__ __forceinline__ void wgmma_hold(float (&r)[N][4]) {
#pragma unroll
    for (int i = 0; i < N; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
            asm volatile("" : "+f"(r[i][j])::"memory");
}
template <int N>
__device__ __forceinline__ void wgmma_hold(uint32_t (&r)[N][4]) {
#pragma unroll
    for (int i = 0; i < N; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
            asm volatile("" : "+r"(r[i][j])::"memory");
}

// The accumulator operands of one wgmma (d: N / 8 blocks of 4 floats) and their place-holders in the instruction.
#define PAGODA_WGMMA_ACC4(n) "+f"(d[n][0]), "+f"(d[n][1]), "+f"(d[n][2]), "+f"(d[n][3])
#define PAGODA_WGMMA_ACC32(n)                                                                           \
    PAGODA_WGMMA_ACC4(n), PAGODA_WGMMA_ACC4(n + 1), PAGODA_WGMMA_ACC4(n + 2), PAGODA_WGMMA_ACC4(n + 3), \
        PAGODA_WGMMA_ACC4(n + 4), PAGODA_WGMMA_ACC4(n + 5), PAGODA_WGMMA_ACC4(n + 6), PAGODA_WGMMA_ACC4(n + 7)
#define PAGODA_WGMMA_R0_31                                                        \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, " \
    "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define PAGODA_WGMMA_R32_63                                                            \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define PAGODA_WGMMA_R64_127                                                                 \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "       \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "       \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, " \
    "%111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

// d (64 x N) = A (64 x 16, shared memory, K-major) · B (16 x N, shared memory, K-major: N rows of 16 contiguous values)
// + d when `accumulate`, else without d. a and b are matrix descriptors (wgmma_layout.h).
template <int N>
__device__ void wgmma_ss(float (&d)[N / 8][4], uint64_t a, uint64_t b, uint32_t accumulate);

template <>
__device__ __forceinline__ void wgmma_ss<64>(float (&d)[8][4], uint64_t a, uint64_t b, uint32_t accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" PAGODA_WGMMA_R0_31 "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : PAGODA_WGMMA_ACC32(0)
        : "l"(a), "l"(b), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wgmma_ss<128>(float (&d)[16][4], uint64_t a, uint64_t b, uint32_t accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" PAGODA_WGMMA_R0_31 ", " PAGODA_WGMMA_R32_63
        "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : PAGODA_WGMMA_ACC32(0), PAGODA_WGMMA_ACC32(8)
        : "l"(a), "l"(b), "r"(accumulate));
}

// d (64 x N) += A (64 x 16, registers: this thread's 4 bf16 pairs in the m16n8k16 A layout) · B (16 x N, shared
// memory, MN-major: 16 rows of N contiguous values; the transpose-B bit).
template <int N>
__device__ void wgmma_rs_mn(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t b);

template <>
__device__ __forceinline__ void wgmma_rs_mn<64>(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" PAGODA_WGMMA_R0_31
                 "}, {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
                 : PAGODA_WGMMA_ACC32(0)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

template <>
__device__ __forceinline__ void wgmma_rs_mn<128>(float (&d)[16][4], const uint32_t (&a)[4], uint64_t b) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" PAGODA_WGMMA_R0_31 ", " PAGODA_WGMMA_R32_63
                 "}, {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
                 : PAGODA_WGMMA_ACC32(0), PAGODA_WGMMA_ACC32(8)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

template <>
__device__ __forceinline__ void wgmma_rs_mn<256>(float (&d)[32][4], const uint32_t (&a)[4], uint64_t b) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" PAGODA_WGMMA_R0_31 ", " PAGODA_WGMMA_R32_63
                 ", " PAGODA_WGMMA_R64_127 "}, {%128, %129, %130, %131}, %132, 1, 1, 1, 1;\n"
                 : PAGODA_WGMMA_ACC32(0), PAGODA_WGMMA_ACC32(8), PAGODA_WGMMA_ACC32(16), PAGODA_WGMMA_ACC32(24)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

#undef PAGODA_WGMMA_ACC4
#undef PAGODA_WGMMA_ACC32
#undef PAGODA_WGMMA_R0_31
#undef PAGODA_WGMMA_R32_63
#undef PAGODA_WGMMA_R64_127

}  // namespace pagoda::kernels::cuda
