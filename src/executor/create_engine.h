// create_engine: a running Engine over a model directory on the CPU or CUDA backend. The returned ServingEngine owns
// the backend, the loaded model, the runner and the engine, and destroys them in the right order (the engine thread is
// shut down and joined before the model goes away).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "dist/node_group.h"
#include "engine/engine.h"
#include "engine/pipelined_runner.h"
#include "executor/lora_manager.h"
#include "executor/model_engine_runner.h"
#include "executor/tensor_parallel_runner.h"
#include "model/model.h"
#include "runtime/backend.h"

namespace pagoda::executor {

struct EngineOptions {
    // 0: chosen from the hardware and the model (engine_sizes.h: vLLM's defaults on a GPU, the model's whole context
    // when the memory holds it; 16 sequences, 2,048 tokens and at most 8,192 of context on the CPU), and logged.
    int32_t max_model_len = 0;
    int32_t max_num_seqs = 0;
    int32_t max_num_batched_tokens = 0;
    int32_t block_size = 16;
    // KV pool: num_kv_blocks when > 0; else as many blocks as fit in kv_cache_bytes, but no more than
    // max_num_seqs full-length sequences need. kv_cache_bytes 0: up to 4 GiB, and always one max_model_len
    // sequence. The pool must hold one max_model_len sequence (else create_engine fails saying so).
    int32_t num_kv_blocks = 0;
    size_t kv_cache_bytes = 0;
    // Hybrid models: prefix-cache state snapshots (-1: max_num_seqs). Slots = 2 * max_num_seqs + snapshots.
    int32_t max_state_snapshots = -1;
    bool enable_prefix_caching = true;
    bool priority_scheduling = false;
    // When a waiting request may start (engine/admission_policy.h); serve keeps the default, tests pick others.
    engine::AdmissionPolicy admission = engine::AdmissionPolicy::kReserveExpected;
    int32_t max_waiting_requests = 1024;
    int32_t max_unread_tokens = 8192;
    uint64_t seed = 0;    // seeds of requests that bring none are drawn from this
    int num_threads = 0;  // CPU backend threads (0: OpenMP's default)
    // Tensor-parallel ranks of the model, one thread each in this process (tensor_parallel_runner.h): CPU backends,
    // or GPUs 0..N-1 with NCCL when `device` puts the model on the GPU.
    int32_t tensor_parallel_size = 1;
    // --enable-expert-parallel: the ranks hold whole routed experts instead of a slice of each (MoE models).
    bool enable_expert_parallel = false;
    // "cpu", "cuda", or "auto" (cuda when a GPU is present and the CUDA backend runs every op the model needs).
    std::string device = "cpu";
    // CUDA: the fraction of the GPU's memory pagoda may fill; the KV pool gets what the weights and the activations
    // of a warm-up step of the largest shape leave of it, less 256 MiB for CUDA graphs (unless num_kv_blocks or
    // kv_cache_bytes is given). Tensor-parallel ranks estimate the activations instead.
    double gpu_memory_utilization = 0.9;
    // CUDA: run every step eagerly instead of replaying decode steps as recorded CUDA graphs (vLLM's flag).
    bool enforce_eager = false;
    // --async-scheduling (vLLM's flag): the engine schedules and builds step n+1 and hands out step n's tokens while
    // the model runs step n (engine/pipelined_runner.h), one rank or several.
    bool async_scheduling = false;
    // --quantization (model::LoadOptions::quantization): "" as config.json says, the checkpoint's quant_method
    // (checked), or "fp8" to quantize an unquantized checkpoint's projections at load; with tensor parallelism each
    // rank then cuts the quantized weights (not across nodes yet).
    std::string quantization;
    // --kv-cache-dtype and --calculate-kv-scales (model::LoadOptions): fp8 halves a GPU's KV bytes per token, so the
    // pool holds twice the tokens. Not with tensor parallelism yet.
    KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
    bool calculate_kv_scales = false;
    // --fp8-activations (model::LoadOptions::fp8_activations): W8A8 for fp8 checkpoints with dynamic activation scales
    // and --quantization fp8 (off: weight-only). Not across nodes yet.
    bool fp8_activations = false;
    // --load-format dummy (model::LoadOptions::dummy_weights): random weights for the config alone; one node only.
    bool dummy_weights = false;
    engine::StepObserver* observer = nullptr;  // optional, must outlive the ServingEngine

    // Multi-LoRA (--enable-lora; with tensor parallelism in one process or across nodes, whose other nodes read each
    // adapter from the directory node 0 names and are given the same three sizes): adapter slots on the device
    // (--max-loras), their largest rank (--max-lora-rank), adapters kept in host memory (--max-cpu-loras; 0:
    // max_loras), the adapters served from the start (--lora-modules name=path) and names an adapter may not take (the
    // model's).
    bool enable_lora = false;
    int32_t max_loras = 1;
    int32_t max_lora_rank = 16;
    int32_t max_cpu_loras = 0;
    std::vector<std::pair<std::string, std::string>> lora_modules;
    std::vector<std::string> lora_reserved_names;
    // Adapters paged in beside the steps (executor/lora_pager.h; within one process: with several nodes the steps
    // install them); PAGODA_LORA_PAGING=0 in the environment turns it off too.
    bool page_lora_adapters = true;

