// How many chunks a warp of the tensor-core GEMV keeps in flight in its shared-memory ring (gemv_mma.cu, with
// PAGODA_GEMV_MMA_STAGES=auto), from the shared memory a block may take on the device: plain arithmetic, no CUDA, so a
// host test (tests/unit/kernels/ring_stages_test.cpp) holds it to the numbers of each GPU family.
#pragma once

namespace pagoda::kernels::cuda {

// What a block of the GEMV takes beside its ring: the warps' partial sums (8 KB) and the cluster's (1 KB), and x
// staged for one token of K = 4,096 (8 KB, the models' usual hidden size); and the most x may take (stage_x: one
// token up to K = 16,376, two up to 8,184; with the warps' partial sums within the 48 KB a block has without asking).
inline constexpr int kGemvPartialBytes = 8 * 1024, kGemvClusterSumBytes = 1024;
inline constexpr int kGemvStaticBytes = kGemvPartialBytes + kGemvClusterSumBytes;
inline constexpr int kGemvBesideRing = kGemvStaticBytes + 8 * 1024;
inline constexpr int kGemvMostXBytes = 32 * 1024;

// The larger of 4 and 2 stages of `stage_bytes` (one stage of every warp of a block) with which (a) two blocks
// still fit an SM (an SM holds the opt-in maximum of a block plus the 1 KB the system keeps for each block), so the
// ring does not halve the warps that issue the loop, and (b) one block fits whatever x it stages; 0 (the register
// double buffer) where even two stages do not (three would be one more kernel of each format to build, for fp8 on an
// A100 alone). On an H100 or H200 (227 KB a block) both formats take 4, on an A100 (163 KB) 2, on sm_86 / sm_89 parts
// (99 KB) neither.
constexpr int gemv_ring_stages(int stage_bytes, int max_block_smem) {
    const int per_sm = max_block_smem + 1024;
    for (int stages = 4; stages >= 2; stages -= 2) {
        const int ring = stages * stage_bytes;
        if (2 * (ring + kGemvBesideRing + 1024) <= per_sm &&
            ring + kGemvStaticBytes + kGemvMostXBytes <= max_block_smem)
            return stages;
    }
    return 0;
}

// Whether two blocks of `block_bytes` (a ring and the kernel's own arrays) still fit an SM with `x_bytes` of x staged
// beside each (gemv_ring_stages counts 8 KB, one token of K = 4,096; a launch knows its own): else the launch reads x
// from global memory instead.
constexpr bool gemv_ring_keeps_two_blocks(int block_bytes, int x_bytes, int max_block_smem) {
    return 2 * (block_bytes + x_bytes + 1024) <= max_block_smem + 1024;
}

}  // namespace pagoda::kernels::cuda
