#include "executor/create_engine.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/log.h"
#include "executor/engine_sizes.h"
#include "model/rope.h"
#include "runtime/cache_pools.h"
#include "runtime/cuda_backend.h"

namespace pagoda::executor {

ServingEngine::~ServingEngine() {
    if (engine_) engine_->shutdown();
    engine_.reset();
}

namespace {

int32_t clamp_i32(int64_t v) {
    return static_cast<int32_t>(std::clamp<int64_t>(v, 0, INT32_MAX));
}

}  // namespace

namespace {

// The model's side of the size rule; the GPU's is filled in by with_sizes.
SizeFacts model_size_facts(const model::Model& model, int32_t block_size) {
    const model::ModelSpec& spec = model.spec();
    SizeFacts f;
    f.block_size = block_size;
    f.context_length = model::max_context_length(spec);
    if (spec.num_full_attention_layers() > 0)
        f.kv_bytes_per_token = KvCachePool::bytes_per_block(model.kv_cache_config(1, block_size)) / block_size;
    if (spec.num_linear_attention_layers() > 0)
        f.state_bytes_per_slot = StateCachePool::bytes_per_slot(model.state_cache_config(1));
    return f;
}

// The KV pool's element type for the start-up log: "bf16", "f32", or "fp8_e4m3 (scales 1.0)" and the like.
std::string kv_dtype_phrase(const model::Model& model, const engine::EngineConfig& config) {
    const KvCacheConfig c = model.kv_cache_config(1, config.block_size);
    if (c.dtype != DType::F8_E4M3) return c.dtype == DType::BF16 ? "bf16" : "f32";
    return std::string("fp8_e4m3 (") +
           (c.calculate_scales ? "scales from the first prefill's amax" : "scales 1.0: no --calculate-kv-scales") + ")";
}

EngineOptions with_chosen(EngineOptions o, const EngineSizes& s) {
    o.max_num_seqs = s.max_num_seqs;
    o.max_num_batched_tokens = s.max_num_batched_tokens;
    o.max_model_len = s.max_model_len;
    return o;
}

EngineSizes given_sizes(const EngineOptions& o) {
    return {o.max_num_seqs, o.max_num_batched_tokens, o.max_model_len};
}

}  // namespace

Result<engine::EngineConfig> engine_config_for(const model::Model& model, const EngineOptions& options) {
    const model::ModelSpec& spec = model.spec();
    engine::EngineConfig c;
    if (options.block_size <= 0) return Status::error("block_size must be positive");
    if (options.max_num_seqs < 0 || options.max_num_batched_tokens < 0 || options.max_model_len < 0)
        return Status::error("max_num_seqs, max_num_batched_tokens and max_model_len must not be negative");
    const EngineOptions o =
        with_chosen(options, choose_sizes(given_sizes(options), model_size_facts(model, options.block_size)).sizes);
    // Positions beyond the trained context give garbage without a rope scaling that extends it; vLLM refuses too.
    // With YaRN the context is the original one times the factor, as vLLM derives it.
    const int64_t context = model::max_context_length(spec);
    if (o.max_model_len > 0 && context > 0 && o.max_model_len > context) {
        const std::string source = spec.rope.type == "yarn"
                                       ? "original_max_position_embeddings × the yarn factor in config.json"
                                       : "max_position_embeddings in config.json; YaRN rope_scaling extends it";
        return Status::error("--max-model-len " + std::to_string(o.max_model_len) +
                             " is longer than the model's context length (" + std::to_string(context) + ": " + source +
                             "); use at most " + std::to_string(context));
    }
    c.max_model_len = o.max_model_len;
    c.max_num_seqs = o.max_num_seqs;
    c.max_num_batched_tokens = o.max_num_batched_tokens;
    c.block_size = o.block_size;
    c.enable_prefix_caching = o.enable_prefix_caching;
    c.priority_scheduling = o.priority_scheduling;
    c.admission = o.admission;
    c.max_waiting_requests = o.max_waiting_requests;
    c.max_unread_tokens = o.max_unread_tokens;
    c.seed = o.seed;

    const int64_t blocks_per_seq = (static_cast<int64_t>(c.max_model_len) + c.block_size - 1) / c.block_size;
    if (o.num_kv_blocks > 0) {
        c.num_kv_blocks = o.num_kv_blocks;
    } else if (spec.num_full_attention_layers() > 0) {
        const size_t per_block = KvCachePool::bytes_per_block(model.kv_cache_config(1, c.block_size));
        const size_t budget = o.kv_cache_bytes > 0 ? o.kv_cache_bytes : size_t{4} << 30;
        int64_t fit = static_cast<int64_t>(budget / std::max<size_t>(per_block, 1));
        if (o.kv_cache_bytes == 0) fit = std::max(fit, blocks_per_seq);
        c.num_kv_blocks = clamp_i32(std::min(fit, blocks_per_seq * c.max_num_seqs));
    } else {
        // No full-attention layer: blocks are bookkeeping only (the prefix cache still keys on them).
        c.num_kv_blocks = clamp_i32(blocks_per_seq * c.max_num_seqs);
    }

    if (spec.num_linear_attention_layers() > 0) {
        c.max_state_snapshots = o.max_state_snapshots >= 0 ? o.max_state_snapshots : o.max_num_seqs;
        c.num_state_slots = 2 * c.max_num_seqs + c.max_state_snapshots;
    }

    const model::GenerationDefaults& g = model.dir().generation;
    // Every file's EOS ids stop a request (Qwen instruct models list <|im_end|> and <|endoftext|> across config.json
    // and generation_config.json; the tokenizer's eos_token stops one in vLLM whatever those say).
    const auto add_eos = [&](int64_t id) {
        if (id >= 0 && id < model.vocab_size() &&
            std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end())
            c.eos_token_ids.push_back(static_cast<int32_t>(id));
    };
    for (const std::vector<int64_t>* list : {&g.eos_token_ids, &spec.eos_token_ids})
        for (int64_t id : *list)
            add_eos(id);
    if (const auto id = model.dir().tokenizer_eos_token_id) add_eos(*id);
    if (g.temperature) c.generation_config.temperature = static_cast<float>(*g.temperature);
    if (g.top_p) c.generation_config.top_p = static_cast<float>(*g.top_p);
    if (g.top_k) c.generation_config.top_k = static_cast<int32_t>(*g.top_k);
    if (g.min_p) c.generation_config.min_p = static_cast<float>(*g.min_p);
    if (g.repetition_penalty) c.generation_config.repetition_penalty = static_cast<float>(*g.repetition_penalty);
    return c;
}

namespace {

// Whether the model goes to the GPU: --device cuda, or auto with a GPU present and a model the CUDA backend runs
// (auto says in one line why a model with a GPU present stays on the CPU).
Result<bool> on_cuda(const EngineOptions& o, const model::ModelSpec& spec) {
    if (o.device != "cpu" && o.device != "cuda" && o.device != "auto")
        return Status::error("device '" + o.device + "' is not cpu, cuda or auto");
    if (o.device != "auto") return o.device == "cuda";
    if (cuda_device_count() == 0) return false;
    const std::string_view missing = model::missing_op(spec, cuda_runs_op);
    if (!missing.empty())
        PAGODA_LOG_INFO("device auto: the CPU, since " + std::string(model::family_name(spec.family)) + " needs " +
                        std::string(missing) + ", which the CUDA backend does not run yet");
    return missing.empty();
}

Result<std::unique_ptr<Backend>> make_backend(const EngineOptions& o, const model::ModelSpec& spec) {
    PAGODA_ASSIGN_OR_RETURN(const bool cuda, on_cuda(o, spec));
    if (cuda) return make_cuda_backend();
    CpuBackendOptions backend_options;
    backend_options.num_threads = o.num_threads;
    return make_cpu_backend(backend_options);
}

// What the KV pool may take on a GPU: the memory left (after the weights, and after the warm-up step when
// `reserve` is only headroom) within the --gpu-memory-utilization share, less `reserve`.
Result<size_t> gpu_kv_budget(const model::Model& model, const EngineOptions& o, size_t reserve) {
    if (!(o.gpu_memory_utilization > 0.0 && o.gpu_memory_utilization <= 1.0))
        return Status::error("gpu_memory_utilization must be in (0, 1]");
    PAGODA_ASSIGN_OR_RETURN(CudaDeviceInfo info, cuda_device_info(model.backend().device().index));
    const auto keep_free =
        static_cast<size_t>((1.0 - o.gpu_memory_utilization) * static_cast<double>(info.total_bytes));
    if (info.free_bytes <= keep_free + reserve)
        return Status::error("no GPU memory left for the KV cache: " + std::to_string(info.free_bytes >> 20) +
                             " MiB free after the weights and activations, " +
                             std::to_string((keep_free + reserve) >> 20) +
                             " MiB needed for headroom (raise --gpu-memory-utilization)");
    return info.free_bytes - keep_free - reserve;
}

// Tensor-parallel ranks warm up only after their pools are made (TensorParallelRunner::start), so their
// activations are estimated: one step's fp32 activations per token, logits rows three times over (the forward's, the
// sampler's, the decode graphs' buffer), and 512 MiB for cuBLASLt workspaces, NCCL and the attention workspace.
size_t estimated_activation_bytes(const model::Model& model, const EngineOptions& o) {
    const model::ModelSpec& spec = model.spec();
    const size_t tokens = static_cast<size_t>(std::max(o.max_num_batched_tokens, 1));
    const size_t per_token =
        4 * (8 * static_cast<size_t>(spec.hidden_size) + 4 * static_cast<size_t>(spec.intermediate_size) +
             4 * static_cast<size_t>(spec.num_attention_heads * spec.head_dim));
    return tokens * per_token + 3 * static_cast<size_t>(o.max_num_seqs) * model.vocab_size() * 4 + (size_t{512} << 20);
}

}  // namespace

Result<EngineOptions> with_sizes(const model::Model& model, const EngineOptions& options, std::string* line) {
    const EngineSizes given = given_sizes(options);
    SizeFacts f = model_size_facts(model, options.block_size);
    if (model.backend().device().kind == DeviceKind::Cuda &&
        (given.max_num_seqs <= 0 || given.max_num_batched_tokens <= 0 || given.max_model_len <= 0)) {
        PAGODA_ASSIGN_OR_RETURN(const CudaDeviceInfo info, cuda_device_info(model.backend().device().index));
        f.gpu = true;
        f.gpu_name = info.name;
        f.gpu_total_bytes = info.total_bytes;
        // The activations are estimated at the batch sizes before any memory cap (the cap only lowers them).
        f.memory_budget = SIZE_MAX;
        const EngineOptions uncapped = with_chosen(options, choose_sizes(given, f).sizes);
        PAGODA_ASSIGN_OR_RETURN(f.memory_budget,
                                gpu_kv_budget(model, uncapped, estimated_activation_bytes(model, uncapped)));
    }
    const SizeChoice choice = choose_sizes(given, f);
    if (line) *line = describe_choice(choice, f);
    return with_chosen(options, choice.sizes);
}

namespace {

// After the warm-up step, what is not measured: the decode CUDA graphs' own memory and the driver's.
constexpr size_t kWarmHeadroomBytes = size_t{256} << 20;

// The KV pool's blocks for a budget of `bytes`: as many as fit, but no more than max_num_seqs full-length sequences
// need (engine_config_for's rule, with the budget given).
Result<int32_t> kv_blocks_for_budget(const model::Model& model, const EngineOptions& options, size_t bytes) {
    EngineOptions sized = options;
    sized.kv_cache_bytes = bytes;
    PAGODA_ASSIGN_OR_RETURN(engine::EngineConfig c, engine_config_for(model, sized));
    return c.num_kv_blocks;
}

// The engine's sizes for a loaded model on the CPU, or with the KV pool's size given. For tensor parallelism
// `model` is rank 0's: every rank holds shards of the same sizes and a pool of the same number of blocks, so rank
// 0's GPU speaks for all of them.
Result<engine::EngineConfig> sized_engine_config(const model::Model& model, const EngineOptions& options) {
    std::string chosen;
    PAGODA_ASSIGN_OR_RETURN(EngineOptions sized, with_sizes(model, options, &chosen));
    if (!chosen.empty()) PAGODA_LOG_INFO(chosen);
    if (model.backend().device().kind == DeviceKind::Cuda && options.num_kv_blocks <= 0 &&
        options.kv_cache_bytes == 0) {
        PAGODA_ASSIGN_OR_RETURN(sized.kv_cache_bytes,
                                gpu_kv_budget(model, sized, estimated_activation_bytes(model, sized)));
    }
    return engine_config_for(model, sized);
}

// One GPU (or the CPU): the runner, warmed up on a device so that no step allocates. On a GPU with the KV pool's
// size not given, the pool starts with one block (the warm-up's) and is then replaced by one sized from the memory
// free after the warm-up step: weights + measured activation peak + KV pool (vLLM's profiling run). A context length
// chosen here (not given) is lowered to what that pool holds, when it holds less.
Result<std::unique_ptr<ModelEngineRunner>> start_runner(model::Model& model, const EngineOptions& options,
                                                        engine::EngineConfig& config) {
    std::string chosen;
    PAGODA_ASSIGN_OR_RETURN(const EngineOptions sized, with_sizes(model, options, &chosen));
    if (!chosen.empty()) PAGODA_LOG_INFO(chosen);
    const bool device = model.backend().device().kind != DeviceKind::Host;
    const bool size_kv = device && options.num_kv_blocks <= 0 && options.kv_cache_bytes == 0 &&
                         model.spec().num_full_attention_layers() > 0;
    EngineOptions first = sized;
    if (size_kv) first.num_kv_blocks = 1;
    PAGODA_ASSIGN_OR_RETURN(config, engine_config_for(model, first));
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<ModelEngineRunner> runner,
                            ModelEngineRunner::create(model, config, !options.enforce_eager));
    if (!device) {
        if (model.spec().num_full_attention_layers() > 0)
            PAGODA_LOG_INFO("KV pool: " + std::to_string(int64_t{config.num_kv_blocks} * config.block_size) +
                            " tokens of " + kv_dtype_phrase(model, config));
        return runner;
    }
    PAGODA_ASSIGN_OR_RETURN(const CudaDeviceInfo before, cuda_device_info(model.backend().device().index));
    PAGODA_RETURN_IF_ERROR(runner->warm_up(config));
    PAGODA_ASSIGN_OR_RETURN(const CudaDeviceInfo after, cuda_device_info(model.backend().device().index));
    if (size_kv) {
        PAGODA_ASSIGN_OR_RETURN(const size_t budget, gpu_kv_budget(model, sized, kWarmHeadroomBytes));
        PAGODA_ASSIGN_OR_RETURN(config.num_kv_blocks, kv_blocks_for_budget(model, sized, budget));
        const int64_t pool_tokens = int64_t{config.num_kv_blocks} * config.block_size;
        if (options.max_model_len <= 0 && pool_tokens < config.max_model_len && pool_tokens >= config.block_size) {
            PAGODA_LOG_INFO("max_model_len " + std::to_string(pool_tokens) + " (was " +
                            std::to_string(config.max_model_len) +
                            "): what the KV pool holds after the warm-up step; --max-model-len sets it");
            config.max_model_len = static_cast<int32_t>(pool_tokens);
        }
        PAGODA_RETURN_IF_ERROR(runner->resize_kv_pool(config.num_kv_blocks));
    }
    const size_t kv_bytes = static_cast<size_t>(config.num_kv_blocks) *
                            KvCachePool::bytes_per_block(model.kv_cache_config(1, config.block_size));
    const int64_t pool_tokens = int64_t{config.num_kv_blocks} * config.block_size;
    PAGODA_LOG_INFO("GPU memory: the warm-up step (" + std::to_string(config.max_num_batched_tokens) + " tokens, " +
                    std::to_string(config.max_num_seqs) + " sequences) took " +
                    std::to_string((before.free_bytes - std::min(before.free_bytes, after.free_bytes)) >> 20) +
                    " MiB; KV pool " + std::to_string(kv_bytes >> 20) + " MiB of " + kv_dtype_phrase(model, config) +
                    " (" + std::to_string(config.num_kv_blocks) + " blocks of " + std::to_string(config.block_size) +
                    " tokens = " + std::to_string(pool_tokens) + " tokens, " +
                    std::to_string(pool_tokens / std::max(config.max_model_len, 1)) + " sequences of " +
                    std::to_string(config.max_model_len) + " at once)");
    return runner;
}

// Node 0 of several: listens, waits for every other node, then loads its ranks as they load theirs.
Result<std::unique_ptr<TensorParallelRunner>> load_node_zero(const std::string& model_dir, const EngineOptions& o) {
    PAGODA_ASSIGN_OR_RETURN(const NodeGroupOptions group_options, node_group_options(model_dir, o));
    if (o.node_rank != 0) {
        return Status::error("node " + std::to_string(o.node_rank) +
                             " does not serve: it runs the worker loop (run_tensor_parallel_worker)");
    }
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<NodeGroup> group, NodeGroup::listen(group_options));
    PAGODA_LOG_INFO("node 0 of " + std::to_string(o.nnodes) + ": waiting on port " + std::to_string(group->port()) +
                    " for the other nodes (up to " + std::to_string(o.dist_timeout_s) + " s)");
    PAGODA_RETURN_IF_ERROR(group->accept_all());
    PAGODA_LOG_INFO("node 0: all " + std::to_string(o.nnodes) + " nodes joined; loading the model");
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<TensorParallelRunner> runner,
                            TensorParallelRunner::load_node(model_dir, std::move(group), o.num_threads));
    if (o.on_node_group_failure) runner->on_group_failure(o.on_node_group_failure);
    return runner;
}

