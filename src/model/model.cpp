#include "model/model.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <unordered_map>

#include "common/check.h"
#include "common/log.h"
#include "model/dummy_checkpoint.h"
#include "model/kv_cache_scales.h"
#include "model/rope.h"
#include "model/tensor_parallel.h"
#include "runtime/ops.h"

namespace pagoda::model {

std::string_view missing_op(const ModelSpec& spec, const std::function<bool(std::string_view)>& runs) {
    // One op stands for each layer kind's family of ops (ops.h); a backend brings a family whole.
    if (spec.num_linear_attention_layers() > 0 && !runs("gated_delta_rule")) return "gated_delta_rule";
    if (spec.has_moe() && !runs("moe_experts")) return "moe_experts";
    return {};
}

Result<ModelDir> open_model_dir(const std::string& dir, const LoadOptions& options) {
    PAGODA_ASSIGN_OR_RETURN(ModelDir model_dir, ModelDir::open(dir, /*open_weights=*/!options.dummy_weights));
    if (options.dummy_weights) {
        auto weights = dummy_checkpoint(model_dir.spec);
        if (!weights.ok()) return weights.status().with_context(dir);
        model_dir.checkpoint = std::move(weights).value();
        PAGODA_LOG_INFO("--load-format dummy: random bf16 weights for " + dir + " (" +
                        std::to_string(model_dir.checkpoint->tensors().size()) + " tensors, " +
                        std::to_string(model_dir.checkpoint->total_bytes() >> 20) + " MiB), no checkpoint read");
    }
    return model_dir;
}

Result<std::unique_ptr<Model>> Model::load(const std::string& dir, Backend& backend, Communicator& comm,
                                           const LoadOptions& options) {
    PAGODA_ASSIGN_OR_RETURN(ModelDir model_dir, open_model_dir(dir, options));
    return load(std::move(model_dir), backend, comm, options);
}

Result<std::unique_ptr<Model>> Model::load(ModelDir dir, Backend& backend, Communicator& comm,
                                           const LoadOptions& options) {
    if (!dir.checkpoint) return Status::error(dir.files.dir + ": no weights were opened");
    auto quantization = plan_quantization(dir.spec.quantization, options.quantization);
    if (!quantization.ok()) return quantization.status().with_context(dir.files.dir);
    if (std::string_view missing =
            missing_op(dir.spec, [&backend](std::string_view op) { return backend.ops().supports(op); });
        !missing.empty()) {
        return Status::error(std::string(family_name(dir.spec.family)) + " models do not run on " + backend.name() +
                             " yet (it has no " + std::string(missing) + " op); use --device cpu");
    }
    if (options.kv_cache_dtype == KvCacheDtype::kBf16 && backend.device().kind == DeviceKind::Host)
        return Status::error("--kv-cache-dtype bfloat16 needs a GPU: the CPU keeps its KV cache in f32 (or fp8)");
    if (options.calculate_kv_scales && options.kv_cache_dtype != KvCacheDtype::kFp8E4M3)
        return Status::error("--calculate-kv-scales applies to an fp8 KV cache: add --kv-cache-dtype fp8");
    auto plan = make_shard_plan(dir.spec, comm.size(), comm.rank(), options.expert_parallel);
    if (!plan.ok()) return plan.status().with_context(dir.files.dir);
    std::unique_ptr<Model> model(new Model(std::move(dir), backend, comm, *plan));
    model->kv_cache_dtype_ = options.kv_cache_dtype;
    model->calculate_kv_scales_ = options.calculate_kv_scales;
    std::vector<CheckpointKvScales> kv_scales;  // a checkpoint calibrated for an fp8 cache carries its scales
    if (options.kv_cache_dtype == KvCacheDtype::kFp8E4M3) {
        auto scales = read_kv_cache_scales(model->dir_.spec, *model->dir_.checkpoint);
        if (!scales.ok()) return scales.status().with_context(model->dir_.files.dir);
        kv_scales = std::move(scales).value();
    }
    Status status = model->place_kv_scales(kv_scales);
    if (status.ok()) status = model->load_weights(*quantization);
    if (status.ok()) status = shard_weights(model->dir_.spec, model->plan_, model->weights_);  // none unless split
    if (status.ok() && (backend.device().kind != DeviceKind::Host || options.pack_weights))
        status = model->upload_weights();
    if (status.ok() && options.fp8_activations) status = model->quantize_activations(quantization->fp8_at_load);
    if (!status.ok()) return status.with_context(model->dir_.files.dir);
    // One launch for q/k/v, one for gate/up and one for the delta-net input projections where the weights lie back to
    // back (upload_weights places them so when their sizes allow).
    for (LayerWeights& layer : model->weights_.layers) {
        fuse_projections(layer.attn);
        fuse_projections(layer.dense);
        fuse_projections(layer.delta);
    }
    return model;
}

// The checkpoint's KV cache scales as the pool takes them: per-tensor values as they are, per-head factors of this
// rank's KV heads copied into one allocation on the backend's device (the attention ops read them there).
Status Model::place_kv_scales(const std::vector<CheckpointKvScales>& scales) {
    std::vector<float> heads;  // every layer's per-head factors of this rank, K then V
    for (const CheckpointKvScales& s : scales) {
        for (const std::vector<float>* h : {&s.k_heads, &s.v_heads}) {
            if (h->empty()) continue;
            const auto first = h->begin() + plan_.first_kv_head;
            heads.insert(heads.end(), first, first + plan_.kv_heads);
        }
    }
    if (!heads.empty()) {
        PAGODA_ASSIGN_OR_RETURN(kv_head_scales_, Buffer::allocate(backend_.allocator(), heads.size() * sizeof(float)));
        const Shape shape{static_cast<int64_t>(heads.size())};
        backend_.copy(Tensor(kv_head_scales_.data(), DType::F32, shape, kv_head_scales_.device()),
                      Tensor(heads.data(), DType::F32, shape));
        backend_.synchronize();  // `heads` goes out of scope
    }
    const float* next = static_cast<const float*>(kv_head_scales_.data());
    kv_layer_scales_.clear();
    for (const CheckpointKvScales& s : scales) {
        KvScales k{.k = s.k, .v = s.v};
        if (!s.k_heads.empty()) k.k_heads = next, next += plan_.kv_heads;
        if (!s.v_heads.empty()) k.v_heads = next, next += plan_.kv_heads;
        kv_layer_scales_.push_back(k);
    }
    return ok_status();
}

// Copies every weight (the mmapped checkpoint views and the loader's own buffers) into one device allocation and
// points the tensors there. Tensors that share memory (tied lm_head) share it on the device too. The weights go in
// the order their structs declare them (visit_weights), which puts q, k, v (and their biases) and gate, up one after
// another, so that fuse_projections can view each group as one tensor (where their sizes are multiples of the
// 256-byte alignment, as at every real Qwen shape; otherwise they stay separate). Every weight's data comes first, then
// the linear weights' scales, then their zero points, then their permutations, each in the same order, so that
// quantized neighbours' data, scales and zero points are each back to back; a side tensor whose size is not a multiple
// of 256 bytes takes 16-byte alignment (a tiny model's scale grids then stay back to back too).
Status Model::upload_weights() {
    constexpr size_t kAlign = 256, kSmallAlign = 16;
    // Pass 0: every weight's data; passes 1-3: the linear weights' scales, then zero points, then permutations.
    const auto for_each_weight = [this](const std::function<void(Tensor&, size_t)>& f) {
        for (int pass = 0; pass < 4; ++pass) {
            Status walked = visit_weights(weights_, dir_.spec, [&f, pass](const WeightEntry& e) {
                if (pass == 0) {
                    f(e.data(), kAlign);
                } else if (e.linear != nullptr) {
                    Tensor& t = pass == 1 ? e.linear->scales : pass == 2 ? e.linear->zeros : e.linear->input_perm;
                    f(t, t.defined() && t.nbytes() % kAlign == 0 ? kAlign : kSmallAlign);
                }
                return ok_status();
            });
            PAGODA_CHECK_MSG(walked.ok(), walked.message().c_str());  // the visitor never fails
        }
    };
    std::unordered_map<const void*, size_t> offsets;  // host data -> offset in the device buffer
    size_t total = 0;
    Status status = ok_status();
    for_each_weight([&](Tensor& t, size_t align) {
        if (!t.defined() || offsets.count(t.data())) return;
        if (!t.is_contiguous()) status = Status::error("weight " + t.to_string() + " is not contiguous");
        total = (total + align - 1) / align * align;
        offsets[t.data()] = total;
        total += t.nbytes();
    });
    PAGODA_RETURN_IF_ERROR(status);
    auto buffer = Buffer::allocate(backend_.allocator(), total, kAlign);
    if (!buffer.ok()) return buffer.status().with_context("weights on " + backend_.name());
    auto* base = static_cast<std::byte*>(buffer->data());
    std::unordered_map<const void*, bool> copied;
    for_each_weight([&](Tensor& t, size_t) {
        if (!t.defined()) return;
        std::byte* dst = base + offsets.at(t.data());
        const Tensor device_view(dst, t.dtype(), t.shape(), backend_.device());
        if (!copied[t.data()]) {
            backend_.copy(device_view, t);
            copied[t.data()] = true;
        }
        t = device_view;
    });
    weights_.owned.buffers.clear();  // the host copies of norms and biases are no longer needed
    weights_.owned.buffers.push_back(std::move(buffer).value());
    return ok_status();
}

Status Model::load_weights(const QuantizationPlan& quantization) {
    const ModelSpec& spec = dir_.spec;
    PAGODA_ASSIGN_OR_RETURN(rope_, rope_table_for(spec));
    if (spec.hidden_act != "silu") return Status::error("hidden_act '" + spec.hidden_act + "' is not supported");
    if (static_cast<int64_t>(spec.layers.size()) != spec.num_hidden_layers || spec.num_hidden_layers <= 0) {
        return Status::error("config gives " + std::to_string(spec.num_hidden_layers) + " layers but " +
                             std::to_string(spec.layers.size()) + " layer types");
    }
    const Architecture& arch = architecture_for(spec.family);
    WeightLoader loader(*dir_.checkpoint, weights_.owned, quantization.stored ? &*quantization.stored : nullptr);
    // Expert parallelism: a per-expert checkpoint's stacks are built of this rank's experts only (host memory: one
    // rank's share, not the whole model's experts).
    if (plan_.expert_parallel) loader.hold_experts(plan_.experts.first, plan_.experts.count);
    // Tensor parallelism by features: dense per-expert stacks are built of this rank's features only.
    if (plan_.size > 1 && !plan_.expert_parallel)
        loader.hold_expert_features(plan_.expert_intermediate.first, plan_.expert_intermediate.count);
    weights_.layers.resize(spec.layers.size());
    cache_layer_.resize(spec.layers.size());
    int32_t full = 0, linear = 0;
    for (size_t i = 0; i < spec.layers.size(); ++i) {
        LayerWeights& layer = weights_.layers[i];
        layer.attention = spec.layers[i].attention;
        layer.mlp = spec.layers[i].mlp;
        if (spec.layers[i].sliding_window) {
            return Status::error("layer " + std::to_string(i) + ": sliding-window attention is not supported");
        }
        if (layer.attention == AttentionKind::kLinear && spec.family != ModelFamily::kQwen3Next &&
            spec.family != ModelFamily::kQwen3_5 && spec.family != ModelFamily::kQwen3_5Moe) {
            return Status::error("layer " + std::to_string(i) + ": linear attention in a " +
                                 std::string(family_name(spec.family)) + " model");
        }
        cache_layer_[i] = layer.attention == AttentionKind::kFull ? full++ : linear++;
        const std::string lp = spec.weight_prefix + "layers." + std::to_string(i) + ".";
        PAGODA_RETURN_IF_ERROR(prepare_layer(arch, spec, loader, static_cast<int64_t>(i), lp, layer));
    }
    // Every tensor the weights structs declare, read by name.
    PAGODA_RETURN_IF_ERROR(visit_weights(weights_, spec, loader.visitor()));
    if (quantization.fp8_at_load) {
        // The projections (WeightEntry::quantizable) and the stacked experts (rank 3, each expert's rows per channel
        // as a projection's, as vLLM's fp8 also quantizes a MoE model's experts).
        PAGODA_RETURN_IF_ERROR(visit_weights(weights_, spec, [&loader](const WeightEntry& e) {
            LinearWeight* w = e.linear;
            if (w != nullptr && e.quantizable && w->defined() && w->is_dense() &&
                (w->data.rank() == 2 || (w->data.rank() == 3 && w->data.is_contiguous())))
                *w = loader.quantize_fp8(*w);
            return ok_status();
        }));
    }
    if (!weights_.lm_head.defined()) weights_.lm_head = LinearWeight::dense(weights_.embed);  // tied
    return ok_status();
}

Status Model::quantize_activations(bool quantized_at_load) {
    const QuantizationSpec& q = dir_.spec.quantization;
    int64_t marked = 0;
    PAGODA_RETURN_IF_ERROR(visit_weights(weights_, dir_.spec, [&](const WeightEntry& e) {
        LinearWeight* w = e.linear;
        if (w == nullptr || !w->defined() || w->format != WeightFormat::kFp8E4M3 || w->data.rank() != 2)
            return ok_status();
        w->input_quant_group = quantized_at_load ? -1 : dynamic_activation_group(q, *w);
        marked += w->input_quant_group != 0;
        // A rank of a column-split (row-parallel) projection rounds its share of the inputs: only whole groups round
        // as one GPU does.
        const int64_t group = w->input_quant_group;
        if (comm_.size() > 1 && e.role.split == Split::kColumns && group > 0 && w->in_features() % group != 0) {
            return Status::error("--fp8-activations with " + std::to_string(comm_.size()) +
                                 " tensor-parallel ranks: " + e.name + "'s " + std::to_string(w->in_features()) +
                                 " inputs a rank are not whole groups of " + std::to_string(group) +
                                 ", so the ranks would round them otherwise than one GPU does");
        }
        return ok_status();
    }));
    if (marked == 0) {
        return Status::error(
            "--fp8-activations: no fp8 projection of this checkpoint (quantization_config: " + q.describe() +
            ") quantizes its activations dynamically; it applies to fp8 checkpoints with dynamic "
            "activation scales and to --quantization fp8");
    }
    return ok_status();
}

Status Model::enable_lora(int32_t max_loras, int64_t max_rank) {
    if (max_loras <= 0 || max_rank <= 0 || max_rank > kMaxLoraRank)
        return Status::error("--max-loras must be positive and --max-lora-rank in [1, " + std::to_string(kMaxLoraRank) +
                             "]");
    lora_ = std::make_unique<LoraTable>(weights_, dir_.spec, plan_, backend_, max_loras, max_rank);
    if (Status s = lora_->reserve_slots(); !s.ok()) {
        lora_.reset();
        return s;
    }
    if (backend_.device().kind != DeviceKind::Host && comm_.rank() == 0) {
        PAGODA_LOG_INFO("LoRA: " + std::to_string(max_loras) + " adapter slots of rank <= " + std::to_string(max_rank) +
                        ", " + std::to_string(lora_->slot_bytes() >> 20) + " MiB each" +
                        (comm_.size() > 1 ? " a rank" : "") + ", reserved before the KV pool is sized");
    }
    return ok_status();
}

Result<std::shared_ptr<const LoraAdapter>> Model::read_lora(const std::string& dir) const {
    if (!lora_) return Status::error("LoRA is not enabled (--enable-lora)");
    return read_lora_adapter(dir, lora_->targets(), dir_.spec.weight_prefix, lora_->max_rank());
}

KvCacheConfig Model::kv_cache_config(int32_t num_blocks, int32_t block_size) const {
    const ModelSpec& spec = dir_.spec;
    KvCacheConfig c;
    c.num_layers = static_cast<int32_t>(spec.num_full_attention_layers());
    c.num_blocks = num_blocks;
    c.block_size = block_size;
    c.num_kv_heads = static_cast<int32_t>(plan_.kv_heads);
    c.head_dim = static_cast<int32_t>(spec.head_dim);
    // By default BF16 on a GPU (half the bytes the decode kernel reads), F32 on the CPU; fp8 (e4m3) on either when
    // asked for, with the checkpoint's scales (or 1.0) unless calculated.
    c.dtype = backend_.device().kind == DeviceKind::Host ? DType::F32 : DType::BF16;
    if (kv_cache_dtype_ == KvCacheDtype::kFp8E4M3) {
        c.dtype = DType::F8_E4M3;
        c.calculate_scales = calculate_kv_scales_;
        c.layer_scales = kv_layer_scales_;
    }
    return c;
}

StateCacheConfig Model::state_cache_config(int32_t num_slots) const {
    const ModelSpec& spec = dir_.spec;
    StateCacheConfig c;
    c.num_layers = static_cast<int32_t>(spec.num_linear_attention_layers());
    c.num_slots = num_slots;
    // This rank's heads (all of them unless the model is split for tensor parallelism).
    c.conv_dim = static_cast<int32_t>(2 * plan_.linear_key_heads.count * spec.linear_key_head_dim +
                                      plan_.linear_value_heads.count * spec.linear_value_head_dim);
    c.conv_kernel = static_cast<int32_t>(spec.linear_conv_kernel_dim > 0 ? spec.linear_conv_kernel_dim : 4);
    c.num_v_heads = static_cast<int32_t>(plan_.linear_value_heads.count);
    c.k_head_dim = static_cast<int32_t>(spec.linear_key_head_dim);
    c.v_head_dim = static_cast<int32_t>(spec.linear_value_head_dim);
    return c;
}

size_t Model::scratch_bytes(int64_t tokens, int64_t logits_rows) const {
    const ModelSpec& spec = dir_.spec;
    size_t block = 0;
    for (const LayerWeights& layer : weights_.layers) {
        if (layer.attention == AttentionKind::kFull)
            block = std::max(block, attention_scratch_floats(spec));
        else
            block = std::max(block, delta_net_scratch_floats(spec));
        if (layer.mlp == MlpKind::kMoe)
            block = std::max(block, moe_scratch_floats(spec));
        else
            block = std::max(block, static_cast<size_t>(3 * spec.intermediate_size));
    }
    const size_t per_token = 4 * static_cast<size_t>(spec.hidden_size) + block;
    // 64 bytes of alignment slack for each of the ~24 tensors taken at most at once.
    return 4 * (per_token * static_cast<size_t>(tokens) + static_cast<size_t>(logits_rows * spec.hidden_size)) +
           64 * 32 + logits_scratch_bytes(plan_, logits_rows);
}

Status Model::forward(const ForwardBatch& batch, const KvCachePool* kv, const StateCachePool* states,
                      const Tensor& logits, const HiddenObserver& observer, const Tensor& pooled) {
    const ModelSpec& spec = dir_.spec;
    const int64_t T = batch.num_tokens, H = spec.hidden_size, V = vocab_size();
    const int64_t R = static_cast<int64_t>(batch.logits_indices.size());
    if (T <= 0) return Status::error("empty batch");
    if (static_cast<int64_t>(batch.token_ids.size()) != T) return Status::error("batch token count mismatch");
    for (int32_t id : batch.token_ids) {
        if (id < 0 || id >= spec.vocab_size) {
            return Status::error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                 std::to_string(spec.vocab_size) + ")");
        }
    }
    if (spec.num_full_attention_layers() > 0 && kv == nullptr) return Status::error("no KV cache pool given");
    if (spec.num_linear_attention_layers() > 0 && states == nullptr) return Status::error("no state pool given");
    if (R > 0 && (logits.rank() != 2 || logits.dim(0) != R || logits.dim(1) != V || logits.dtype() != DType::F32)) {
        return Status::error("logits tensor must be f32[" + std::to_string(R) + ", " + std::to_string(V) + "], got " +
                             logits.to_string());
    }
    for (int32_t row : batch.logits_indices) {
        if (row < 0 || row >= T) return Status::error("logits index out of range");
    }
    const int64_t P = static_cast<int64_t>(batch.pooled_indices.size());
    if (P > 0 && (pooled.rank() != 2 || pooled.dim(0) != P || pooled.dim(1) != H || pooled.dtype() != DType::F32 ||
                  !pooled.is_contiguous()))
        return Status::error("pooled tensor must be a contiguous f32[" + std::to_string(P) + ", " + std::to_string(H) +
                             "], got " + pooled.to_string());
    for (int32_t row : batch.pooled_indices) {
        if (row < 0 || row >= T) return Status::error("pooled index out of range");
    }

