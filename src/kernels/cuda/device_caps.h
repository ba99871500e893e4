// What the kernels may use on the GPU at hand; it decides among a kernel's variants (the tile sizes that fit). One
// build runs on sm_80 (A100), sm_86 / sm_89 (A10, L40S, RTX 4090) and sm_90 (H100, H200): the parts differ in the
// shared memory a block may take, so the kernels ask rather than assume Hopper's.
#pragma once

namespace pagoda::kernels::cuda {

// Bytes of shared memory one block may opt into on the current device (cudaDevAttrMaxSharedMemoryPerBlockOptin:
// 227 KB on Hopper, 163 KB on an A100, 99 KB on sm_86 / sm_89 parts). PAGODA_CUDA_KERNELS=sm80 or sm86 caps it at an
// A100's or an sm_86 part's, so that the variants those GPUs get can be run and tested on a Hopper GPU.
int max_block_smem();

// The least any supported GPU lets a block take (sm_86 / sm_89): a kernel variant within it runs everywhere.
inline constexpr int kLeastBlockSmem = 99 * 1024;

// The PAGODA_CUDA_KERNELS value in force ("sm80" or "sm86"), or null when the kernels choose for the real device.
const char* forced_kernel_family();

// The architecture the kernels' code that runs on the current device was compiled for (major * 10 + minor;
// code_version in common.cuh): 90 for the sm_90a code on a Hopper GPU, 80 for sm_80 code or for the compute_80 PTX
// the driver JIT-compiles (CUDA_FORCE_PTX_JIT=1, or a GPU the build has no code for).
int loaded_code_version();
// Whether launch_kernel overlaps each kernel with the one before it (programmatic dependent launch) on the current
// device: code for sm_90 or newer, unless PAGODA_CUDA_PDL=0.
bool pdl_in_use();

}  // namespace pagoda::kernels::cuda