// The ranks of a split model: one GPU each when the model goes to the GPU (the same rule as one device), else CPU
// threads. What cannot work (more ranks than GPUs, a build without NCCL) is an error that says so.
// One line on where the routed experts go when the ranks split an MoE model (or why the flag does nothing).
void log_expert_placement(const model::ModelSpec& spec, const EngineOptions& o) {
    const int n = o.tensor_parallel_size;
    if (!spec.has_moe()) {
        if (o.enable_expert_parallel) PAGODA_LOG_INFO("--enable-expert-parallel: the model has no experts; ignored");
        return;
    }
    if (n <= 1) {
        if (o.enable_expert_parallel) PAGODA_LOG_INFO("--enable-expert-parallel: one rank holds every expert");
        return;
    }
    const std::string e = std::to_string(spec.num_experts);
    PAGODA_LOG_INFO(o.enable_expert_parallel
                        ? "experts: expert parallel, each of " + std::to_string(n) + " ranks holds " +
                              std::to_string(spec.num_experts / n) + " of the " + e + " routed experts whole"
                        : "experts: tensor parallel, each of " + std::to_string(n) + " ranks holds 1/" +
                              std::to_string(n) + " of every one of the " + e +
                              " routed experts (--enable-expert-parallel: whole experts instead)");
}

