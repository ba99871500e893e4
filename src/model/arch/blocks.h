// The building blocks every Qwen family is made of, written once against Ops: attention (plain, with QK-norm,
// with an output gate), the SwiGLU MLP, the mixture of experts (with an optional gated shared expert) and the
// Gated DeltaNet. Each block has a weights struct, one visit_weights function declaring its tensors (checkpoint name
// under a prefix, shape, tensor-parallel role: weight_visitor.h) and a forward. The family files (qwen2.cpp ...
// qwen3_5.cpp) only choose which blocks a layer has and how its tensors are named.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/model_spec.h"
#include "model/weight_visitor.h"
#include "model/weights.h"
#include "runtime/forward_batch.h"
#include "runtime/linear_weight.h"
#include "runtime/ops.h"
#include "tensor/buffer.h"
#include "tensor/tensor.h"

namespace pagoda::model {

// Scratch memory for one forward pass: tensors are carved from one buffer and released by rewinding.
class Arena {
  public:
    void reserve(Allocator& allocator, size_t bytes);
    Tensor take(DType dtype, const Shape& shape);
    Tensor f32(int64_t rows, int64_t cols) { return take(DType::F32, Shape{rows, cols}); }
    size_t mark() const { return used_; }
    void rewind(size_t mark) { used_ = mark; }
    size_t capacity() const { return buffer_.size(); }
    // How often reserve() moved the buffer (a recorded CUDA graph that points into it is stale once this changes).
    uint64_t reallocations() const { return reallocations_; }

