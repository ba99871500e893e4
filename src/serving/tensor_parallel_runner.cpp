#include "serving/tensor_parallel_runner.h"

#include <algorithm>
#include <thread>

#include "common/check.h"
#include "runtime/cuda_backend.h"
#include "runtime/nccl_communicator.h"

namespace pagoda::serving {

namespace {

Status check_size(int size) {
    if (size < 1) return Status::error("the tensor-parallel size must be at least 1, got " + std::to_string(size));
    return ok_status();
}

std::string rank_context(int rank, int size) {
    return "tensor-parallel rank " + std::to_string(rank) + " of " + std::to_string(size);
}

// Why `size` GPU ranks cannot run in this process, or ok. Checked before any device is touched, so that the answer
// is a message, never a half-built group.
Status check_gpus_for(int size) {
    if (!cuda_compiled())
        return Status::error("tensor parallelism on GPUs: this pagoda was built without CUDA; use --device cpu");
    const int gpus = cuda_device_count();
    if (size > gpus) {
        return Status::error("tensor parallelism on GPUs: -tp " + std::to_string(size) + " needs " +
                             std::to_string(size) + " GPUs (one per rank) but " + std::to_string(gpus) +
                             " are visible (CUDA_VISIBLE_DEVICES chooses them); lower -tp or use --device cpu");
    }
    if (!nccl_compiled()) {
        return Status::error(
            "tensor parallelism on GPUs needs NCCL, and this pagoda was built without it (install "
            "NCCL and configure again); use --device cpu");
    }
    return ok_status();
}

}  // namespace

Result<std::unique_ptr<TensorParallelRunner>> TensorParallelRunner::load_cpu(const std::string& model_dir, int size,
                                                                             int num_threads) {
    PAGODA_RETURN_IF_ERROR(check_size(size));
    const int total =
        num_threads > 0 ? num_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    RankThreadsOptions threads;
    threads.size = size;
    threads.cpu_threads_per_rank = std::max(1, total / size);

    std::vector<std::unique_ptr<Backend>> backends;
    for (int r = 0; r < size; ++r) {
        CpuBackendOptions backend_options;
        backend_options.num_threads = threads.cpu_threads_per_rank;
        backends.push_back(make_cpu_backend(backend_options));
    }
    return load_ranks(model_dir, std::move(backends), make_cpu_communicators(size), threads);
}

Result<std::unique_ptr<TensorParallelRunner>> TensorParallelRunner::load_cuda(const std::string& model_dir, int size) {
    PAGODA_RETURN_IF_ERROR(check_size(size));
    PAGODA_RETURN_IF_ERROR(check_gpus_for(size));
    std::vector<std::unique_ptr<Backend>> backends;
    std::vector<int> devices;
    std::vector<void*> streams;
    for (int r = 0; r < size; ++r) {
        CudaBackendOptions backend_options;
        backend_options.device = r;
        auto backend = make_cuda_backend(backend_options);
        if (!backend.ok())
            return backend.status().with_context(rank_context(r, size) + " (GPU " + std::to_string(r) + ")");
        devices.push_back(r);
        streams.push_back(cuda_stream_handle(**backend));
        backends.push_back(std::move(backend).value());
    }
    // NCCL orders each rank's collectives on that rank's backend stream, behind the kernels that produce their input.
    auto comms = make_nccl_communicators(devices, streams);
    if (!comms.ok()) return comms.status().with_context("tensor parallelism over " + std::to_string(size) + " GPUs");
    RankThreadsOptions threads;
    threads.size = size;  // no OpenMP setting: a GPU rank's thread launches kernels, it runs no CPU ops
    return load_ranks(model_dir, std::move(backends), std::move(comms).value(), threads);
}

Result<std::unique_ptr<TensorParallelRunner>> TensorParallelRunner::load_ranks(
    const std::string& model_dir, std::vector<std::unique_ptr<Backend>> backends,
    std::vector<std::unique_ptr<Communicator>> comms, const RankThreadsOptions& threads) {
    const int size = threads.size;
    PAGODA_CHECK_MSG(static_cast<int>(backends.size()) == size && static_cast<int>(comms.size()) == size,
                     "TensorParallelRunner: one backend and one communicator per rank");
    // The ranks go into the runner before any model loads, so that a failed load tears the group down through the
    // destructor, each rank with its own device current.
    std::unique_ptr<TensorParallelRunner> tp(new TensorParallelRunner());
    for (int r = 0; r < size; ++r) {
        Rank rank;
        rank.backend = std::move(backends[static_cast<size_t>(r)]);
        rank.comm = std::move(comms[static_cast<size_t>(r)]);
        tp->ranks_.push_back(std::move(rank));
    }
    for (int r = 0; r < size; ++r) {
        Rank& rank = tp->ranks_[static_cast<size_t>(r)];
        // Loading allocates and copies on the rank's device; the calling thread loads every rank, one after another.
        rank.backend->bind_thread();
        auto model = model::Model::load(model_dir, *rank.backend, *rank.comm);
        if (!model.ok()) return model.status().with_context(rank_context(r, size));
        rank.model = std::move(model).value();
    }
    tp->threads_ = std::make_unique<RankThreads>(threads);
    tp->outputs_.resize(static_cast<size_t>(size));
    return tp;
}

TensorParallelRunner::~TensorParallelRunner() {
    threads_.reset();  // join the rank threads before the ranks they run go away
    // Pools, scratch, cuBLASLt handles and streams are freed on their own GPU: select it for each rank in turn, and
    // free what depends on the backend (runner, model, communicator) before the backend itself.
    for (Rank& rank : ranks_) {
        if (rank.backend) rank.backend->bind_thread();
        rank.runner.reset();
        rank.model.reset();
        rank.comm.reset();
        rank.backend.reset();
    }
}

Status TensorParallelRunner::start(const engine::EngineConfig& config) {
    for (size_t r = 0; r < ranks_.size(); ++r) {
        ranks_[r].backend->bind_thread();  // the pools and the device sampler are made on the rank's device
        // No CUDA graphs for ranks yet: a recorded step would hold the NCCL collectives, not validated across ranks.
        auto runner = ModelEngineRunner::create(*ranks_[r].model, config, /*cuda_graphs=*/false);
        if (!runner.ok()) return runner.status().with_context("tensor-parallel rank " + std::to_string(r));
        ranks_[r].runner = std::move(runner).value();
    }
    return ok_status();
}

engine::StepOutput TensorParallelRunner::execute(const engine::StepInput& input) {
    if (!ranks_[0].runner) return {Status::error("TensorParallelRunner::start was not called"), {}, {}};
    // Each rank's ModelEngineRunner::execute binds its backend to the thread that runs it (the GPU's current device).
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