Result<std::unique_ptr<TensorParallelRunner>> load_tensor_parallel(const std::string& model_dir,
                                                                   const EngineOptions& o) {
    PAGODA_ASSIGN_OR_RETURN(model::ModelDir dir, model::ModelDir::open(model_dir, /*open_weights=*/false));
    log_expert_placement(dir.spec, o);
    if (o.nnodes > 1 && o.dummy_weights)
        return Status::error("--load-format dummy runs on one node (each node would make its own random weights)");
    if (o.nnodes > 1) return load_node_zero(model_dir, o);
    PAGODA_ASSIGN_OR_RETURN(const bool cuda, on_cuda(o, dir.spec));
    model::LoadOptions load;
    load.quantization = o.quantization;
    load.kv_cache_dtype = o.kv_cache_dtype;
    load.calculate_kv_scales = o.calculate_kv_scales;
    load.expert_parallel = o.enable_expert_parallel;
    load.fp8_activations = o.fp8_activations;
    load.dummy_weights = o.dummy_weights;
    if (cuda) return TensorParallelRunner::load_cuda(model_dir, o.tensor_parallel_size, load);
    return TensorParallelRunner::load_cpu(model_dir, o.tensor_parallel_size, o.num_threads, load);
}

}  // namespace

Result<NodeGroupOptions> node_group_options(const std::string& model_dir, const EngineOptions& o) {
    if (o.nnodes < 2)
        return Status::error("a group of nodes needs --nnodes 2 or more, got " + std::to_string(o.nnodes));
    if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
        return Status::error("--node-rank " + std::to_string(o.node_rank) + " is outside 0.." +
                             std::to_string(o.nnodes - 1) + " (--nnodes " + std::to_string(o.nnodes) + ")");
    }
    if (o.dist_timeout_s < 1) return Status::error("--dist-timeout must be at least 1 second");
    if (o.fp8_activations) return Status::error("--fp8-activations is not served across nodes (--nnodes) yet");
    if (o.dist_init_addr.empty()) {
        return Status::error("--nnodes " + std::to_string(o.nnodes) +
                             " needs --dist-init-addr HOST:PORT (node 0's address and a free port)");
    }
    NodeGroupOptions g;
    // Node 0 may ask for port 0 (any free port; tests); the others must be told a real one.
    auto address = parse_host_port(o.dist_init_addr, /*allow_port_zero=*/o.node_rank == 0);
    if (!address.ok()) return address.status().with_context("--dist-init-addr");
    g.address = std::move(address).value();
    g.nnodes = o.nnodes;
    g.node_rank = o.node_rank;
    g.tensor_parallel_size = o.tensor_parallel_size;
    g.timeout = Timeout(int64_t{o.dist_timeout_s} * 1000);
    g.cancel = o.cancel_node_wait;
    PAGODA_ASSIGN_OR_RETURN(model::ModelDir dir, model::ModelDir::open(model_dir, /*open_weights=*/false));
    PAGODA_ASSIGN_OR_RETURN(const bool cuda, on_cuda(o, dir.spec));
    g.device = cuda ? "cuda" : "cpu";
    // Checked before any node listens or connects (load_node checks again, for callers that form groups directly).
    PAGODA_RETURN_IF_ERROR(TensorParallelRunner::check_node_layout(o.tensor_parallel_size, o.nnodes, g.device));
    PAGODA_ASSIGN_OR_RETURN(g.model_fingerprint, model_fingerprint(model_dir));
    g.expert_parallel = o.enable_expert_parallel;
    // What --quantization does to this checkpoint, not how it is spelled: on a quantized checkpoint it only names the
    // format (gptq or vLLM's gptq_marlin alike: nothing to agree on); on a bf16 one, fp8 quantizes at load.
    PAGODA_ASSIGN_OR_RETURN(const model::QuantizationPlan plan,
                            model::plan_quantization(dir.spec.quantization, o.quantization));
    g.quantization = plan.fp8_at_load ? "fp8" : "";
    g.kv_cache_dtype = kv_cache_dtype_name(o.kv_cache_dtype);
    g.calculate_kv_scales = o.calculate_kv_scales;
    if (o.enable_lora) g.max_loras = o.max_loras, g.max_lora_rank = o.max_lora_rank;
    return g;
}

