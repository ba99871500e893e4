// TensorParallelRunner: the engine's ModelRunner over the N tensor-parallel ranks of one model inside this process,
// one thread per rank (docs/architecture.md, "Tensor parallelism"). The engine schedules once, on its own thread;
// execute() hands that step's StepInput to every rank — the ranks share the process's memory, so handing them the
// pointer is the broadcast of the schedule — and each rank runs its ModelEngineRunner (its shard of the weights,
// its KV pool holding its KV heads) while the ranks meet in the model's collectives. Every rank ends the step with
// the same logits; rank 0's go back to the engine. The ranks are CPU backends with an in-process communicator
// (load_cpu) or one GPU each with NCCL (load_cuda).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"
#include "engine/model_runner.h"
#include "model/model.h"
#include "runtime/backend.h"
#include "runtime/communicator.h"
#include "runtime/rank_threads.h"
#include "serving/model_engine_runner.h"

namespace pagoda::serving {

class TensorParallelRunner final : public engine::ModelRunner {
  public:
    // Loads `size` ranks of the model on CPU backends with an in-process CPU communicator group; the OpenMP threads
    // (num_threads in all, 0: one per core) are split evenly between the ranks. Errors name the rank and say why
    // the model cannot be split this way (e.g. heads not divisible by size).
    static Result<std::unique_ptr<TensorParallelRunner>> load_cpu(const std::string& model_dir, int size,
                                                                  int num_threads);
    // Loads `size` ranks on GPUs 0..size-1, rank r on GPU r, with NCCL communicators on the backends' streams. An
    // error (not an abort) when the binary lacks CUDA or NCCL or fewer than `size` GPUs are visible; model errors
    // name the rank as load_cpu's do.
    static Result<std::unique_ptr<TensorParallelRunner>> load_cuda(const std::string& model_dir, int size);
    ~TensorParallelRunner() override;

    // Creates each rank's pools for `config` (the same number of blocks on every rank); once, before execute().
    Status start(const engine::EngineConfig& config);

    int size() const { return static_cast<int>(ranks_.size()); }
    // Rank 0's model and backend: the spec, the whole vocabulary and the generation defaults are the same on all.
    const model::Model& model() const { return *ranks_[0].model; }
    const Backend& backend() const { return *ranks_[0].backend; }

    int32_t vocab_size() const override { return static_cast<int32_t>(model().vocab_size()); }
    // Runs the step on every rank at once; the first rank's error, if any, is the step's.
    engine::StepOutput execute(const engine::StepInput& input) override;

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
                                                                    const RankThreadsOptions& threads);

    std::vector<Rank> ranks_;
    std::unique_ptr<RankThreads> threads_;
    std::vector<engine::StepOutput> outputs_;  // per rank, reused across steps
};

}  // namespace pagoda::serving
