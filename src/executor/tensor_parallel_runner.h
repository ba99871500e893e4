// TensorParallelRunner: the engine's ModelRunner over the N tensor-parallel ranks of one model inside this process,
// one thread per rank (docs/architecture.md, "Tensor parallelism"). The engine schedules once, on its own thread;
// execute() hands that step's StepInput to every rank — the ranks share the process's memory, so handing them the
// pointer is the broadcast of the schedule — and each rank runs its ModelEngineRunner (its shard of the weights,
// its KV pool holding its KV heads) while the ranks meet in the model's collectives. Every rank ends the step with
// the same logits; rank 0's go back to the engine. The ranks are CPU backends with an in-process communicator
// (load_cpu) or one GPU each with NCCL (load_cuda).
// Across nodes (load_node, docs/deployment-multinode.md) each process holds its node's ranks; on node 0, execute()
// also sends the step to the other nodes (step_codec.h) and waits for their status, and the other nodes run their
// ranks' forward passes from those messages (tensor_parallel_worker.h).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "dist/node_group.h"
#include "dist/rank_threads.h"
#include "dist/tcp_communicator.h"
#include "engine/engine.h"
#include "engine/model_runner.h"
#include "executor/lora_manager.h"
#include "executor/model_engine_runner.h"
#include "model/model.h"
#include "runtime/backend.h"
#include "runtime/communicator.h"

namespace pagoda::executor {

class TensorParallelRunner final : public engine::ModelRunner {
  public:
    // Loads `size` ranks of the model on CPU backends with an in-process CPU communicator group; the OpenMP threads
    // (num_threads in all, 0: one per core) are split evenly between the ranks. Errors name the rank and say why
    // the model cannot be split this way (e.g. heads not divisible by size).
    // `load` is what every rank loads with (expert_parallel; the other options are not supported with ranks yet).
    static Result<std::unique_ptr<TensorParallelRunner>> load_cpu(const std::string& model_dir, int size,
                                                                  int num_threads, const model::LoadOptions& load = {});
    // Loads `size` ranks on GPUs 0..size-1, rank r on GPU r, with NCCL communicators on the backends' streams. An
    // error (not an abort) when the binary lacks CUDA or NCCL or fewer than `size` GPUs are visible; model errors
    // name the rank as load_cpu's do.
    static Result<std::unique_ptr<TensorParallelRunner>> load_cuda(const std::string& model_dir, int size,
                                                                   const model::LoadOptions& load = {});
    // This node's ranks of a group over group->nnodes() nodes (formed: accept_all or connect done): G =
    // tensor_parallel_size / nnodes ranks, global ranks node_rank * G .. + G - 1. On the CPU one rank per node
    // (G = 1) with a TcpCommunicator over the group's collective channels and `num_threads` OpenMP threads; on GPUs
    // G GPUs (0..G-1 of this host) with NCCL, node 0 handing its unique id to the others. Returns once every node has
    // loaded (node 0 waits for the others' status; the others report theirs), so that a node that cannot load makes
    // node 0's load fail with its reason. Expert parallelism is the group's (NodeGroupOptions::expert_parallel).
    static Result<std::unique_ptr<TensorParallelRunner>> load_node(const std::string& model_dir,
                                                                   std::unique_ptr<NodeGroup> group, int num_threads);
    // Why `tensor_parallel_size` ranks cannot spread over `nnodes` (>= 2) nodes on `device` ("cpu" or "cuda"), or
    // ok: the size must be a multiple of nnodes, and on the CPU equal to it.
    static Status check_node_layout(int tensor_parallel_size, int nnodes, const std::string& device);
    ~TensorParallelRunner() override;  // node 0 tells the other nodes to shut down

    // Creates each rank's pools for `config` (the same number of blocks on every rank); once, before execute(). On
    // node 0 of several nodes it sends the pool sizes to the other nodes first and returns their first error.
    Status start(const engine::EngineConfig& config);

    // Multi-LoRA: enable_lora gives every rank's model its adapter table (before start()); after start(),
    // set_lora_fetch gives every rank's runner the adapters, which each rank cuts to its own share as its projections
    // are cut (model/lora_table.h). Across nodes, node 0 also tells the others where each adapter lies before the
    // first step that uses it (set_lora_paths: its LoraManager's directories), and they read it themselves
    // (use_node_adapters, then add_node_adapter for each one named).
    Status enable_lora(int32_t max_loras, int64_t max_rank);
    void set_lora_fetch(const model::LoraFetch& fetch);
    // Within one process, after set_lora_fetch: every rank pages adapters in beside the steps (executor/lora_pager.h),
    // and an adapter is ready once it is on every rank. Across nodes the steps install them (the other nodes' ranks
    // would stop the group for their installs anyway).
    void page_lora_adapters();
    bool lora_ready(int32_t id) override;
    void lora_in_use(std::span<const int32_t> ids) override;
    // Rank `r`'s pager (null when adapters are not paged).
    const LoraPager* lora_pager(int r) const { return ranks_[static_cast<size_t>(r)].runner->lora_pager(); }
    void set_lora_paths(std::function<Result<std::string>(int32_t id)> path_of) { lora_path_of_ = std::move(path_of); }
    // Nodes other than node 0, after start(): the ranks fetch the adapters node 0 names, up to `max_cpu` kept in host
    // memory.
    void use_node_adapters(int32_t max_cpu);
    Status add_node_adapter(int32_t id, const std::string& path);