  private:
    Buffer buffer_;
    size_t used_ = 0;
    uint64_t reallocations_ = 0;
};

// --- Attention ------------------------------------------------------------------------------------------------------
struct AttentionWeights {
    LinearWeight q, k, v, o;  // q: [nq*hd*(gated ? 2 : 1), H]; q/k/v carry an F32 bias on qwen2
    Tensor q_norm, k_norm;    // [hd] F32 (QK-norm), else undefined
    // q, k and v as one [q rows + 2 kv rows, H] view (and their biases as one), when they lie back to back in
    // memory: one projection launch instead of three. Set by fuse_projections; undefined otherwise.
    LinearWeight qkv;
};

struct AttentionOptions {
    bool bias = false;
    bool qk_norm = false;
    bool output_gate = false;  // q_proj holds [q | gate] per head (Qwen3-Next, Qwen3.5)
};

// q, k, v, o, then the q/k/v biases (options.bias), then the QK-norms (options.qk_norm): the order in which
// Model::upload_weights places them, so q/k/v (and their biases) lie back to back for fuse_projections.
Status visit_weights(AttentionWeights& w, const ModelSpec& spec, const AttentionOptions& options,
                     const std::string& prefix, const WeightVisitor& visit);
// out [T, H]. rope: the model's frequencies (model/rope.h). cache: this layer's paged caches (and fp8 scales).
void attention_forward(Ops& ops, const ModelSpec& spec, const AttentionWeights& w, const Tensor& x,
                       const ForwardBatch& batch, const RopeTable& rope, const KvCacheLayer& cache, Arena& arena,
                       const Tensor& out);
size_t attention_scratch_floats(const ModelSpec& spec);  // per token

// --- SwiGLU MLP -----------------------------------------------------------------------------------------------------
struct MlpWeights {
    LinearWeight gate, up, down;  // [I, H], [I, H], [H, I]
    LinearWeight gate_up;         // gate and up as one [2I, H] view when back to back in memory (fuse_projections)
};
// gate, up, down. `unit` is what tensor parallelism splits the intermediate features by: SplitUnit::kMlp for the
// dense MLP, kSharedExpertMlp for the shared expert.
Status visit_weights(MlpWeights& w, int64_t hidden, int64_t intermediate, SplitUnit unit, const std::string& prefix,
                     const WeightVisitor& visit);
void mlp_forward(Ops& ops, const MlpWeights& w, const Tensor& x, Arena& arena, const Tensor& out);

// The tensors as one view concatenated along dimension 0, when each starts where the previous one ends and all
// agree in dtype, device and trailing shape (contiguous); an undefined Tensor otherwise. Model::upload_weights
// places q/k/v and gate/up back to back on the device, so these views cost no copy.
Tensor rows_back_to_back(std::initializer_list<const Tensor*> parts);
Tensor rows_back_to_back(std::span<const Tensor* const> parts);
// Sets qkv and gate_up where rows_back_to_back allows (all of q/k/v and their biases, if any, must be, and the
// formats must be the same dense one, or fp8 with block or channel scales over the same blocks whose scale grids are
// back to back too: Model::upload_weights places every weight's data first and the scales after them).
void fuse_projections(AttentionWeights& w);
void fuse_projections(MlpWeights& w);

// --- Mixture of experts ---------------------------------------------------------------------------------------------
struct MoeWeights {
    LinearWeight router;  // [E, H]
    // The routed experts stacked: expert e's gate is rows [0, I) of gate_up[e], its up rows [I, 2I).
    LinearWeight gate_up;  // [E, 2I, H]
    LinearWeight down;     // [E, H, I]
    bool has_shared = false;
    MlpWeights shared;         // shared expert
    LinearWeight shared_gate;  // [1, H]
    // The checkpoint stores one tensor per expert (experts.{e}.gate_proj.weight ...), stacked at load (Qwen3-MoE,
    // Qwen3-Next); otherwise it stores them fused as experts.gate_up_proj / experts.down_proj (Qwen3.5-MoE).
    bool per_expert_checkpoint = false;
    // The stacks of a per-expert checkpoint hold only this rank's experts (expert parallelism: the loader stacked them
    // so), so tensor parallelism does not cut them again.
    bool stacked_for_rank = false;
    // Expert parallelism: the stacks hold experts [first_expert, first_expert + gate_up's dim 0) of the model's
    // spec.num_experts (shard_weights sets it); the router still scores them all.
    int64_t first_expert = 0;
};
// router, the stacked experts, then the shared expert and its gate (spec.shared_expert_intermediate_size > 0).
Status visit_weights(MoeWeights& w, const ModelSpec& spec, const std::string& prefix, const WeightVisitor& visit);
// What the walk cannot read by name: checks the config's expert dimensions and, for a per-expert checkpoint, stacks
// the experts once into owned [E, 2I, H] and [E, H, I] buffers (the fused layout's views need no copy).
Status prepare_moe(const ModelSpec& spec, WeightLoader& loader, const std::string& prefix, MoeWeights& out);
void moe_forward(Ops& ops, const ModelSpec& spec, const MoeWeights& w, const Tensor& x, Arena& arena,
                 const Tensor& out);
size_t moe_scratch_floats(const ModelSpec& spec);

// --- Gated DeltaNet -------------------------------------------------------------------------------------------------
struct DeltaNetWeights {
    LinearWeight qkv;   // [2*Kd + Vd, H]   rows: q (head-major) | k | v
    LinearWeight z;     // [Vd, H]
    LinearWeight b, a;  // [Hv, H]
    Tensor conv;        // [2*Kd + Vd, K] F32
    Tensor a_log;       // [Hv] F32
    Tensor dt_bias;     // [Hv] F32
    Tensor norm;        // [dv] F32 (plain gated RMSNorm)
    LinearWeight out;   // [H, Vd]
    // qkv, z, b and a as one [C + Vd + 2 Hv, H] view when back to back in memory (fuse_projections): one launch
    // instead of four, and the two small b/a GEMVs ride along with the big ones. Undefined otherwise.
    LinearWeight in_proj;
};
// Sets in_proj where rows_back_to_back allows (qkv, z, b, a in that order).
void fuse_projections(DeltaNetWeights& w);
// How a family's checkpoint stores the Gated DeltaNet input projections.
enum class DeltaNetLayout : uint8_t {
    kNone,    // no linear-attention layers
    kPacked,  // Qwen3-Next: in_proj_qkvz / in_proj_ba packed per key-head group
    kSplit,   // Qwen3.5: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a
};
// qkv, z, b, a (the split layout's names; built by prepare_delta_net for a packed checkpoint), conv1d, A_log,
// dt_bias, norm, out_proj.
Status visit_weights(DeltaNetWeights& w, const ModelSpec& spec, DeltaNetLayout layout, const std::string& prefix,
                     const WeightVisitor& visit);
// What the walk cannot read by name: checks the config's linear-attention dimensions and, for the packed layout,
// re-orders in_proj_qkvz / in_proj_ba once into the split layout's qkv, z, b and a (owned buffers).
Status prepare_delta_net(const ModelSpec& spec, WeightLoader& loader, DeltaNetLayout layout, const std::string& prefix,
                         DeltaNetWeights& out);
void delta_net_forward(Ops& ops, const ModelSpec& spec, const DeltaNetWeights& w, const Tensor& x,
                       const ForwardBatch& batch, const Tensor& conv_state, const Tensor& recurrent_state, Arena& arena,
                       const Tensor& out);
size_t delta_net_scratch_floats(const ModelSpec& spec);
// Qwen3-Next's packed layout as a row map: qkvz[i] is the row of in_proj_qkvz that row i of the split [qkv | z]
// comes from, ba[i] the row of in_proj_ba for row i of [b | a]. prepare_delta_net re-orders the weights with it, and
// a LoRA adapter's B matrices of those modules are re-ordered alike.
struct PackedDeltaNetRows {
    std::vector<int64_t> qkvz, ba;
};
PackedDeltaNetRows packed_delta_net_rows(const ModelSpec& spec);

NormKind norm_kind(const ModelSpec& spec);

}  // namespace pagoda::model
