// Qwen2 / Qwen2.5: GQA attention with q/k/v bias, SwiGLU MLP, plain RMSNorm, tied or untied embeddings.
// The differences from the other families are the Architecture switches below (arch.h); the MLP or MoE of each
// layer and the weight prefix come from the ModelSpec.
#include "model/arch/arch.h"

namespace pagoda::model {

const Architecture kQwen2Architecture{.name = "qwen2", .always_qkv_bias = true};

}  // namespace pagoda::model
