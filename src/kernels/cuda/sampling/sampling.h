// CUDA launcher for token sampling: the CPU sampler's algorithm, pass by pass.
#pragma once

#include "kernels/cuda/types.h"
#include "kernels/sampling_rows.h"

namespace pagoda::kernels::cuda {

// One SampledToken per SampleRow (kernels/sampling_rows.h), the CPU sampler's algorithm (engine/sampler.cpp). The
// sampled rows of `logits` are overwritten; edit_raw gets the raw value under each edit (same length as edits).
struct SampleArgs {
    float* logits;  // device, [R, V] with row stride
    int64_t stride, V;
    const SampleRow* rows;  // device, [num_rows]
    int32_t num_rows;
    const LogitEdit* edits;  // device
    const uint32_t* masks;   // device, mask_words per mask row (SampleRow::mask_row); bit t = token t allowed
    int64_t mask_words;
    float* edit_raw;    // device, one per edit
    SampledToken* out;  // device, [num_rows]
};
void launch_sample(const SampleArgs& a, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
