#include "executor/tensor_parallel_runner.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <type_traits>

#include "common/check.h"
#include "common/log.h"
#include "dist/nccl_communicator.h"
#include "dist/node_messages.h"
#include "dist/step_codec.h"
#include "runtime/cuda_backend.h"

namespace pagoda::executor {

using dist::encode_pool_sizes;
using dist::encode_step;
using dist::NodeMessage;
using dist::PoolSizes;
using dist::recv_message;
using dist::recv_status;
using dist::send_message;
using dist::send_status;

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

// One CUDA backend per GPU 0..count-1 of this process, with the streams NCCL orders its collectives on.
struct GpuRanks {
    std::vector<std::unique_ptr<Backend>> backends;
    std::vector<int> devices;
    std::vector<void*> streams;
};
Result<GpuRanks> make_gpu_ranks(int count, int first_rank, int world_size) {
    GpuRanks g;
    for (int d = 0; d < count; ++d) {
        CudaBackendOptions backend_options;
        backend_options.device = d;
        auto backend = make_cuda_backend(backend_options);
        if (!backend.ok())
            return backend.status().with_context(rank_context(first_rank + d, world_size) + " (GPU " +
                                                 std::to_string(d) + ")");
        g.devices.push_back(d);
        g.streams.push_back(cuda_stream_handle(**backend));
        g.backends.push_back(std::move(backend).value());
    }
    return g;
}

int cpu_threads(int num_threads) {
    return num_threads > 0 ? num_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// The NCCL id, agreed so that either every node joins the NCCL group or none does: ncclCommInitRank has no timeout,
// and a node that never joins (too few GPUs, a bad device) would leave the others waiting in it. Node 0 makes the
// id and sends it to every node; each answers whether its GPUs are `ready`; node 0 then sends all of them one
// verdict — go (ok), or the first failure, its own included — and only on go does anyone join.
Result<NcclUniqueId> agree_on_nccl_id(NodeGroup& group, const Status& ready) {
    const Timeout timeout = group.options().timeout;
    NcclUniqueId id{};
    std::vector<std::byte> payload;
    if (group.node_rank() != 0) {
        PAGODA_RETURN_IF_ERROR(recv_message(group.steps(0), NodeMessage::kNcclId, payload, timeout));
        if (payload.size() != id.size())
            return Status::error("the NCCL id from node 0 has " + std::to_string(payload.size()) + " bytes, not " +
                                 std::to_string(id.size()));
        std::memcpy(id.data(), payload.data(), id.size());
        PAGODA_RETURN_IF_ERROR(send_status(group.steps(0), ready, timeout));
        PAGODA_RETURN_IF_ERROR(ready);
        PAGODA_RETURN_IF_ERROR(recv_status(group.steps(0), payload, timeout).with_context("node 0's verdict"));
        return id;
    }
    Status verdict = ready;
    if (verdict.ok()) {
        auto made = make_nccl_unique_id();
        if (made.ok()) id = *made;
        verdict = made.status();
    }
    // The id goes out even after a failure here, so that every node reaches the verdict instead of a timeout.
    for (int n = 1; n < group.nnodes(); ++n)
        PAGODA_RETURN_IF_ERROR(
            send_message(group.steps(n), NodeMessage::kNcclId, std::as_bytes(std::span(id)), timeout));
    for (int n = 1; n < group.nnodes(); ++n) {
        const Status answer =
            recv_status(group.steps(n), payload, timeout).with_context("node " + std::to_string(n) + "'s GPUs");
        if (verdict.ok()) verdict = answer;
    }
    for (int n = 1; n < group.nnodes(); ++n)
        PAGODA_RETURN_IF_ERROR(send_status(group.steps(n), verdict, timeout));
    PAGODA_RETURN_IF_ERROR(verdict);
    return id;
}

}  // namespace

Result<std::unique_ptr<TensorParallelRunner>> TensorParallelRunner::load_cpu(const std::string& model_dir, int size,
                                                                             int num_threads,
                                                                             const model::LoadOptions& load) {
    PAGODA_RETURN_IF_ERROR(check_size(size));
    RankThreadsOptions threads;
    threads.size = size;
    threads.cpu_threads_per_rank = std::max(1, cpu_threads(num_threads) / size);

    std::vector<std::unique_ptr<Backend>> backends;
    for (int r = 0; r < size; ++r) {
        CpuBackendOptions backend_options;
        backend_options.num_threads = threads.cpu_threads_per_rank;
        backends.push_back(make_cpu_backend(backend_options));
    }
    return load_ranks(model_dir, std::move(backends), make_cpu_communicators(size), threads, load);
}

Result<std::unique_ptr<TensorParallelRunner>> TensorParallelRunner::load_cuda(const std::string& model_dir, int size,
                                                                              const model::LoadOptions& load) {
    PAGODA_RETURN_IF_ERROR(check_size(size));
    PAGODA_RETURN_IF_ERROR(check_gpus_for(size));
    PAGODA_ASSIGN_OR_RETURN(GpuRanks gpus, make_gpu_ranks(size, 0, size));
    // NCCL orders each rank's collectives on that rank's backend stream, behind the kernels that produce their input.
    auto comms = make_nccl_communicators(gpus.devices, gpus.streams);
    if (!comms.ok()) return comms.status().with_context("tensor parallelism over " + std::to_string(size) + " GPUs");
    RankThreadsOptions threads;
    threads.size = size;  // no OpenMP setting: a GPU rank's thread launches kernels, it runs no CPU ops
    return load_ranks(model_dir, std::move(gpus.backends), std::move(comms).value(), threads, load);
}

Status TensorParallelRunner::check_node_layout(int tensor_parallel_size, int nnodes, const std::string& device) {
    if (nnodes < 2 || tensor_parallel_size < nnodes || tensor_parallel_size % nnodes != 0) {
        return Status::error("--tensor-parallel-size " + std::to_string(tensor_parallel_size) +
                             " is not a multiple of --nnodes " + std::to_string(nnodes) +
                             " (every node runs tensor-parallel-size / nnodes ranks)");
    }
    if (device == "cpu" && tensor_parallel_size != nnodes) {  // the TCP communicator joins one rank per process
        return Status::error(
            "on the CPU, tensor parallelism across nodes runs one rank per node: "
            "--tensor-parallel-size (" +
            std::to_string(tensor_parallel_size) + ") must equal --nnodes (" + std::to_string(nnodes) + ")");
    }
    return ok_status();
}

Result<std::unique_ptr<TensorParallelRunner>> TensorParallelRunner::load_node(const std::string& model_dir,
                                                                              std::unique_ptr<NodeGroup> group,
                                                                              int num_threads) {
    const NodeGroupOptions& o = group->options();
    const int nnodes = o.nnodes, node = o.node_rank, world = o.tensor_parallel_size;
    PAGODA_RETURN_IF_ERROR(check_node_layout(world, nnodes, o.device));
    const int local = world / nnodes, first = node * local;
    std::vector<std::unique_ptr<Backend>> backends;
    std::vector<std::unique_ptr<Communicator>> comms;
    RankThreadsOptions threads;
    threads.size = local;
    TcpCommunicator* tcp = nullptr;
    if (o.device == "cpu") {
        threads.cpu_threads_per_rank = cpu_threads(num_threads);
        CpuBackendOptions backend_options;
        backend_options.num_threads = threads.cpu_threads_per_rank;
        backends.push_back(make_cpu_backend(backend_options));
        auto comm = std::make_unique<TcpCommunicator>(group->take_collective_channels(), node, nnodes, o.timeout);
        tcp = comm.get();
        comms.push_back(std::move(comm));
    } else {
        const Status usable = check_gpus_for(local);
        Result<GpuRanks> gpus = usable.ok() ? make_gpu_ranks(local, first, world) : Result<GpuRanks>(usable);
        auto id = agree_on_nccl_id(*group, gpus.status());
        if (!id.ok()) return id.status().with_context("node " + std::to_string(node) + " before joining NCCL");
        auto joined = make_nccl_communicators(*id, world, first, gpus->devices, gpus->streams);
        if (!joined.ok()) return joined.status().with_context("node " + std::to_string(node));
        backends = std::move(gpus->backends);
        comms = std::move(joined).value();
    }
    // Every node passed the handshake with node 0's load settings (NodeGroupOptions), so each rank loads alike.
    model::LoadOptions load;
    load.expert_parallel = o.expert_parallel;
    load.quantization = o.quantization;
    PAGODA_ASSIGN_OR_RETURN(load.kv_cache_dtype, parse_kv_cache_dtype(o.kv_cache_dtype));
    load.calculate_kv_scales = o.calculate_kv_scales;
    auto loaded = load_ranks(model_dir, std::move(backends), std::move(comms), threads, load);
    // Every node learns whether every node loaded: node 0 waits for the others' status, the others send theirs.
    Status status = loaded.status();
    if (node == 0) {
        std::vector<std::byte> reply;
        for (int n = 1; n < nnodes && status.ok(); ++n)
            status = recv_status(group->steps(n), reply, o.timeout)
                         .with_context("loading the model on node " + std::to_string(n));
    } else if (Status sent = send_status(group->steps(0), status, o.timeout); status.ok()) {
        status = sent;
    }
    if (!status.ok()) return status;
    std::unique_ptr<TensorParallelRunner> runner = std::move(loaded).value();
    runner->group_ = std::move(group);
    runner->tcp_ = tcp;
    return runner;
}

Result<std::unique_ptr<TensorParallelRunner>> TensorParallelRunner::load_ranks(
    const std::string& model_dir, std::vector<std::unique_ptr<Backend>> backends,
    std::vector<std::unique_ptr<Communicator>> comms, const RankThreadsOptions& threads,
    const model::LoadOptions& load) {
    const int size = threads.size;
    PAGODA_CHECK_MSG(static_cast<int>(backends.size()) == size && static_cast<int>(comms.size()) == size,
                     "TensorParallelRunner: one backend and one communicator per rank");
    PAGODA_CHECK_MSG(size >= 1, "TensorParallelRunner: at least one rank");
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
        auto model = model::Model::load(model_dir, *rank.backend, *rank.comm, load);
        if (!model.ok()) return model.status().with_context(rank_context(rank.comm->rank(), rank.comm->size()));
        rank.model = std::move(model).value();
    }
    tp->threads_ = std::make_unique<RankThreads>(threads);
    tp->outputs_.resize(static_cast<size_t>(size));
    return tp;
}

