// The rendezvous and handshake of a multi-node group: node 0 accepts, the other nodes connect, every connection
// starts with a hello (who the node is and what it runs) that node 0 answers with welcome or with the reason it
// refuses the node.
#include "dist/node_group.h"

#include <algorithm>
#include <chrono>

#include "common/check.h"
#include "common/file.h"
#include "common/log.h"
#include "dist/wire_format.h"

namespace pagoda {

namespace {

constexpr uint32_t kMagic = 0x41444750;  // "PGDA"
// Bump when a message between nodes changes (the handshake, the steps, the collectives): nodes of different
// versions then refuse each other instead of misreading each other.
// 2: the hello says whether expert parallelism is on; 3: and --quantization, --kv-cache-dtype, --calculate-kv-scales;
// 4: and --max-loras / --max-lora-rank (steps carry adapter ids, and adapters are announced: node_messages.h).
constexpr uint32_t kProtocolVersion = 4;

// Handshake frame tags (the only frames before the group is formed).
constexpr uint32_t kHelloTag = 0x4F4C4548;    // "HELO"
constexpr uint32_t kWelcomeTag = 0x4D4C4557;  // "WELM"
constexpr uint32_t kRefuseTag = 0x46455252;   // "RREF"

enum class Channel : uint32_t { kSteps = 0, kCollectives = 1 };

// A peer that connected must say hello within this time (or the time left, when shorter); one that does not is
// not a pagoda node and is dropped.
constexpr Timeout kHelloTimeout{10'000};
// A node writes its hello at once in one small frame: once its first bytes are here, the rest follows at once.
constexpr Timeout kRestOfHello{500};
constexpr size_t kMaxHandshakeBytes = 4096;
// How often accept_all looks at options.cancel (with kRestOfHello, it stops within a second).
constexpr Timeout kCancelPoll{250};

struct Hello {
    uint32_t magic = kMagic;
    uint32_t version = kProtocolVersion;
    int32_t nnodes = 0;
    int32_t node_rank = 0;
    int32_t tensor_parallel_size = 0;
    uint32_t channel = 0;
    uint64_t fingerprint = 0;
    std::string device;
    uint8_t expert_parallel = 0;
    std::string quantization;
    std::string kv_cache_dtype;
    uint8_t calculate_kv_scales = 0;
    int32_t max_loras = 0;
    int64_t max_lora_rank = 0;
};

void encode(const Hello& h, std::vector<std::byte>& out) {
    WireWriter w(out);
    w.put(h.magic);
    w.put(h.version);
    w.put(h.nnodes);
    w.put(h.node_rank);
    w.put(h.tensor_parallel_size);
    w.put(h.channel);
    w.put(h.fingerprint);
    w.put_string(h.device);
    w.put(h.expert_parallel);
    w.put_string(h.quantization);
    w.put_string(h.kv_cache_dtype);
    w.put(h.calculate_kv_scales);
    w.put(h.max_loras);
    w.put(h.max_lora_rank);
}

bool decode(std::span<const std::byte> in, Hello& h) {
    WireReader r(in);
    if (!r.get(h.magic) || h.magic != kMagic) return false;
    if (!r.get(h.version)) return false;
    // The rest (node_rank too) may differ in another version: the caller reports the version, naming no rank.
    if (h.version != kProtocolVersion) return true;
    return r.get(h.nnodes) && r.get(h.node_rank) && r.get(h.tensor_parallel_size) && r.get(h.channel) &&
           r.get(h.fingerprint) && r.get_string(h.device, 64) && r.get(h.expert_parallel) &&
           r.get_string(h.quantization, 64) && r.get_string(h.kv_cache_dtype, 64) && r.get(h.calculate_kv_scales) &&
           r.get(h.max_loras) && r.get(h.max_lora_rank) && r.at_end();
}

// What differs between a node's hello and node 0's options, or "" when it may join.
std::string differences(const Hello& h, const NodeGroupOptions& o) {
    std::string out;
    auto add = [&](const std::string& what) { out += (out.empty() ? "" : "; ") + what; };
    if (h.version != kProtocolVersion) {
        add("protocol version " + std::to_string(h.version) + " (node 0: " + std::to_string(kProtocolVersion) +
            "; run the same pagoda build on every node)");
        return out;
    }
    if (h.nnodes != o.nnodes)
        add("--nnodes " + std::to_string(h.nnodes) + " (node 0: " + std::to_string(o.nnodes) + ")");
    if (h.tensor_parallel_size != o.tensor_parallel_size) {
        add("--tensor-parallel-size " + std::to_string(h.tensor_parallel_size) +
            " (node 0: " + std::to_string(o.tensor_parallel_size) + ")");
    }
    if (h.device != o.device) add("device " + h.device + " (node 0: " + o.device + ")");
    if (h.fingerprint != o.model_fingerprint)
        add("the model's config.json differs from node 0's (the nodes must load the same model)");
    if ((h.expert_parallel != 0) != o.expert_parallel) {
        add(std::string(h.expert_parallel ? "--enable-expert-parallel" : "no --enable-expert-parallel") +
            " (node 0: " + (o.expert_parallel ? "on" : "off") + ")");
    }
    auto flag = [](const std::string& name, const std::string& value) {
        return value.empty() ? "no " + name : name + " " + value;
    };
    if (h.quantization != o.quantization) {
        add(flag("--quantization", h.quantization) + " (node 0: " + flag("--quantization", o.quantization) + ")");
    }
    if (h.kv_cache_dtype != o.kv_cache_dtype)
        add("--kv-cache-dtype " + h.kv_cache_dtype + " (node 0: " + o.kv_cache_dtype + ")");
    if ((h.calculate_kv_scales != 0) != o.calculate_kv_scales) {
        add(std::string(h.calculate_kv_scales ? "--calculate-kv-scales" : "no --calculate-kv-scales") +
            " (node 0: " + (o.calculate_kv_scales ? "on" : "off") + ")");
    }
    auto lora = [](int32_t slots, int64_t rank) {
        return slots == 0
                   ? std::string("no --enable-lora")
                   : "--enable-lora --max-loras " + std::to_string(slots) + " --max-lora-rank " + std::to_string(rank);
    };
    if (h.max_loras != o.max_loras || (o.max_loras != 0 && h.max_lora_rank != o.max_lora_rank))
        add(lora(h.max_loras, h.max_lora_rank) + " (node 0: " + lora(o.max_loras, o.max_lora_rank) + ")");
    if (h.node_rank < 1 || h.node_rank >= o.nnodes) {
        add("--node-rank " + std::to_string(h.node_rank) + " is outside 1.." + std::to_string(o.nnodes - 1));
    }
    if (h.channel > static_cast<uint32_t>(Channel::kCollectives)) add("unknown channel " + std::to_string(h.channel));
    return out;
}

std::span<const std::byte> bytes_of(std::string_view s) {
    return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

std::string node_name(int rank) {
    return "node " + std::to_string(rank);
}

// Who sent `h` from `peer`, for a refusal: a hello of another protocol version says no more than its version.
std::string sender_name(const Hello& h, const std::string& peer) {
    return h.version == kProtocolVersion ? node_name(h.node_rank) : "the node at " + peer;
}

// Reads the hello of a new connection: its first bytes within kHelloTimeout (or the time `deadline` leaves, when
// shorter; looking at `cancel` every kCancelPoll), then the rest. An error when there was no valid hello.
Status read_hello(TcpChannel& c, const Deadline& deadline, const std::atomic<bool>* cancel, Hello& hello) {
    const Deadline hello_deadline(deadline.left(kHelloTimeout));
    while (!c.readable(hello_deadline.left(kCancelPoll))) {
        if (cancel != nullptr && cancel->load()) return Status::error("node 0 is shutting down");
        if (hello_deadline.passed())
            return Status::error("no hello within " + std::to_string(hello_deadline.timeout().count()) + " ms");
    }
    uint32_t tag = 0;
    std::vector<std::byte> payload;
    PAGODA_RETURN_IF_ERROR(c.recv(tag, payload, kMaxHandshakeBytes, kRestOfHello));
    if (tag != kHelloTag || !decode(payload, hello)) return Status::error("not a hello of this version");
    return ok_status();
}

}  // namespace

Result<uint64_t> model_fingerprint(const std::string& model_dir) {
    PAGODA_ASSIGN_OR_RETURN(const std::string text, read_file(model_dir + "/config.json"));
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64: a mismatch check between trusted nodes, not a security hash
    for (unsigned char c : text) {
        h ^= c;
        h *= 0x100000001b3ull;
    }
    return h;
}

Result<std::unique_ptr<NodeGroup>> NodeGroup::listen(const NodeGroupOptions& options) {
    if (options.nnodes < 1 || options.node_rank != 0)
        return Status::error("NodeGroup::listen is for node 0 of a group of at least one node");
    std::unique_ptr<NodeGroup> g(new NodeGroup(options));
    auto listener = TcpListener::listen(options.address.port);
    if (!listener.ok()) return listener.status().with_context("node 0 of " + std::to_string(options.nnodes));
    g->listener_ = std::move(listener).value();
    g->options_.address.port = g->listener_.port();
    g->steps_.resize(static_cast<size_t>(options.nnodes - 1));
    g->collectives_.resize(static_cast<size_t>(options.nnodes - 1));
    return g;
}

std::vector<int> NodeGroup::missing_nodes() const {
    std::vector<int> missing;
    for (int n = 1; n < options_.nnodes; ++n)
        if (!steps_[static_cast<size_t>(n - 1)].is_open() || !collectives_[static_cast<size_t>(n - 1)].is_open())
            missing.push_back(n);
    return missing;
}

Status NodeGroup::accept_all() {
    const Deadline deadline(options_.timeout);
    for (;;) {
        const std::vector<int> missing = missing_nodes();
        if (missing.empty()) return ok_status();
        if (deadline.passed()) {
            std::string names;
            for (int n : missing)
                names += (names.empty() ? "" : ", ") + std::to_string(n);
            return Status::error("node 0 waited " + std::to_string(options_.timeout.count() / 1000) + " s on port " +
                                 std::to_string(port()) + " for the other nodes; node(s) " + names +
                                 " did not connect (are they started with --dist-init-addr " +
                                 options_.address.to_string() + " and a reachable address?)");
        }
        if (cancelled()) {
            close();
            return Status::error("node 0 stopped waiting for the other nodes (shutting down)");
        }
        auto accepted = listener_.try_accept(deadline.left(kCancelPoll));
        if (!accepted.ok()) {
            close();
            return accepted.status().with_context("node 0 waiting for the other nodes");
        }
        if (accepted->has_value()) PAGODA_RETURN_IF_ERROR(admit(std::move(**accepted), deadline));
    }
}

Status NodeGroup::admit(TcpChannel c, const Deadline& deadline) {
    Hello hello;
    if (Status s = read_hello(c, deadline, options_.cancel, hello); !s.ok()) {
        if (!cancelled()) {
            PAGODA_LOG_WARNING("node 0: dropped a connection from " + c.peer() +
                               " that is not a pagoda node of this version (" + s.message() + ")");
        }
        return ok_status();  // accept_all looks at the deadline and the cancel flag next
    }
    std::string refuse = differences(hello, options_);
    TcpChannel* slot = nullptr;
    if (refuse.empty()) {
        auto& slots = hello.channel == static_cast<uint32_t>(Channel::kSteps) ? steps_ : collectives_;
        slot = &slots[static_cast<size_t>(hello.node_rank - 1)];
        // A connection whose node has gone (crashed, and its launcher restarts it) gives way to the new one.
        if (slot->is_open() && !slot->peer_closed()) {
            refuse = "node rank " + std::to_string(hello.node_rank) +
                     " connected twice (were two nodes given the same --node-rank?)";
        }
    }
    if (!refuse.empty()) {
        const std::string message = sender_name(hello, c.peer()) + " does not match node 0: " + refuse;
        (void)c.send(kRefuseTag, bytes_of(message), deadline.left(kHelloTimeout));
        close();
        return Status::error(message);
    }
    if (Status s = c.send(kWelcomeTag, {}, deadline.left(kHelloTimeout)); !s.ok()) {
        PAGODA_LOG_WARNING("node 0: " + node_name(hello.node_rank) + " went away during its handshake (" + s.message() +
                           ")");
        return ok_status();  // it may connect again
    }
    if (slot->is_open()) PAGODA_LOG_INFO("node 0: " + node_name(hello.node_rank) + " connected again (restarted)");
    c.set_peer(node_name(hello.node_rank) + " (" + c.peer() + ")");
    *slot = std::move(c);
    return ok_status();
}

Result<std::unique_ptr<NodeGroup>> NodeGroup::connect(const NodeGroupOptions& options) {
    if (options.nnodes < 2 || options.node_rank < 1 || options.node_rank >= options.nnodes) {
        return Status::error("--node-rank " + std::to_string(options.node_rank) + " is outside 1.." +
                             std::to_string(options.nnodes - 1) + " for a node that connects to node 0");
    }
    std::unique_ptr<NodeGroup> g(new NodeGroup(options));
    const Deadline deadline(options.timeout);  // for both channels, their connects and their handshakes
    for (Channel channel : {Channel::kSteps, Channel::kCollectives}) {
        auto connected = connect_with_retry(options.address, deadline.left());
        if (!connected.ok()) {
            return connected.status().with_context(node_name(options.node_rank) + " of " +
                                                   std::to_string(options.nnodes) + " reaching node 0");
        }
        TcpChannel c = std::move(connected).value();
        c.set_peer("node 0 (" + options.address.to_string() + ")");
        Hello hello;
        hello.nnodes = options.nnodes;
        hello.node_rank = options.node_rank;
        hello.tensor_parallel_size = options.tensor_parallel_size;
        hello.channel = static_cast<uint32_t>(channel);
        hello.fingerprint = options.model_fingerprint;
        hello.device = options.device;
        hello.expert_parallel = options.expert_parallel ? 1 : 0;
        hello.quantization = options.quantization;
        hello.kv_cache_dtype = options.kv_cache_dtype;
        hello.calculate_kv_scales = options.calculate_kv_scales ? 1 : 0;
        hello.max_loras = options.max_loras;
        hello.max_lora_rank = options.max_lora_rank;
        std::vector<std::byte> payload;
        encode(hello, payload);
        PAGODA_RETURN_IF_ERROR(c.send(kHelloTag, payload, deadline.left()));
        uint32_t tag = 0;
        PAGODA_RETURN_IF_ERROR(c.recv(tag, payload, kMaxHandshakeBytes, deadline.left()));
        if (tag == kRefuseTag) {
            return Status::error("node 0 at " + options.address.to_string() + " refused this node: " +
                                 std::string(reinterpret_cast<const char*>(payload.data()), payload.size()));
        }
        if (tag != kWelcomeTag) {
            return Status::error(options.address.to_string() +
                                 " answered the handshake with something else: is it a pagoda node 0?");
        }
        (channel == Channel::kSteps ? g->steps_ : g->collectives_).push_back(std::move(c));
    }
    return g;
}

TcpChannel& NodeGroup::steps(int node) {
    const int index = options_.node_rank == 0 ? node - 1 : node;
    PAGODA_CHECK_MSG(index >= 0 && index < static_cast<int>(steps_.size()), "NodeGroup::steps: no such node");
    return steps_[static_cast<size_t>(index)];
}

std::vector<TcpChannel> NodeGroup::take_collective_channels() {
    return std::move(collectives_);
}

void NodeGroup::close() {
    listener_ = TcpListener();  // nodes still connecting are refused at once instead of waiting for an answer
    for (TcpChannel& c : steps_)
        c.close();
    for (TcpChannel& c : collectives_)
        c.close();
}

}  // namespace pagoda