    // A host logits tensor with a device backend: computed on the device, then copied over.
    const bool on_device = backend_.device().kind != DeviceKind::Host;
    const bool copy_logits = on_device && R > 0 && logits.is_host();
    if (copy_logits && !logits.is_contiguous()) return Status::error("host logits tensor must be contiguous");
    const size_t logits_bytes = copy_logits ? static_cast<size_t>(R * V) * sizeof(float) + 64 : 0;

    // The adapters' ids become slots of the adapter table, which the ops read (the runner made them resident).
    ForwardBatch step = batch;
    if (!batch.lora_ids.empty()) {
        if (!lora_) return Status::error("the batch asks for LoRA adapters but LoRA is not enabled");
        if (static_cast<int64_t>(batch.lora_ids.size()) != T) return Status::error("one LoRA id per token");
        PAGODA_RETURN_IF_ERROR(lora_->map_tokens(batch.lora_ids, lora_slots_));
        step.lora_slots = lora_slots_;
        step.lora_slot_count = lora_->max_loras();
    }

    Ops& ops = backend_.ops();
    const bool copy_pooled = on_device && P > 0 && pooled.is_host();
    const size_t pooled_bytes = copy_pooled ? static_cast<size_t>(P * H) * sizeof(float) + 64 : 0;
    arena_.reserve(backend_.allocator(), scratch_bytes(T, R) + logits_bytes + pooled_bytes);
    struct StepScope {  // the device backend uploads the batch's arrays once per step
        Ops& ops;
        StepScope(Ops& o, const ForwardBatch& b) : ops(o) { ops.begin_step(b); }
        ~StepScope() { ops.end_step(); }
    } step_scope(ops, step);
    const NormKind kind = norm_kind(spec);
    const float eps = static_cast<float>(spec.rms_norm_eps);

