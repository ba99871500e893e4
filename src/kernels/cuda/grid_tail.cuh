// A grid's tail: work that needs every block's output (a norm over the whole row, the router's top-k), done by the
// last block to finish instead of by a kernel after it, whose boundary is a grid-wide wait. Whether that is faster at
// batch 1 is measured in docs/benchmarks.md (session 31: the first form was slower).
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/norm/norm.h"

namespace pagoda::kernels::cuda {

// Blocks count themselves in kTailGroups group counters (block b in group b % kTailGroups), and the last block of each
// group in one top counter (kTailCounterWords words in all, norm.h): same-address atomics serialise in L2, and the
// first form, one counter for every block of a 512-2,048-block grid, made its kernels several microseconds longer
// (docs/benchmarks.md, session 32).

// True in every thread of the last block of the grid to call it, once every other block's earlier global stores are
// visible to it (read them with __ldcg: this SM's L1 may hold lines from before them). counter: kTailCounterWords
// device words, zero before the launch; the last block must call rearm_grid_tail once its tail has read everything
// it needs (the next kernel to use them starts after this one ends). Every thread of every block calls it.
__device__ __forceinline__ bool last_block_of_grid(unsigned* counter) {
    __shared__ bool last;
    // The block's stores happen before thread 0's fence (the barrier), which orders them, cumulatively, before its
    // count: one fence a block (the first form fenced in every thread, and its GEMVs ran slower). A group's last block
    // has seen its group's counts (and so their stores) before its fence and its count on the top counter.
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned blocks = gridDim.x * gridDim.y * gridDim.z;
        const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
        const unsigned groups = blocks < kTailGroups ? blocks : kTailGroups, group = b % groups;
        const unsigned in_group = blocks / groups + (group < blocks % groups ? 1u : 0u);
        __threadfence();
        last = false;
        if (atomicAdd(counter + 1 + group, 1u) == in_group - 1) {
            __threadfence();
            last = atomicAdd(counter, 1u) == groups - 1;
            if (last) __threadfence();
        }
    }
    __syncthreads();
    return last;
}

__device__ __forceinline__ void rearm_grid_tail(unsigned* counter) {
    if (threadIdx.x < kTailCounterWords) counter[threadIdx.x] = 0u;
}

}  // namespace pagoda::kernels::cuda
