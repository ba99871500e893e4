#include "serving/tensor_parallel_runner.h"

#include <algorithm>
#include <thread>

namespace pagoda::serving {

Result<std::unique_ptr<TensorParallelRunner>> TensorParallelRunner::load_cpu(const std::string& model_dir, int size,
                                                                             int num_threads) {
    if (size < 1) return Status::error("the tensor-parallel size must be at least 1, got " + std::to_string(size));
    const int total =
        num_threads > 0 ? num_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    RankThreadsOptions threads;
    threads.size = size;
    threads.cpu_threads_per_rank = std::max(1, total / size);

    std::unique_ptr<TensorParallelRunner> tp(new TensorParallelRunner());
    std::vector<std::unique_ptr<Communicator>> comms = make_cpu_communicators(size);
    for (int r = 0; r < size; ++r) {
        Rank rank;
        CpuBackendOptions backend_options;
        backend_options.num_threads = threads.cpu_threads_per_rank;
        rank.backend = make_cpu_backend(backend_options);
        rank.comm = std::move(comms[static_cast<size_t>(r)]);
        auto model = model::Model::load(model_dir, *rank.backend, *rank.comm);
        if (!model.ok()) {
            return model.status().with_context("tensor-parallel rank " + std::to_string(r) + " of " +
                                               std::to_string(size));
        }
        rank.model = std::move(model).value();
        tp->ranks_.push_back(std::move(rank));
    }
    tp->threads_ = std::make_unique<RankThreads>(threads);
    tp->outputs_.resize(static_cast<size_t>(size));
    return tp;
}

TensorParallelRunner::~TensorParallelRunner() {
    threads_.reset();  // join the rank threads before the ranks they run go away
}

Status TensorParallelRunner::start(const engine::EngineConfig& config) {
    for (size_t r = 0; r < ranks_.size(); ++r) {
        auto runner = ModelEngineRunner::create(*ranks_[r].model, config);
        if (!runner.ok()) return runner.status().with_context("tensor-parallel rank " + std::to_string(r));
        ranks_[r].runner = std::move(runner).value();
    }
    return ok_status();
}

engine::StepOutput TensorParallelRunner::execute(const engine::StepInput& input) {
    if (!ranks_[0].runner) return {Status::error("TensorParallelRunner::start was not called"), {}, {}};
    threads_->run(
        [&](int r) { outputs_[static_cast<size_t>(r)] = ranks_[static_cast<size_t>(r)].runner->execute(input); });
    for (size_t r = 0; r < outputs_.size(); ++r) {
        if (!outputs_[r].status.ok()) {
            return {outputs_[r].status.with_context("tensor-parallel rank " + std::to_string(r)), {}, {}};
        }
    }
    return outputs_[0];
}

}  // namespace pagoda::serving
