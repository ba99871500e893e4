// CudaOps' mixture-of-experts ops: not on CUDA yet (Model::load refuses MoE models on a GPU).
#include "runtime/cuda/cuda_ops.h"

namespace pagoda {

void CudaOps::moe_topk_softmax(const Tensor&, bool, const Tensor&, const Tensor&) {
    not_yet("moe_topk_softmax");
}

void CudaOps::moe_experts(const Tensor&, const Tensor&, const Tensor&, const MoeExpertWeights&, const Tensor&) {
    not_yet("moe_experts");
}

}  // namespace pagoda
