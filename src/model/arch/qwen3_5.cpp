// Qwen3.5 / Qwen3.6 text models (dense and MoE): as Qwen3-Next, with split DeltaNet projections (in_proj_qkv,
// in_proj_z, in_proj_b, in_proj_a), weights under model.language_model.*, fused routed experts
// (experts.gate_up_proj / experts.down_proj) and interleaved M-RoPE, which for text-only positions is exactly the
// partial NeoX RoPE the attention block applies. Vision (model.visual.*) and MTP (mtp.*) tensors are not loaded.
// The differences from the other families are the Architecture switches below (arch.h); the MLP or MoE of each
// layer and the weight prefix come from the ModelSpec.
#include "model/arch/arch.h"

namespace pagoda::model {

const Architecture kQwen3_5Architecture{
    .name = "qwen3_5", .qk_norm = true, .output_gate = true, .delta_net = DeltaNetLayout::kSplit};

}  // namespace pagoda::model
