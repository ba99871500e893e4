// The group a weight column falls in (a scale block, a quantisation group): k / width without a 64-bit division in
// the loop over a row. On the GPU a div.s64 is a ~70-instruction subroutine, and the fp8 and int4 GEMVs did one or two
// per 16-byte load (their PTX, session 22: five in each unrolled step of the fp8 GEMV), which kept those bandwidth-
// bound kernels instruction-bound instead. A shift where the width is a power of two (every format's blocks and
// groups: 32, 64, 128; 1 where a tensor-parallel cut falls inside a block), else one 32-bit division (per-channel
// scales: the width is K). k and the width are a row's columns: below 2^31. Host too (quant_slice_test checks it
// against the division).
#pragma once

#include <cstdint>

namespace pagoda::kernels::cuda {

struct ColumnGroups {
    int shift = -1;  // k >> shift where the width is a power of two, else a division
    uint32_t width = 1;
    __host__ __device__ __forceinline__ explicit ColumnGroups(int64_t w) : width(static_cast<uint32_t>(w)) {
        if (w > 0 && (w & (w - 1)) == 0) {
#ifdef __CUDA_ARCH__
            shift = __ffsll(static_cast<long long>(w)) - 1;
#else
            shift = __builtin_ctzll(static_cast<unsigned long long>(w));
#endif
        }
    }
    __host__ __device__ __forceinline__ int64_t of(int64_t k) const {
        return shift >= 0 ? k >> shift : static_cast<int64_t>(static_cast<uint32_t>(k) / width);
    }
};

}  // namespace pagoda::kernels::cuda
