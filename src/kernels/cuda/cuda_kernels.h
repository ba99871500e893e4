// CUDA launchers for the Ops of a dense model: one plain function per op taking an args struct and a stream.
// No allocation inside; workspaces are passed in. Activations are F32 [T, N] (or [T, H, D]) with a contiguous last
// dimension and any outer strides, as the Ops contract (runtime/ops.h) says; weights and KV caches may be BF16/F16.
// Every launcher checks its launch and aborts with file:line on a CUDA error (a broken invariant, not user input).
// This header gathers the families' headers (attention/, gemm/, norm/, elementwise/, sampling/, delta_net/, moe/ ...).
#pragma once

#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/delta_net/delta_net.h"
#include "kernels/cuda/device_caps.h"
#include "kernels/cuda/elementwise/elementwise.h"
#include "kernels/cuda/gemm/fp8_activations.h"
#include "kernels/cuda/gemm/gemv.h"
#include "kernels/cuda/gemm/wo_mma.h"
#include "kernels/cuda/lora/lora.h"
#include "kernels/cuda/moe/moe.h"
#include "kernels/cuda/norm/norm.h"
#include "kernels/cuda/sampling/sampling.h"
#include "kernels/cuda/types.h"
