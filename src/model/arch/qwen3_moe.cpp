// Qwen3-MoE: Qwen3 attention; MoE (softmax top-k, optional renormalisation, no shared expert) on the layers that
// decoder_sparse_step / mlp_only_layers select (ModelSpec::layers), a dense SwiGLU on the others.
// The differences from the other families are the Architecture switches below (arch.h); the MLP or MoE of each
// layer and the weight prefix come from the ModelSpec.
#include "model/arch/arch.h"

namespace pagoda::model {

const Architecture kQwen3MoeArchitecture{.name = "qwen3_moe", .qk_norm = true};

}  // namespace pagoda::model