namespace {

// The adapters of --lora-modules, read and checked (against `model`, rank 0's when split) before the engine starts;
// the runners fetch adapters from them.
Result<std::unique_ptr<LoraManager>> start_lora(const model::Model& model, const EngineOptions& o) {
    const int32_t max_cpu = o.max_cpu_loras > 0 ? o.max_cpu_loras : o.max_loras;
    if (max_cpu < o.max_loras)
        return Status::error("--max-cpu-loras (" + std::to_string(max_cpu) + ") must be at least --max-loras (" +
                             std::to_string(o.max_loras) + ")");
    auto manager = std::make_unique<LoraManager>(model, max_cpu, o.lora_reserved_names);
    for (const auto& [name, path] : o.lora_modules)
        PAGODA_RETURN_IF_ERROR(manager->load(name, path).with_context("--lora-modules " + name + "=" + path));
    return manager;
}

// Whether adapters are paged in beside the steps (EngineOptions::page_lora_adapters, PAGODA_LORA_PAGING=0 off).
bool page_lora_adapters(const EngineOptions& o) {
    const char* paging = std::getenv("PAGODA_LORA_PAGING");
    return o.page_lora_adapters && !(paging && std::string_view(paging) == "0");
}

model::LoraFetch lora_fetch(LoraManager& manager) {
    return [m = &manager](int32_t id) { return m->weights(id); };
}

}  // namespace

