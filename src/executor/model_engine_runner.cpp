#include "executor/model_engine_runner.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "common/log.h"

namespace pagoda::executor {

namespace {

// Runs `step` with the backend bound to the calling thread (the engine's or a rank's, not the one that made the
// backend); an exception, most likely an allocation failure in the forward's scratch, becomes an error.
template <typename Step>
Status guarded(Backend& backend, const char* what, Step&& step) {
    backend.bind_thread();
    try {
        return step();
    } catch (const std::exception& e) {
        return Status::error(std::string(what) + ": " + e.what());
    }
}

}  // namespace

Result<std::unique_ptr<ModelEngineRunner>> ModelEngineRunner::create(model::Model& model,
                                                                     const engine::EngineConfig& config,
                                                                     bool cuda_graphs) {
    if (config.block_size <= 0) return Status::error("block_size must be positive");
    std::unique_ptr<ModelEngineRunner> runner(new ModelEngineRunner(model));
    runner->block_size_ = config.block_size;
    Allocator& allocator = model.backend().allocator();
    if (model.spec().num_full_attention_layers() > 0) {
        if (config.num_kv_blocks <= 0) return Status::error("the model has full-attention layers but no KV blocks");
        PAGODA_ASSIGN_OR_RETURN(
            KvCachePool kv,
            KvCachePool::create(allocator, model.kv_cache_config(config.num_kv_blocks, config.block_size)));
        runner->kv_ = std::move(kv);
    }
    if (model.spec().num_linear_attention_layers() > 0) {
        if (config.num_state_slots <= 0)
            return Status::error("the model has linear-attention layers but num_state_slots is 0");
        auto states = StateCachePool::create(allocator, model.state_cache_config(config.num_state_slots));
        // Slots are reserved up front, whatever the sequences' lengths: say which flags size them.
        if (!states.ok())
            return states.status().with_context("state slots for max_num_seqs " + std::to_string(config.max_num_seqs) +
                                                " (2 a sequence) and " + std::to_string(config.max_state_snapshots) +
                                                " prefix snapshots; lower --max-num-seqs");
        runner->states_ = std::move(states).value();
    }
    runner->device_sampler_ = make_device_sampler(model.backend());
    if (runner->device_sampler_) runner->sampling_batch_.emplace(static_cast<int32_t>(model.vocab_size()));
    if (runner->device_sampler_ && cuda_graphs) {
        PAGODA_ASSIGN_OR_RETURN(
            runner->graphs_,
            executor::DecodeGraphs::create(model, {config.max_num_seqs, config.max_model_len, config.block_size}));
    }
    return runner;
}

// The engine builds these arrays itself, so a bad id is an engine bug; checking them here (O(tokens)) turns such a
// bug into an aborted step instead of a write outside the pools.
Status ModelEngineRunner::check_batch(const ForwardBatch& b) const {
    if (b.num_tokens <= 0 || b.num_seqs <= 0) return Status::error("empty batch");
    if (b.block_size != block_size_)
        return Status::error("batch block size " + std::to_string(b.block_size) + " differs from the pool's " +
                             std::to_string(block_size_));
    if (static_cast<int64_t>(b.query_start_loc.size()) != b.num_seqs + 1 ||
        static_cast<int64_t>(b.seq_lens.size()) != b.num_seqs ||
        static_cast<int64_t>(b.positions.size()) != b.num_tokens ||
        static_cast<int64_t>(b.slot_mapping.size()) != b.num_tokens ||
        static_cast<int64_t>(b.block_tables.size()) != static_cast<int64_t>(b.num_seqs) * b.max_blocks_per_seq)
        return Status::error("inconsistent batch array sizes");
    if (kv_) {
        const int32_t blocks = kv_->config().num_blocks;
        for (int32_t id : b.block_tables)
            if (id < 0 || id >= blocks) return Status::error("block id " + std::to_string(id) + " outside the pool");
        const int64_t slots = static_cast<int64_t>(blocks) * block_size_;
        for (int64_t s : b.slot_mapping)
            if (s >= slots) return Status::error("KV slot " + std::to_string(s) + " outside the pool");
        for (int32_t s = 0; s < b.num_seqs; ++s)
            if (b.seq_lens[s] > int64_t{b.max_blocks_per_seq} * block_size_)
                return Status::error("sequence longer than its block table");
    }
    if (states_) {
        if (static_cast<int64_t>(b.state_slots.size()) != b.num_seqs) return Status::error("missing state slots");
        for (int32_t slot : b.state_slots)
            if (slot < 0 || slot >= states_->config().num_slots)
                return Status::error("state slot " + std::to_string(slot) + " outside the pool");
    }
    return ok_status();
}

Status ModelEngineRunner::check_copies(std::span<const engine::StateCopy> copies) const {
    if (copies.empty()) return ok_status();
    if (!states_) return Status::error("state copies for a model without linear-attention layers");
    const int32_t n = states_->config().num_slots;
    for (const engine::StateCopy& c : copies)
        if (c.src_slot < 0 || c.src_slot >= n || c.dst_slot < 0 || c.dst_slot >= n)
            return Status::error("state copy " + std::to_string(c.src_slot) + " -> " + std::to_string(c.dst_slot) +
                                 " outside the pool");
    return ok_status();
}

// One slot of every layer's conv and recurrent state; views of one row each, copied by the backend.
void ModelEngineRunner::copy_state(const engine::StateCopy& copy) {
    if (copy.src_slot == copy.dst_slot) return;
    const StateCacheConfig& c = states_->config();
    const int64_t conv_elems = static_cast<int64_t>(c.conv_dim) * (c.conv_kernel - 1);
    const int64_t rec_elems = static_cast<int64_t>(c.num_v_heads) * c.k_head_dim * c.v_head_dim;
    Backend& backend = model_.backend();
    for (int32_t layer = 0; layer < c.num_layers; ++layer) {
        const Tensor conv = states_->conv_state(layer);
        const Tensor rec = states_->recurrent_state(layer);
        float* conv_base = conv.data_as<float>();
        float* rec_base = rec.data_as<float>();
        backend.copy(Tensor(conv_base + copy.dst_slot * conv_elems, DType::F32, Shape{conv_elems}, conv.device()),
                     Tensor(conv_base + copy.src_slot * conv_elems, DType::F32, Shape{conv_elems}, conv.device()));
        backend.copy(Tensor(rec_base + copy.dst_slot * rec_elems, DType::F32, Shape{rec_elems}, rec.device()),
                     Tensor(rec_base + copy.src_slot * rec_elems, DType::F32, Shape{rec_elems}, rec.device()));
    }
}

Status ModelEngineRunner::check_input(const engine::StepInput& input) const {
    PAGODA_RETURN_IF_ERROR(check_batch(input.batch));
    PAGODA_RETURN_IF_ERROR(check_copies(input.state_restores));
    return check_copies(input.state_saves);
}

void ModelEngineRunner::copy_states(std::span<const engine::StateCopy> copies) {
    for (const engine::StateCopy& c : copies)
        copy_state(c);
}

void ModelEngineRunner::page_lora_adapters() {
    PAGODA_CHECK_MSG(model_.lora() != nullptr && lora_fetch_, "page_lora_adapters needs LoRA and set_lora_fetch");
    lora_pager_ = std::make_unique<LoraPager>(*model_.lora(), lora_fetch_);
}

Status ModelEngineRunner::prepare_lora(const ForwardBatch& batch) {
    step_loras_.clear();
    for (int32_t id : batch.lora_ids)
        if (id != 0 && std::find(step_loras_.begin(), step_loras_.end(), id) == step_loras_.end())
            step_loras_.push_back(id);
    // The pager places the adapters it staged before every step, those without adapters too.
    if (lora_pager_) return lora_pager_->prepare(step_loras_);
    if (batch.lora_ids.empty()) return ok_status();
    if (model_.lora() == nullptr || !lora_fetch_)
        return Status::error("a step asks for LoRA adapters; none are served");
    return model_.lora()->make_resident(step_loras_, lora_fetch_);
}

Status ModelEngineRunner::forward_with_copies(const engine::StepInput& input, const Tensor& logits) {
    PAGODA_RETURN_IF_ERROR(prepare_lora(input.batch));
    copy_states(input.state_restores);
    // Pooling requests' hidden states go straight to host memory (a device backend copies the rows over).
    const int64_t pooled_rows = static_cast<int64_t>(input.batch.pooled_indices.size());
    const int64_t hidden = model_.spec().hidden_size;
    pooled_.resize(static_cast<size_t>(pooled_rows * hidden));
    const Tensor pooled = pooled_rows > 0 ? Tensor(pooled_.data(), DType::F32, Shape{pooled_rows, hidden}) : Tensor();
    PAGODA_RETURN_IF_ERROR(
        model_.forward(input.batch, kv_ ? &*kv_ : nullptr, states_ ? &*states_ : nullptr, logits, {}, pooled));
    copy_states(input.state_saves);
    return ok_status();
}

Status ModelEngineRunner::run_forward(const engine::StepInput& input, bool device_logits) {
    const int64_t rows = static_cast<int64_t>(input.batch.logits_indices.size());
    Tensor logits;  // no device rows when no row asks for logits (the forward then skips the LM head)
    if (!device_logits || rows > 0) {
        PAGODA_ASSIGN_OR_RETURN(logits, logits_rows(rows, device_logits));
    }
    PAGODA_RETURN_IF_ERROR(forward_with_copies(input, logits));
    model_.backend().synchronize();
    return ok_status();
}

Status ModelEngineRunner::run(const engine::StepInput& input) {
    PAGODA_RETURN_IF_ERROR(check_input(input));
    if (device_sampler_ && !input.sampling.empty()) return sample_on_device(input);
    // Host memory on every backend: the engine samples on the CPU (a device backend copies the rows over).
    return run_forward(input, /*device_logits=*/false);
}

// The forward writes the logits into a device buffer; the prompt-logprobs rows (if any) are copied to the host, and
// the sampled rows never leave the device.
Status ModelEngineRunner::sample_on_device(const engine::StepInput& input) {
    const ForwardBatch& batch = input.batch;
    const int64_t rows = static_cast<int64_t>(batch.logits_indices.size());
    const int64_t vocab = model_.vocab_size();
    if (input.sample_rows.size() != input.sampling.size())
        return Status::error("sample_rows and sampling differ in length");
    is_sample_row_.assign(static_cast<size_t>(rows), 0);
    for (int32_t r : input.sample_rows) {
        if (r < 0 || r >= rows || is_sample_row_[r]) return Status::error("bad or repeated sample row");
        is_sample_row_[r] = 1;
    }
    Tensor logits;
    if (graphs_ && graphs_->accepts(batch) && batch.pooled_indices.empty()) {
        PAGODA_RETURN_IF_ERROR(prepare_lora(batch));
        copy_states(input.state_restores);
        PAGODA_ASSIGN_OR_RETURN(logits, graphs_->forward(batch, kv_ ? &*kv_ : nullptr, states_ ? &*states_ : nullptr));
        copy_states(input.state_saves);
    } else {
        PAGODA_ASSIGN_OR_RETURN(logits, logits_rows(rows, /*on_device=*/true));
        PAGODA_RETURN_IF_ERROR(forward_with_copies(input, logits));
    }

    const int64_t host_rows = rows - static_cast<int64_t>(input.sample_rows.size());
    logits_.resize(static_cast<size_t>(host_rows * vocab));
    for (int64_t r = 0, h = 0; r < rows; ++r) {
        if (is_sample_row_[r]) continue;
        model_.backend().copy(Tensor(logits_.data() + h++ * vocab, DType::F32, Shape{vocab}), logits.select(r));
    }

    if (input.await_sampling_inputs) input.await_sampling_inputs();  // structured-output masks
    sampling_batch_->clear();
    for (size_t i = 0; i < input.sampling.size(); ++i)
        sampling_batch_->add(input.sampling[i], input.sample_rows[i]);
    sampled_.resize(input.sampling.size());
    PAGODA_RETURN_IF_ERROR(device_sampler_->sample(logits, sampling_batch_->rows(), sampling_batch_->edits(),
                                                   sampling_batch_->masks(), sampled_));
    results_.resize(sampled_.size());
    for (size_t i = 0; i < sampled_.size(); ++i)
        results_[i] = to_sample_result(sampled_[i]);
    return ok_status();
}

Result<Tensor> ModelEngineRunner::logits_rows(int64_t rows, bool on_device) {
    const int64_t vocab = model_.vocab_size();
    if (!on_device) {
        logits_.resize(static_cast<size_t>(rows * vocab));
        return Tensor(logits_.data(), DType::F32, Shape{rows, vocab});
    }
    const size_t bytes = static_cast<size_t>(rows * vocab) * sizeof(float);
    if (device_logits_.size() < bytes) {
        device_logits_ = Buffer();  // free the old buffer first: it may be most of the headroom
        PAGODA_ASSIGN_OR_RETURN(device_logits_, Buffer::allocate(model_.backend().allocator(), bytes + bytes / 4, 256));
    }
    return device_logits_.view(DType::F32, Shape{rows, vocab});
}

Status ModelEngineRunner::warm_up(const engine::EngineConfig& config) {
    if (config.max_num_seqs <= 0 || config.max_num_batched_tokens <= 0 || config.max_model_len <= 0)
        return Status::error("warm-up: max_num_seqs, max_num_batched_tokens and max_model_len must be positive");
    PAGODA_RETURN_IF_ERROR(warm_up_step(config, config.max_num_batched_tokens));
    // PAGODA_WARMUP_BUCKETS=1 (an experiment, off by default): a step of every power of two below the budget too, so
    // that the GEMM tuner (runtime/cuda/gemm.cpp), which times cuBLASLt's candidates the first time a shape meets a
    // power-of-two bucket of tokens, does it now rather than in the first steps of a burst of requests.
    if (const char* env = std::getenv("PAGODA_WARMUP_BUCKETS"); env && std::string_view(env) == "1") {
        int32_t tokens = 1;
        while (tokens * 2 < config.max_num_batched_tokens)
            tokens *= 2;
        for (; tokens >= 2; tokens /= 2)
            PAGODA_RETURN_IF_ERROR(warm_up_step(config, tokens));
    }
    warm_generation_ = model_.memory_generation();
    return ok_status();
}

Status ModelEngineRunner::warm_up_step(const engine::EngineConfig& config, int32_t budget) {
    const int32_t seqs = std::min(config.max_num_seqs, budget);
    // Every sequence gets one token; what is left of the budget goes to the last ones, max_model_len at most each.
    std::vector<int32_t> lens(static_cast<size_t>(seqs), 1);
    int64_t extra = int64_t(budget) - seqs;
    for (int32_t s = seqs - 1; s >= 0 && extra > 0; --s) {
        const int64_t add = std::min<int64_t>(extra, config.max_model_len - 1);
        lens[s] += static_cast<int32_t>(add);
        extra -= add;
    }
    const int32_t max_blocks = (config.max_model_len + block_size_ - 1) / block_size_;
    ForwardBatchArrays arrays;
    const std::vector<int32_t> tokens(static_cast<size_t>(*std::max_element(lens.begin(), lens.end())), 0);
    const int32_t slots = states_ ? states_->config().num_slots : 0;
    for (int32_t s = 0; s < seqs; ++s) {
        // No block table: the step stores no K/V (slot -1), and its block tables are all block 0.
        arrays.add_sequence(std::span<const int32_t>(tokens).first(static_cast<size_t>(lens[s])), 0, {}, block_size_,
                            slots > 0 ? s % slots : 0);  // every batch has a state slot per sequence
        arrays.logits_indices.push_back(arrays.query_start_loc.back() - 1);
    }
    arrays.lay_out_block_tables(
        static_cast<size_t>(seqs), [](size_t) { return std::span<const int32_t>(); }, max_blocks);
    engine::StepInput input;
    input.batch = arrays.view(block_size_, max_blocks, config.max_model_len);
    // With LoRA on, every token in adapter slot 0, so that the adapters' kernels size their scratch now too (a later
    // growth would drop the recorded graphs). The slot is empty here: its ranks are 0 (LoraTable::reserve_slots), and
    // a device's kernels return at once.
    std::vector<int32_t> lora_slots;
    if (model_.lora() != nullptr) {
        lora_slots.assign(arrays.token_ids.size(), 0);
        input.batch.lora_slots = lora_slots;
        input.batch.lora_slot_count = model_.lora()->max_loras();
    }

    // The device logits buffer at its largest with the full budget's step (the decode graphs hold their own).
    return guarded(model_.backend(), "warm-up step failed", [&] {
        PAGODA_RETURN_IF_ERROR(check_input(input));
        return run_forward(input, /*device_logits=*/device_sampler_ != nullptr);
    });
}

Status ModelEngineRunner::resize_kv_pool(int32_t num_blocks) {
    if (!kv_) return Status::error("the model has no KV cache");
    if (num_blocks <= 0) return Status::error("a KV pool needs at least one block");
    const KvCacheConfig c = model_.kv_cache_config(num_blocks, block_size_);
    kv_.reset();  // the old pool's memory goes first: the new one may need it
    PAGODA_ASSIGN_OR_RETURN(KvCachePool kv, KvCachePool::create(model_.backend().allocator(), c));
    kv_ = std::move(kv);
    return ok_status();
}

engine::StepOutput ModelEngineRunner::execute(const engine::StepInput& input) {
    engine::StepOutput out;
    out.status = guarded(model_.backend(), "model forward failed", [&] { return run(input); });
    if (warm_generation_ && model_.memory_generation() != *warm_generation_) {
        if (growths_after_warm_up_.load(std::memory_order_relaxed) == 0)
            PAGODA_LOG_WARNING("a step grew scratch memory after the warm-up step (its shape was not covered)");
        growths_after_warm_up_.fetch_add(1, std::memory_order_relaxed);
        warm_generation_ = model_.memory_generation();
    }
    if (out.status.ok()) {
        out.logits = logits_;
        if (!input.batch.pooled_indices.empty()) out.pooled = pooled_;
        if (device_sampler_ && !input.sampling.empty()) out.samples = results_;
    }
    return out;
}

Status ModelEngineRunner::forward_only(const engine::StepInput& input) {
    return guarded(model_.backend(), "model forward failed", [&] {
        PAGODA_RETURN_IF_ERROR(check_input(input));
        // The logits stay where the forward writes them: device memory on a GPU, the host buffer on the CPU.
        return run_forward(input, /*device_logits=*/model_.backend().device().kind != DeviceKind::Host);
    });
}

}  // namespace pagoda::executor
