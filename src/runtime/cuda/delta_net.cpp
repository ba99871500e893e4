// CudaOps' Gated DeltaNet ops: not on CUDA yet (Model::load refuses linear-attention models on a GPU).
#include "runtime/cuda/cuda_ops.h"

namespace pagoda {

void CudaOps::causal_conv1d_silu(const Tensor&, const Tensor&, const Tensor&, const ForwardBatch&, const Tensor&) {
    not_yet("causal_conv1d_silu");
}

void CudaOps::gdn_gating(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
    not_yet("gdn_gating");
}

void CudaOps::l2_norm(const Tensor&, float) {
    not_yet("l2_norm");
}

void CudaOps::gated_delta_rule(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                               const ForwardBatch&, float, const Tensor&, DeltaRuleMode) {
    not_yet("gated_delta_rule");
}

void CudaOps::gated_rms_norm(const Tensor&, const Tensor&, const Tensor&, float, const Tensor&) {
    not_yet("gated_rms_norm");
}

}  // namespace pagoda