engine::ModelRunner& ServingEngine::runner_for_engine(engine::ModelRunner& runner, const EngineOptions& options) {
    if (!options.async_scheduling) return runner;
    pipelined_ = std::make_unique<engine::PipelinedRunner>(runner);
    PAGODA_LOG_INFO("async scheduling: step n+1 is scheduled while the model runs step n");
    return *pipelined_;
}

Result<std::unique_ptr<ServingEngine>> create_engine(const std::string& model_dir, const EngineOptions& options) {
    std::unique_ptr<ServingEngine> s(new ServingEngine());
    if (options.tensor_parallel_size > 1 || options.nnodes > 1) {
        // The ranks are threads of this process (docs/architecture.md, Tensor parallelism), and with several nodes
        // the threads of the other nodes' processes too.
        PAGODA_ASSIGN_OR_RETURN(s->tp_runner_, load_tensor_parallel(model_dir, options));
        if (options.enable_lora)
            PAGODA_RETURN_IF_ERROR(
                s->tp_runner_->enable_lora(options.max_loras, options.max_lora_rank).with_context(model_dir));
        PAGODA_ASSIGN_OR_RETURN(s->config_, sized_engine_config(s->tp_runner_->model(), options));
        PAGODA_RETURN_IF_ERROR(s->tp_runner_->start(s->config_).with_context(model_dir));
        if (options.enable_lora) {
            PAGODA_ASSIGN_OR_RETURN(s->lora_, start_lora(s->tp_runner_->model(), options));
            s->tp_runner_->set_lora_fetch(lora_fetch(*s->lora_));
            // Across nodes the others read each adapter from the directory node 0 loaded it from.
            s->tp_runner_->set_lora_paths([m = s->lora_.get()](int32_t id) { return m->path_of(id); });
            if (options.nnodes <= 1 && page_lora_adapters(options)) s->tp_runner_->page_lora_adapters();
            s->config_.max_loras = options.max_loras;
        }
        auto engine =
            engine::Engine::create(s->config_, s->runner_for_engine(*s->tp_runner_, options), options.observer);
        if (!engine.ok()) return engine.status().with_context(model_dir);
        s->engine_ = std::move(engine).value();
        return s;
    }
    const model::LoadOptions load{.quantization = options.quantization,
                                  .kv_cache_dtype = options.kv_cache_dtype,
                                  .calculate_kv_scales = options.calculate_kv_scales,
                                  .fp8_activations = options.fp8_activations,
                                  .dummy_weights = options.dummy_weights};
    PAGODA_ASSIGN_OR_RETURN(model::ModelDir dir, model::open_model_dir(model_dir, load));
    log_expert_placement(dir.spec, options);
    auto backend = make_backend(options, dir.spec);
    if (!backend.ok()) return backend.status().with_context(model_dir);
    s->backend_ = std::move(backend).value();
    PAGODA_ASSIGN_OR_RETURN(s->model_, model::Model::load(std::move(dir), *s->backend_, single_communicator(), load));
    if (options.enable_lora)
        PAGODA_RETURN_IF_ERROR(
            s->model_->enable_lora(options.max_loras, options.max_lora_rank).with_context(model_dir));
    auto runner = start_runner(*s->model_, options, s->config_);
    if (!runner.ok()) return runner.status().with_context(model_dir);
    s->runner_ = std::move(runner).value();
    if (options.enable_lora) {
        PAGODA_ASSIGN_OR_RETURN(s->lora_, start_lora(*s->model_, options));
        s->runner_->set_lora_fetch(lora_fetch(*s->lora_));
        if (page_lora_adapters(options)) s->runner_->page_lora_adapters();
        s->config_.max_loras = options.max_loras;
    }
    auto engine = engine::Engine::create(s->config_, s->runner_for_engine(*s->runner_, options), options.observer);
    if (!engine.ok()) return engine.status().with_context(model_dir);
    s->engine_ = std::move(engine).value();
    return s;
}

}  // namespace pagoda::executor
