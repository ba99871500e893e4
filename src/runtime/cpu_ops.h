// The CPU implementation of Ops (fp32 activations, bf16/f16/f32 weights), over kernels/cpu.
#pragma once

#include <memory>

#include "runtime/ops.h"

namespace pagoda {

std::unique_ptr<Ops> make_cpu_ops();

}  // namespace pagoda