TensorParallelRunner::~TensorParallelRunner() {
    threads_.reset();  // join the rank threads before the ranks they run go away
    if (group_ && group_->node_rank() == 0) {
        if (started_ && group_failure_.ok()) {
            // The engine has stopped: the other nodes exit 0. One that is gone already changes nothing here.
            for (int n = 1; n < group_->nnodes(); ++n)
                (void)send_message(group_->steps(n), NodeMessage::kShutdown, {}, Timeout(5'000));
        } else {
            group_->close();  // never served (or broke): the other nodes see the group end and exit with an error
        }
    }
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

template <typename Step>
Status TensorParallelRunner::on_every_rank(Step&& step) {
    threads_->run([&](int r) {
        const auto i = static_cast<size_t>(r);
        if constexpr (std::is_same_v<decltype(step(*ranks_[i].runner)), engine::StepOutput>) {
            outputs_[i] = step(*ranks_[i].runner);
        } else {
            outputs_[i].status = step(*ranks_[i].runner);
        }
    });
    // A lost peer first: the local ranks' errors may only follow from it.
    PAGODA_RETURN_IF_ERROR(collective_status());
    return first_rank_error();
}

Status TensorParallelRunner::enable_lora(int32_t max_loras, int64_t max_rank) {
    for (Rank& rank : ranks_)
        PAGODA_RETURN_IF_ERROR(
            rank.model->enable_lora(max_loras, max_rank).with_context(rank_context(rank.comm->rank(), size())));
    return ok_status();
}

void TensorParallelRunner::set_lora_fetch(const model::LoraFetch& fetch) {
    for (Rank& rank : ranks_) {
        PAGODA_CHECK_MSG(rank.runner != nullptr, "set_lora_fetch before start");
        rank.runner->set_lora_fetch(fetch);
    }
}

void TensorParallelRunner::page_lora_adapters() {
    PAGODA_CHECK_MSG(group_ == nullptr, "adapters are paged in within one process only");
    for (Rank& rank : ranks_)
        rank.runner->page_lora_adapters();
}

bool TensorParallelRunner::lora_ready(int32_t id) {
    bool ready = true;
    for (Rank& rank : ranks_)
        ready = rank.runner->lora_ready(id) && ready;  // every rank asked: each starts its own paging
    return ready;
}

void TensorParallelRunner::lora_in_use(std::span<const int32_t> ids) {
    for (Rank& rank : ranks_)
        rank.runner->lora_in_use(ids);
}

void TensorParallelRunner::use_node_adapters(int32_t max_cpu) {
    node_adapters_ = std::make_unique<NodeLoraCache>(model(), max_cpu);
    set_lora_fetch([cache = node_adapters_.get()](int32_t id) { return cache->weights(id); });
}

Status TensorParallelRunner::add_node_adapter(int32_t id, const std::string& path) {
    if (!node_adapters_)
        return Status::error("node 0 named a LoRA adapter, and this node was started without --enable-lora");
    return node_adapters_->add(id, path);
}

Status TensorParallelRunner::announce_adapters(const ForwardBatch& batch) {
    for (int32_t id : batch.lora_ids) {
        if (id == 0 || std::binary_search(announced_adapters_.begin(), announced_adapters_.end(), id)) continue;
        if (!lora_path_of_)
            return Status::error("a step uses LoRA adapter " + std::to_string(id) +
                                 " but node 0 has no adapter directories to name to the other nodes");
        PAGODA_ASSIGN_OR_RETURN(const std::string path, lora_path_of_(id));
        dist::encode_lora_adapter(id, path, step_bytes_);
        const Timeout timeout = group_->options().timeout;
        for (int n = 1; n < group_->nnodes(); ++n)
            PAGODA_RETURN_IF_ERROR(send_message(group_->steps(n), NodeMessage::kLoraAdapter, step_bytes_, timeout));
        for (int n = 1; n < group_->nnodes(); ++n)
            PAGODA_RETURN_IF_ERROR(
                recv_status(group_->steps(n), reply_bytes_, timeout)
                    .with_context("LoRA adapter " + std::to_string(id) + " on node " + std::to_string(n)));
        announced_adapters_.insert(std::upper_bound(announced_adapters_.begin(), announced_adapters_.end(), id), id);
    }
    return ok_status();
}

Status TensorParallelRunner::start(const engine::EngineConfig& config) {
    const bool leads_nodes = group_ && group_->node_rank() == 0;
    if (leads_nodes) {  // the other nodes make their pools while this one makes its own
        encode_pool_sizes(PoolSizes::of(config), step_bytes_);
        for (int n = 1; n < group_->nnodes(); ++n) {
            if (Status s =
                    send_message(group_->steps(n), NodeMessage::kPoolSizes, step_bytes_, group_->options().timeout);
                !s.ok()) {
                break_group(s);
                return s;
            }
        }
    }
    Status status;
    for (size_t r = 0; r < ranks_.size() && status.ok(); ++r) {
        ranks_[r].backend->bind_thread();  // the pools and the device sampler are made on the rank's device
        // No CUDA graphs for ranks yet: a recorded step would hold the NCCL collectives, not validated across ranks.
        auto runner = ModelEngineRunner::create(*ranks_[r].model, config, /*cuda_graphs=*/false);
        if (!runner.ok()) {
            status = runner.status().with_context(rank_context(ranks_[r].comm->rank(), ranks_[r].comm->size()));
        } else {
            ranks_[r].runner = std::move(runner).value();
        }
    }
    // GPU ranks of one process run the warm-up step together (its forward has every step's collectives), so that no
    // later step allocates device memory (ModelEngineRunner::warm_up). Their pools were sized before, from an
    // estimate of the activations; a warm-up that does not fit fails here. Not across nodes yet: a node whose pools
    // failed would leave the others waiting in the warm-up's NCCL collectives, so that needs a second exchange of
    // statuses first.
    if (status.ok() && !group_ && ranks_[0].backend->device().kind != DeviceKind::Host) {
        status = on_every_rank([&](ModelEngineRunner& rank) { return rank.warm_up(config); });
    }
    if (leads_nodes) {
        for (int n = 1; n < group_->nnodes() && status.ok(); ++n)
            status = recv_status(group_->steps(n), reply_bytes_, group_->options().timeout)
                         .with_context("making the pools on node " + std::to_string(n));
        if (!status.ok()) break_group(status);
    }
    started_ = status.ok();
    return status;
}

void TensorParallelRunner::break_group(const Status& error) {
    if (!group_failure_.ok()) return;
    group_failure_ = error.with_context("the tensor-parallel group of " + std::to_string(group_->nnodes()) +
                                        " nodes has failed and was closed (restart every node)");
    PAGODA_LOG_ERROR(group_failure_.message());
    if (tcp_) tcp_->close();
    group_->close();
    if (on_failure_) on_failure_(group_failure_);
}

Status TensorParallelRunner::execute_with_nodes(const engine::StepInput& input) {
    const Timeout timeout = group_->options().timeout;
    encode_step(input, step_bytes_);
    for (int n = 1; n < group_->nnodes(); ++n)
        PAGODA_RETURN_IF_ERROR(send_message(group_->steps(n), NodeMessage::kStep, step_bytes_, timeout));
    // A local error means the other nodes may wait in a collective this node will not join: the caller closes the
    // group.
    PAGODA_RETURN_IF_ERROR(on_every_rank([&](ModelEngineRunner& rank) { return rank.execute(input); }));
    for (int n = 1; n < group_->nnodes(); ++n)
        PAGODA_RETURN_IF_ERROR(recv_status(group_->steps(n), reply_bytes_, timeout));
    return ok_status();
}

namespace {
engine::StepOutput failed_step(Status status) {
    engine::StepOutput out;
    out.status = std::move(status);
    return out;
}
}  // namespace

engine::StepOutput TensorParallelRunner::execute(const engine::StepInput& input) {
    if (!ranks_[0].runner) return failed_step(Status::error("TensorParallelRunner::start was not called"));
    if (group_) {
        if (!group_failure_.ok()) return failed_step(group_failure_);
        // An adapter a node cannot read fails this step only: no node has run any of it. (A lost node fails the next
        // send again, and that breaks the group.)
        if (Status s = announce_adapters(input.batch); !s.ok()) return failed_step(s);
        if (Status s = execute_with_nodes(input); !s.ok()) {
            break_group(s);
            return failed_step(group_failure_);
        }
        return outputs_[0];
    }
    // Each rank's ModelEngineRunner::execute binds its backend to the thread that runs it (the GPU's current device).
    if (Status s = on_every_rank([&](ModelEngineRunner& rank) { return rank.execute(input); }); !s.ok())
        return failed_step(s);
    return outputs_[0];
}

Status TensorParallelRunner::forward_only(const engine::StepInput& input) {
    if (!ranks_[0].runner) return Status::error("TensorParallelRunner::start was not called");
    return on_every_rank([&](ModelEngineRunner& rank) { return rank.forward_only(input); });
}

Status TensorParallelRunner::first_rank_error() const {
    for (size_t r = 0; r < ranks_.size(); ++r) {
        const Status& s = outputs_[r].status;
        if (!s.ok()) return s.with_context(rank_context(ranks_[r].comm->rank(), ranks_[r].comm->size()));
    }
    return ok_status();
}

}  // namespace pagoda::executor