    // Tensor parallelism across nodes (docs/deployment-multinode.md): one process per node, tensor_parallel_size /
    // nnodes ranks each. create_engine runs node 0 (it listens on dist_init_addr's port and schedules); the other
    // nodes run run_tensor_parallel_worker (tensor_parallel_worker.h). Sizes (KV blocks, max_model_len, ...) are
    // node 0's; the other nodes' are ignored.
    int32_t nnodes = 1;
    int32_t node_rank = 0;
    std::string dist_init_addr;    // node 0's HOST:PORT as the other nodes reach it
    int32_t dist_timeout_s = 300;  // to connect, for every node to arrive, and for each node's answer to a step
    // Called (on the engine thread) when a group of several nodes breaks: every later step fails.
    std::function<void(const Status&)> on_node_group_failure;
    // Node 0: set to true to stop waiting for the other nodes to connect (create_engine then fails); may be null.
    const std::atomic<bool>* cancel_node_wait = nullptr;
};

class ServingEngine {
  public:
    ~ServingEngine();  // shuts the engine down first
    ServingEngine(const ServingEngine&) = delete;
    ServingEngine& operator=(const ServingEngine&) = delete;

    engine::Engine& engine() { return *engine_; }
    const model::Model& model() const { return tp_runner_ ? tp_runner_->model() : *model_; }  // rank 0's
    const Backend& backend() const { return tp_runner_ ? tp_runner_->backend() : *backend_; }
    // What the engine runs with (sizes, EOS ids, generation_config.json defaults).
    const engine::EngineConfig& config() const { return config_; }
    // CUDA graphs recorded for decode steps and steps replayed from them so far (0 on the CPU, with enforce_eager,
    // or with several ranks).
    size_t recorded_cuda_graphs() const { return runner_ ? runner_->recorded_cuda_graphs() : 0; }
    size_t replayed_cuda_graphs() const { return runner_ ? runner_->replayed_cuda_graphs() : 0; }
    // Steps that reallocated scratch memory after the warm-up step (ModelEngineRunner::warm_up; GPU only, one rank).
    uint64_t scratch_growths_after_warm_up() const { return runner_ ? runner_->scratch_growths_after_warm_up() : 0; }
    // The adapters served (null without enable_lora).
    engine::LoraRegistry* lora() { return lora_.get(); }
    // What pages adapters in (rank 0's with several; null without LoRA, across nodes or with page_lora_adapters off).
    const LoraPager* lora_pager() const {
        return runner_ ? runner_->lora_pager() : tp_runner_ ? tp_runner_->lora_pager(0) : nullptr;
    }

  private:
    friend Result<std::unique_ptr<ServingEngine>> create_engine(const std::string&, const EngineOptions&);
    ServingEngine() = default;
    // What the engine drives: `runner`, or a PipelinedRunner over it with options.async_scheduling.
    engine::ModelRunner& runner_for_engine(engine::ModelRunner& runner, const EngineOptions& options);

    std::unique_ptr<Backend> backend_;
    std::unique_ptr<model::Model> model_;
    std::unique_ptr<LoraManager> lora_;  // outlives the runners, whose threads fetch adapters from it
    std::unique_ptr<ModelEngineRunner> runner_;
    std::unique_ptr<TensorParallelRunner> tp_runner_;     // instead of the runner and the two above with several ranks
    std::unique_ptr<engine::PipelinedRunner> pipelined_;  // async scheduling: runs the runner's steps; goes first
    engine::EngineConfig config_;
    std::unique_ptr<engine::Engine> engine_;
};

// The EngineConfig create_engine would use for `model` (exposed for tests and `pagoda inspect`-like reports). Sizes
// not given are chosen as on the CPU (with_sizes chooses them for a model on a GPU).
Result<engine::EngineConfig> engine_config_for(const model::Model& model, const EngineOptions& options);

// `options` with every size given: those left 0 chosen by choose_sizes (engine_sizes.h) from the model and, for a
// model on a GPU, the GPU's memory now (after the weights). `line` gets the log line saying what was chosen and why
// (empty when the user gave every size).
Result<EngineOptions> with_sizes(const model::Model& model, const EngineOptions& options, std::string* line);

// The node group of a multi-node engine (options.nnodes > 1), checked: node rank, tensor-parallel size a multiple
// of nnodes, HOST:PORT, the device every node must use, the model's fingerprint. Errors name the flag.
Result<NodeGroupOptions> node_group_options(const std::string& model_dir, const EngineOptions& options);

// Loads `model_dir` (config.json, generation_config.json, safetensors) on the chosen backend and starts the engine
// thread. With options.nnodes > 1 this is node 0: it waits for the other nodes, which load their ranks too. EOS ids:
// those of generation_config.json and config.json. Sampling defaults: generation_config.json's temperature, top_p,
// top_k, min_p, repetition_penalty (as vLLM; do_sample is ignored).
Result<std::unique_ptr<ServingEngine>> create_engine(const std::string& model_dir, const EngineOptions& options);

}  // namespace pagoda::executor