    int size() const { return static_cast<int>(ranks_.size()); }
    // Rank 0's model and backend: the spec, the whole vocabulary and the generation defaults are the same on all.
    const model::Model& model() const { return *ranks_[0].model; }
    const Backend& backend() const { return *ranks_[0].backend; }

    int32_t vocab_size() const override { return static_cast<int32_t>(model().vocab_size()); }
    // Runs the step on every rank at once; the first rank's error, if any, is the step's. Node 0 of several nodes:
    // the step also goes to the other nodes, and their first error (or a lost connection) is the step's. After such
    // an error the ranks may be out of step, so the group is closed (the other nodes exit) and every later step
    // fails with the first error: restart all nodes.
    engine::StepOutput execute(const engine::StepInput& input) override;

    // Nodes other than node 0: the step's forward pass on this node's ranks, without sampling.
    Status forward_only(const engine::StepInput& input);
    // The node group (null within one process); its step channels carry this runner's messages.
    NodeGroup* node_group() { return group_.get(); }
    // Called once when the group breaks (e.g. to report the server unhealthy): on the thread that runs steps (the
    // engine's, or the PipelinedRunner's worker with async scheduling), or on the loading thread when it breaks in
    // start().
    void on_group_failure(std::function<void(const Status&)> callback) { on_failure_ = std::move(callback); }

  private:
    struct Rank {
        std::unique_ptr<Backend> backend;
        std::unique_ptr<Communicator> comm;
        std::unique_ptr<model::Model> model;
        std::unique_ptr<ModelEngineRunner> runner;
    };
    TensorParallelRunner() = default;
    // What load_cpu and load_cuda share: one backend and one communicator per rank in, the ranks' models loaded.
    static Result<std::unique_ptr<TensorParallelRunner>> load_ranks(const std::string& model_dir,
                                                                    std::vector<std::unique_ptr<Backend>> backends,
                                                                    std::vector<std::unique_ptr<Communicator>> comms,
                                                                    const RankThreadsOptions& threads,
                                                                    const model::LoadOptions& load);

    // Node 0 of several nodes: sends the step to every other node, runs the local ranks, collects the statuses.
    Status execute_with_nodes(const engine::StepInput& input);
    // Node 0: names to every other node each adapter of the step it has not named before, and waits for their
    // statuses.
    Status announce_adapters(const ForwardBatch& batch);
    // Runs step(rank's runner) on every rank at once, its StepOutput (or Status) into outputs_; then the first
    // error: the collectives' (a lost peer), else the first rank's.
    template <typename Step>
    Status on_every_rank(Step&& step);
    // The first error in outputs_, named by its global rank.
    Status first_rank_error() const;
    // The first error of the local ranks' collectives over TCP (ok elsewhere).
    Status collective_status() const { return tcp_ ? tcp_->status() : ok_status(); }
    // Records the group's first failure, closes every channel and tells on_failure_.
    void break_group(const Status& error);

    std::vector<Rank> ranks_;
    std::unique_ptr<RankThreads> threads_;
    std::vector<engine::StepOutput> outputs_;  // per rank, reused across steps

    std::unique_ptr<NodeGroup> group_;                          // several nodes only
    std::function<Result<std::string>(int32_t)> lora_path_of_;  // node 0 of several, with LoRA
    std::vector<int32_t> announced_adapters_;                   // node 0: ids the other nodes know (sorted)
    std::unique_ptr<NodeLoraCache> node_adapters_;              // the other nodes, with LoRA
    TcpCommunicator* tcp_ = nullptr;  // the CPU rank's communicator across nodes, owned by ranks_[0]
    Status group_failure_;            // ok until the group breaks
    bool started_ = false;            // start() succeeded: the other nodes wait for steps, then a shutdown
    std::function<void(const Status&)> on_failure_;
    std::vector<std::byte> step_bytes_;   // node 0: the encoded step, reused
    std::vector<std::byte> reply_bytes_;  // node 0: the other nodes' status messages, reused
};

}  // namespace pagoda::executor
