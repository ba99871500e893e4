// NodeGroup: the rendezvous of the processes ("nodes") of one multi-node tensor-parallel group
// (docs/deployment-multinode.md). Node 0 listens on the --dist-init-addr port; nodes 1..M-1 connect to it, each
// with two connections: a step channel (node 0's schedule out, each node's status back) and a collective channel
// (the CPU communicator's data; tcp_communicator.h), so that the two never interleave. A handshake on every
// connection checks that the nodes agree on what they run — protocol version, number of nodes, tensor-parallel
// size, device and the model's config.json — and a node that differs makes both sides fail with a message that
// says what differs.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "dist/tcp_channel.h"

namespace pagoda {

struct NodeGroupOptions {
    int nnodes = 1;
    int node_rank = 0;
    HostPort address;  // node 0's, as the other nodes reach it (node 0 listens on its port, every interface)
    int tensor_parallel_size = 1;
    std::string device = "cpu";      // "cpu" or "cuda": every node must run the same
    uint64_t model_fingerprint = 0;  // of the model's config.json (model_fingerprint below)
    // What shapes each rank's weights and caches: every node must load alike (the serve flags' values).
    bool expert_parallel = false;         // --enable-expert-parallel
    std::string quantization;             // "fp8" when --quantization fp8 quantizes a bf16 checkpoint at load, else ""
    std::string kv_cache_dtype = "auto";  // --kv-cache-dtype, as kv_cache_dtype_name spells it
    bool calculate_kv_scales = false;     // --calculate-kv-scales
    // --enable-lora's adapter slots (--max-loras; 0: LoRA off) and their largest rank (--max-lora-rank): every node
    // makes the same table, and runs the adapters node 0 names (NodeMessage::kLoraAdapter).
    int32_t max_loras = 0;
    int64_t max_lora_rank = 0;
    Timeout timeout{300'000};  // for connecting, for all nodes to arrive, and for each answer of a node
    // Node 0: when set and it turns true (e.g. SIGTERM while waiting), accept_all stops waiting within a second
    // (it looks between connections, and while it waits for a connection's hello).
    const std::atomic<bool>* cancel = nullptr;
};

// A fingerprint of a model directory's config.json bytes (FNV-1a 64), for the handshake: nodes that load different
// models, or the same model with another configuration, must not form a group.
Result<uint64_t> model_fingerprint(const std::string& model_dir);

class NodeGroup {
  public:
    // Node 0, first half: listens (options.address.port; 0 picks a free port, which port() tells).
    static Result<std::unique_ptr<NodeGroup>> listen(const NodeGroupOptions& options);
    // Node 0, second half: waits (up to options.timeout) until every other node has connected both channels and
    // passed the handshake. Connections that are not pagoda nodes (a port scanner, a health check) are dropped. A
    // node that connects again after its earlier connection closed (it was restarted) takes that connection's place.
    Status accept_all();
    // Nodes 1..M-1: connects both channels to node 0 (retrying until options.timeout) and passes the handshake.
    static Result<std::unique_ptr<NodeGroup>> connect(const NodeGroupOptions& options);

    const NodeGroupOptions& options() const { return options_; }
    int nnodes() const { return options_.nnodes; }
    int node_rank() const { return options_.node_rank; }
    // Node 0's port (on node 0 the one it listens on). Set once by listen or connect, so that another thread may
    // read it while accept_all runs.
    uint16_t port() const { return options_.address.port; }

    // The step channel to node `node`: on node 0 nodes 1..M-1, on the other nodes only 0.
    TcpChannel& steps(int node);
    // The collective channels, indexed like steps() (on node 0 element n - 1 is node n; elsewhere one, to node 0),
    // handed to the CPU communicator once.
    std::vector<TcpChannel> take_collective_channels();
    // Closes every channel (and node 0's listener): the other nodes see the group end at their next receive.
    void close();

  private:
    explicit NodeGroup(const NodeGroupOptions& options) : options_(options) {}
    std::vector<int> missing_nodes() const;
    bool cancelled() const { return options_.cancel != nullptr && options_.cancel->load(); }
    // The handshake of one new connection; an error when the group cannot form (a node differs).
    Status admit(TcpChannel c, const Deadline& deadline);

    NodeGroupOptions options_;
    TcpListener listener_;
    std::vector<TcpChannel> steps_;        // node 0: [node - 1]; elsewhere [0]
    std::vector<TcpChannel> collectives_;  // the same indexing
};

}  // namespace pagoda