    Tensor hidden = arena_.f32(T, H);  // residual stream
    Tensor x = arena_.f32(T, H);       // normed input of the next sub-layer
    Tensor y = arena_.f32(T, H);       // output of the last sub-layer, not yet added to the residual
    Tensor probe;
    HostTensor probe_host;  // the observer reads host memory
    if (observer) probe = arena_.f32(T, H);
    if (observer && on_device) probe_host = HostTensor::empty(DType::F32, Shape{T, H});
    auto observe = [&](int64_t layer, const Tensor& t) {
        if (!on_device) return observer(layer, t);
        backend_.copy(probe_host.tensor, t);
        observer(layer, probe_host.tensor);
    };

    embed_tokens(ops, comm_, plan_, weights_.embed, batch.token_ids, local_ids_, hidden);
    if (observer) observe(0, hidden);
    ops.rms_norm(hidden, weights_.layers[0].input_norm, eps, kind, x);
    for (size_t i = 0; i < weights_.layers.size(); ++i) {
        const LayerWeights& layer = weights_.layers[i];
        const size_t mark = arena_.mark();
        if (layer.attention == AttentionKind::kFull) {
            attention_forward(ops, spec, layer.attn, x, batch, rope_, kv->layer(cache_layer_[i]), arena_, y);
        } else {
            delta_net_forward(ops, spec, layer.delta, x, batch, states->conv_state(cache_layer_[i]),
                              states->recurrent_state(cache_layer_[i]), arena_, y);
        }
        arena_.rewind(mark);
        comm_.all_reduce_sum(y);  // tensor parallel: o_proj gave this rank's heads' part of the sum
        ops.add_rms_norm(hidden, y, layer.post_norm, eps, kind, x);
        if (layer.mlp == MlpKind::kMoe)
            moe_forward(ops, spec, layer.moe, x, arena_, y);
        else
            mlp_forward(ops, layer.dense, x, arena_, y);
        arena_.rewind(mark);
        comm_.all_reduce_sum(y);  // and down_proj this rank's MLP columns' part
        if (observer) {
            ops.copy(probe, hidden);
            ops.add(probe, y);
            observe(static_cast<int64_t>(i) + 1, probe);
        }
        const Tensor& next_norm =
            i + 1 < weights_.layers.size() ? weights_.layers[i + 1].input_norm : weights_.final_norm;
        ops.add_rms_norm(hidden, y, next_norm, eps, kind, x);
    }
    if (P > 0) {  // pooling requests: the final-norm hidden state itself
        const Tensor out = copy_pooled ? arena_.f32(P, H) : pooled;
        ops.gather_rows(x, batch.pooled_indices, out);
        if (copy_pooled) backend_.copy(pooled, out);
    }
    if (R == 0) return ok_status();
    Tensor rows = arena_.f32(R, H);
    ops.gather_rows(x, batch.logits_indices, rows);
    const Tensor out = copy_logits ? arena_.f32(R, V) : logits;
    compute_logits(ops, comm_, plan_, rows, weights_.lm_head, arena_, out);
    if (copy_logits) backend_.copy(logits, out);
    return ok_status();
}

}  // namespace pagoda::model
