// Quantizing dense weights on the host when a model loads (`--quantization fp8` on a bf16 checkpoint, as vLLM does):
// the CPU kernel behind a LinearWeight-level call, so the model layer need not know the kernels.
#pragma once

#include "runtime/linear_weight.h"
#include "tensor/tensor.h"

namespace pagoda {

// Per-channel e4m3 of a dense host weight [N, K] (any float dtype) into `data` (F8_E4M3 [N, K], contiguous) and
// `scales` (F32 [N]), which the caller owns: scale[n] = max(amax(row n) / 448, 1e-12), q = e4m3(w / scale) rounded to
// nearest even. Returns the fp8 weight over them, with `dense`'s bias. A contiguous stack of experts [E, N, K] the
// same, row by row, into data [E, N, K] and scales [E, N].
LinearWeight quantize_fp8_per_channel(const LinearWeight& dense, const Tensor& data, const Tensor& scales);

}  // namespace pagoda
