// Qwen3-Next: Gated DeltaNet layers (packed in_proj_qkvz / in_proj_ba) and gated full-attention layers
// (per-head [q | gate] in q_proj, zero-centred QK-norm, partial NeoX RoPE); MoE with a sigmoid-gated shared
// expert; every RMSNorm except the DeltaNet output norm is zero-centred (the decoder picks NormKind from the spec).
// The differences from the other families are the Architecture switches below (arch.h); the MLP or MoE of each
// layer and the weight prefix come from the ModelSpec.
#include "model/arch/arch.h"

namespace pagoda::model {

const Architecture kQwen3NextArchitecture{
    .name = "qwen3_next", .qk_norm = true, .output_gate = true, .delta_net = DeltaNetLayout::kPacked};

}  // namespace pagoda::model
