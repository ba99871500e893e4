// The worker loop of a node other than node 0: join, load, make the pools, then step after step until shutdown.
#include "executor/tensor_parallel_worker.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common/log.h"
#include "dist/node_messages.h"
#include "dist/step_codec.h"
#include "executor/tensor_parallel_runner.h"

namespace pagoda::executor {

using dist::decode_lora_adapter;
using dist::decode_pool_sizes;
using dist::decode_step;
using dist::DecodedStep;
using dist::max_message_bytes;
using dist::max_step_bytes;
using dist::node_message_name;
using dist::NodeMessage;
using dist::PoolSizes;
using dist::recv_message;
using dist::send_status;

namespace {

// Pool sizes from node 0, the pools made, the status sent back; the sizes bound the steps that follow.
Result<PoolSizes> start_pools(TensorParallelRunner& runner, TcpChannel& leader, Timeout timeout) {
    std::vector<std::byte> payload;
    // Node 0 sizes the pools after it has loaded too, which may take a while: no timeout, but a closed
    // connection ends the wait.
    PAGODA_RETURN_IF_ERROR(recv_message(leader, NodeMessage::kPoolSizes, payload, kForever));
    auto sizes = decode_pool_sizes(payload);
    Status started = sizes.ok() ? runner.start(sizes->to_config()) : sizes.status();
    Status sent = send_status(leader, started, timeout);
    PAGODA_RETURN_IF_ERROR(started);
    PAGODA_RETURN_IF_ERROR(sent);
    return *sizes;
}

// Steps until node 0's shutdown (ok) or the first failure.
Status run_steps(TensorParallelRunner& runner, TcpChannel& leader, const PoolSizes& sizes, Timeout timeout) {
    std::vector<std::byte> payload;
    DecodedStep step;
    const size_t max_bytes = std::max(max_step_bytes(sizes), max_message_bytes(NodeMessage::kLoraAdapter));
    for (;;) {
        uint32_t tag = 0;
        // An idle server sends no steps for as long as it likes: no timeout here.
        PAGODA_RETURN_IF_ERROR(
            leader.recv(tag, payload, max_bytes, kForever).with_context("waiting for the next step"));
        if (tag == static_cast<uint32_t>(NodeMessage::kShutdown)) return ok_status();
        if (tag == static_cast<uint32_t>(NodeMessage::kLoraAdapter)) {  // read before the step that uses it
            int32_t id = 0;
            std::string path;
            Status added = decode_lora_adapter(payload, id, path);
            if (added.ok()) added = runner.add_node_adapter(id, path);
            // A bad adapter fails node 0's step that needs it, not this node: it ran nothing.
            PAGODA_RETURN_IF_ERROR(send_status(leader, added, timeout));
            continue;
        }
        if (tag != static_cast<uint32_t>(NodeMessage::kStep)) {
            return Status::error(std::string("out of step with node 0: expected a step, got a ") +
                                 node_message_name(tag) + " message (tag " + std::to_string(tag) + ")");
        }
        Status status = decode_step(payload, sizes, step);
        if (status.ok()) status = runner.forward_only(step.input());
        Status sent = send_status(leader, status, timeout);
        // After a failed step the ranks may be out of step with the others': this node stops, node 0 closes the group.
        PAGODA_RETURN_IF_ERROR(status);
        PAGODA_RETURN_IF_ERROR(sent);
    }
}

}  // namespace

Status run_tensor_parallel_worker(const std::string& model_dir, const EngineOptions& options) {
    PAGODA_ASSIGN_OR_RETURN(const NodeGroupOptions group_options, node_group_options(model_dir, options));
    if (options.node_rank == 0) return Status::error("node 0 serves; run_tensor_parallel_worker is for nodes 1 and up");
    const int local = options.tensor_parallel_size / options.nnodes;
    const std::string me = "node " + std::to_string(options.node_rank) + " of " + std::to_string(options.nnodes);
    PAGODA_LOG_INFO(me + ": a worker of node 0 at " + group_options.address.to_string() + " (tensor-parallel ranks " +
                    std::to_string(options.node_rank * local) + ".." +
                    std::to_string(options.node_rank * local + local - 1) + " of " +
                    std::to_string(options.tensor_parallel_size) + " on " + group_options.device + "); connecting");
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<NodeGroup> group, NodeGroup::connect(group_options));
    PAGODA_LOG_INFO(me + ": joined; loading " + model_dir);
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<TensorParallelRunner> runner,
                            TensorParallelRunner::load_node(model_dir, std::move(group), options.num_threads));
    TcpChannel& leader = runner->node_group()->steps(0);
    // LoRA's adapter tables before the pools (node 0 sizes the KV pool after reserving its slots, and the hello made
    // sure both nodes were given the same --max-loras and --max-lora-rank).
    Status lora = options.enable_lora ? runner->enable_lora(options.max_loras, options.max_lora_rank) : ok_status();
    auto sizes = lora.ok() ? start_pools(*runner, leader, group_options.timeout) : Result<PoolSizes>(lora);
    if (!sizes.ok()) return sizes.status().with_context(me);
    if (options.enable_lora)
        runner->use_node_adapters(options.max_cpu_loras > 0 ? options.max_cpu_loras : options.max_loras);
    PAGODA_LOG_INFO(me + ": ready; running node 0's steps");
    PAGODA_RETURN_IF_ERROR(run_steps(*runner, leader, *sizes, group_options.timeout).with_context(me));
    PAGODA_LOG_INFO(me + ": node 0 shut the group down");
    return ok_status();
}

}  // namespace pagoda::executor
