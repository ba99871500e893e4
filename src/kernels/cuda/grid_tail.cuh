// A grid's tail: work that needs every block's output (a norm over the whole row, the router's top-k), done by the
// last block to finish instead of by a kernel after it, whose boundary is a grid-wide wait. Whether that is faster at
// batch 1 is measured in docs/benchmarks.md (session 31: the first form was slower).
#pragma once

#include <cuda_runtime.h>

namespace pagoda::kernels::cuda {

// True in every thread of the last block of the grid to call it, once every other block's earlier global stores are
// visible to it (read them with __ldcg: this SM's L1 may hold lines from before them). counter is a device word that
// is zero before the launch; the last block must call rearm_grid_tail once its tail has read everything it needs
// (the next kernel to use the counter starts after this one ends). Every thread of every block calls it.
__device__ __forceinline__ bool last_block_of_grid(unsigned* counter) {
    __shared__ bool last;
    // The block's stores happen before thread 0's fence (the barrier), which orders them, cumulatively, before its
    // count: one fence a block (the first form fenced in every thread, and its GEMVs ran slower).
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(counter, 1u) == gridDim.x * gridDim.y * gridDim.z - 1;
        if (last) __threadfence();
    }
    __syncthreads();
    return last;
}

__device__ __forceinline__ void rearm_grid_tail(unsigned* counter) {
    if (threadIdx.x == 0) *counter = 0u;
}

}  // namespace pagoda::kernels::cuda
