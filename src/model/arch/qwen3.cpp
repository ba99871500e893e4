// Qwen3 dense: GQA attention with per-head QK RMSNorm (plain x̂·w) before RoPE, explicit head_dim, no bias.
// The differences from the other families are the Architecture switches below (arch.h); the MLP or MoE of each
// layer and the weight prefix come from the ModelSpec.
#include "model/arch/arch.h"

namespace pagoda::model {

const Architecture kQwen3Architecture{.name = "qwen3", .qk_norm = true};

}  // namespace pagoda::model
