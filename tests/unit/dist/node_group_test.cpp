// The pieces of multi-node tensor parallelism below the model, over loopback TCP with threads as nodes: framed
// channels (round trip, a peer that closes or falls silent is an error and not a hang), HOST:PORT parsing, the node
// group's rendezvous and handshake (a node that differs is refused with what differs), and the TCP communicator
// (the in-process CPU group's results bit for bit; a lost peer is a status, not a hang or a crash).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dist/nccl_communicator.h"
#include "dist/node_group.h"
#include "dist/rank_threads.h"
#include "dist/tcp_channel.h"
#include "dist/tcp_communicator.h"
#include "runtime/communicator.h"
#include "tensor/buffer.h"

namespace pagoda {
namespace {

constexpr Timeout kTestTimeout{20'000};  // long enough for a slow machine, short enough that a bug fails the test

std::span<const std::byte> bytes_of(std::string_view s) {
    return std::as_bytes(std::span<const char>(s.data(), s.size()));
}
std::string text_of(const std::vector<std::byte>& b) {
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}
bool contains(const std::string& text, std::string_view part) {
    return text.find(part) != std::string::npos;
}

// A port on which nobody listens while this lives: a socket bound to it and not listening. Connections to it are
// refused, and no other process's listener, nor an outgoing connection's local end, can take it meanwhile (unlike a
// port that was free a moment ago).
class UnlistenedPort {
  public:
    UnlistenedPort() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof(a);
        if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
            ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
            ADD_FAILURE() << "cannot bind a loopback socket: " << std::strerror(errno);
        port_ = ntohs(a.sin_port);
    }
    ~UnlistenedPort() {
        if (fd_ >= 0) ::close(fd_);
    }
    UnlistenedPort(const UnlistenedPort&) = delete;
    UnlistenedPort& operator=(const UnlistenedPort&) = delete;
    uint16_t port() const { return port_; }

  private:
    int fd_;
    uint16_t port_ = 0;
};

// Two connected channels over loopback.
std::pair<TcpChannel, TcpChannel> channel_pair() {
    auto listener = TcpListener::listen(0);
    EXPECT_TRUE(listener.ok()) << listener.message();
    auto client = std::async(std::launch::async, [port = listener->port()] {
        return connect_with_retry(HostPort{"127.0.0.1", port}, kTestTimeout);
    });
    auto server = listener->accept(kTestTimeout);
    auto connected = client.get();
    EXPECT_TRUE(server.ok()) << server.message();
    EXPECT_TRUE(connected.ok()) << connected.message();
    return {std::move(server).value(), std::move(connected).value()};
}

TEST(HostPort, ParsesNamesAddressesAndBracketedIpv6) {
    auto a = parse_host_port("node-a:29500");
    ASSERT_TRUE(a.ok()) << a.message();
    EXPECT_EQ(a->host, "node-a");
    EXPECT_EQ(a->port, 29500);
    auto b = parse_host_port("[fd00::1]:1");
    ASSERT_TRUE(b.ok()) << b.message();
    EXPECT_EQ(b->host, "fd00::1");
    EXPECT_EQ(b->to_string(), "[fd00::1]:1");
    EXPECT_TRUE(parse_host_port("127.0.0.1:0", /*allow_port_zero=*/true).ok());
    for (const char* bad :
         {"node-a", "node-a:", ":29500", "node-a:http", "node-a:70000", "node-a:0", "fd00::1:29500", "node-a:-1", ""}) {
        auto r = parse_host_port(bad);
        ASSERT_FALSE(r.ok()) << bad;
        EXPECT_TRUE(contains(r.message(), "HOST:PORT")) << r.message();
    }
}

TEST(TcpChannel, FramesRoundTripWithTheirTags) {
    auto [a, b] = channel_pair();
    // 16 MiB is more than the sender's and the receiver's socket buffers hold together (loopback's grow to a few
    // MiB), so the sender's writes stop in the middle of a part and resume there.
    const std::string head = "step ", tail = " end";
    std::string body(16 << 20, '\0');
    for (size_t i = 0; i < body.size(); ++i)
        body[i] = static_cast<char>('a' + i % 23);  // a pattern: a resumed write that skips or repeats bytes shows
    TcpChannel& sender = a;
    auto sent = std::async(std::launch::async, [&] {
        Status s = sender.send(7, {bytes_of(head), bytes_of(body), bytes_of(tail)}, kTestTimeout);
        return s.ok() ? sender.send(8, {}, kTestTimeout) : s;
    });
    uint32_t tag = 0;
    std::vector<std::byte> payload;
    Status got = b.recv(tag, payload, 32 << 20, kTestTimeout);
    ASSERT_TRUE(sent.get().ok());
    ASSERT_TRUE(got.ok()) << got.message();
    EXPECT_EQ(tag, 7u);
    EXPECT_TRUE(text_of(payload) == head + body + tail);  // not EXPECT_EQ: its failure would print 16 MiB
    ASSERT_TRUE(b.recv(tag, payload, 1 << 20, kTestTimeout).ok());
    EXPECT_EQ(tag, 8u);
    EXPECT_TRUE(payload.empty());

    // recv_into wants one tag and one size; anything else is "out of step".
    std::vector<std::byte> four(4);
    ASSERT_TRUE(a.send(3, bytes_of("12345"), kTestTimeout).ok());
    Status s = b.recv_into(3, four, kTestTimeout);
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(contains(s.message(), "out of step")) << s.message();
}

TEST(TcpChannel, OversizedFrameIsAnError) {
    auto [a, b] = channel_pair();
    ASSERT_TRUE(a.send(1, bytes_of("0123456789"), kTestTimeout).ok());
    uint32_t tag = 0;
    std::vector<std::byte> payload;
    Status s = b.recv(tag, payload, 4, kTestTimeout);
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(contains(s.message(), "more than the 4 expected")) << s.message();
}

TEST(TcpChannel, ClosedPeerAndSilenceAreErrorsNotHangs) {
    auto [a, b] = channel_pair();
    a.set_peer("node 1");
    uint32_t tag = 0;
    std::vector<std::byte> payload;
    Status silent = a.recv(tag, payload, 16, Timeout(100));
    ASSERT_FALSE(silent.ok());
    EXPECT_TRUE(contains(silent.message(), "timed out")) << silent.message();
    EXPECT_TRUE(contains(silent.message(), "node 1")) << silent.message();

    b.close();
    Status closed = a.recv(tag, payload, 16, kForever);  // no timeout: the closed connection ends the wait
    ASSERT_FALSE(closed.ok());
    EXPECT_TRUE(contains(closed.message(), "node 1 closed the connection")) << closed.message();
    // Writing to a closed peer fails (the first writes may still land in the socket buffer) instead of SIGPIPE.
    const std::string big(1 << 20, 'x');
    Status sent;
    for (int i = 0; i < 64 && sent.ok(); ++i)
        sent = a.send(1, bytes_of(big), kTestTimeout);
    EXPECT_FALSE(sent.ok());
}

TEST(TcpChannel, ConnectGivesUpAtItsTimeoutNamingTheAddress) {
    const UnlistenedPort unlistened;
    const uint16_t port = unlistened.port();
    auto c = connect_with_retry(HostPort{"127.0.0.1", port}, Timeout(700));
    ASSERT_FALSE(c.ok());
    EXPECT_TRUE(contains(c.message(), "127.0.0.1:" + std::to_string(port))) << c.message();
    EXPECT_TRUE(contains(c.message(), "within")) << c.message();
}

NodeGroupOptions group_options(int nnodes, int node_rank, uint16_t port) {
    NodeGroupOptions o;
    o.nnodes = nnodes;
    o.node_rank = node_rank;
    o.address = HostPort{"127.0.0.1", port};
    o.tensor_parallel_size = nnodes;
    o.model_fingerprint = 42;
    o.timeout = kTestTimeout;
    return o;
}

// Node 0 and nodes 1..n-1 (threads) form a group; element r is node r's. `change` edits a node's options first.
struct Formed {
    std::vector<std::unique_ptr<NodeGroup>> nodes;
    Status node0;
    std::vector<Status> others;
};
template <typename Change>
Formed form_group(int nnodes, Change change) {
    Formed f;
    f.nodes.resize(static_cast<size_t>(nnodes));
    f.others.resize(static_cast<size_t>(nnodes));
    NodeGroupOptions zero = group_options(nnodes, 0, 0);
    change(zero);
    auto listening = NodeGroup::listen(zero);
    if (!listening.ok()) {
        ADD_FAILURE() << listening.message();
        f.node0 = listening.status();
        return f;
    }
    f.nodes[0] = std::move(listening).value();
    const uint16_t port = f.nodes[0]->port();  // read here, not by the node threads while accept_all runs
    std::vector<std::thread> threads;
    for (int n = 1; n < nnodes; ++n) {
        threads.emplace_back([&, n] {
            NodeGroupOptions o = group_options(nnodes, n, port);
            change(o);
            auto g = NodeGroup::connect(o);
            f.others[static_cast<size_t>(n)] = g.status();
            if (g.ok()) f.nodes[static_cast<size_t>(n)] = std::move(g).value();
        });
    }
    f.node0 = f.nodes[0]->accept_all();
    for (std::thread& t : threads)
        t.join();
    return f;
}

TEST(NodeGroup, FormsAndCarriesStepsBothWays) {
    Formed f = form_group(3, [](NodeGroupOptions&) {});
    ASSERT_TRUE(f.node0.ok()) << f.node0.message();
    for (int n = 1; n < 3; ++n) {
        ASSERT_TRUE(f.others[static_cast<size_t>(n)].ok()) << f.others[static_cast<size_t>(n)].message();
        const std::string text = "to node " + std::to_string(n);
        ASSERT_TRUE(f.nodes[0]->steps(n).send(5, bytes_of(text), kTestTimeout).ok());
        uint32_t tag = 0;
        std::vector<std::byte> payload;
        ASSERT_TRUE(f.nodes[static_cast<size_t>(n)]->steps(0).recv(tag, payload, 64, kTestTimeout).ok());
        EXPECT_EQ(text_of(payload), text);  // each node has its own channel: no message reaches the wrong node
        ASSERT_TRUE(f.nodes[static_cast<size_t>(n)]->steps(0).send(6, bytes_of("ok"), kTestTimeout).ok());
        ASSERT_TRUE(f.nodes[0]->steps(n).recv(tag, payload, 64, kTestTimeout).ok());
        EXPECT_EQ(tag, 6u);
        EXPECT_TRUE(contains(f.nodes[0]->steps(n).peer(), "node " + std::to_string(n)));
    }
}

TEST(NodeGroup, ANodeThatDiffersIsRefusedWithWhatDiffers) {
    struct Case {
        void (*change)(NodeGroupOptions&);
        const char* says;
    };
    const Case cases[] = {
        {[](NodeGroupOptions& o) {
             if (o.node_rank == 1) o.tensor_parallel_size = 4;
         },
         "--tensor-parallel-size 4 (node 0: 2)"},
        {[](NodeGroupOptions& o) {
             if (o.node_rank == 1) o.model_fingerprint = 43;
         },
         "config.json differs"},
        {[](NodeGroupOptions& o) {
             if (o.node_rank == 1) o.device = "cuda";
         },
         "device cuda (node 0: cpu)"},
        {[](NodeGroupOptions& o) {
             if (o.node_rank == 1) o.expert_parallel = true;
         },
         "--enable-expert-parallel (node 0: off)"},
        {[](NodeGroupOptions& o) {
             if (o.node_rank == 1) o.quantization = "fp8";
         },
         "--quantization fp8 (node 0: no --quantization)"},
        {[](NodeGroupOptions& o) {
             if (o.node_rank == 1) o.kv_cache_dtype = "fp8_e4m3";
         },
         "--kv-cache-dtype fp8_e4m3 (node 0: auto)"},
        {[](NodeGroupOptions& o) {
             if (o.node_rank == 0) o.calculate_kv_scales = true;
         },
         "no --calculate-kv-scales (node 0: on)"},
    };
    for (const Case& c : cases) {
        Formed f = form_group(2, c.change);
        ASSERT_FALSE(f.node0.ok()) << c.says;
        ASSERT_FALSE(f.others[1].ok()) << c.says;
        EXPECT_TRUE(contains(f.node0.message(), c.says)) << f.node0.message();
        EXPECT_TRUE(contains(f.others[1].message(), c.says)) << f.others[1].message();
        EXPECT_TRUE(contains(f.others[1].message(), "refused this node")) << f.others[1].message();
    }
}

// Node 0 of `nnodes`, listening on a port of its own choosing.
std::unique_ptr<NodeGroup> listening_node0(int nnodes) {
    auto g = NodeGroup::listen(group_options(nnodes, 0, 0));
    EXPECT_TRUE(g.ok()) << g.message();
    return g.ok() ? std::move(g).value() : nullptr;
}

// A hello as another build might send it: node_group.cpp's tag and magic, then `version`, then nothing more.
constexpr uint32_t kHelloTag = 0x4F4C4548, kRefuseTag = 0x46455252, kMagic = 0x41444750;
constexpr uint32_t kThisVersion = 4;  // node_group.cpp's kProtocolVersion
Status send_bare_hello(TcpChannel& c, uint32_t version) {
    const uint32_t words[] = {kMagic, version};
    return c.send(kHelloTag, std::as_bytes(std::span(words)), kTestTimeout);
}

TEST(NodeGroup, TwoNodesWithTheSameRankAreRefused) {
    std::unique_ptr<NodeGroup> node0 = listening_node0(3);
    ASSERT_NE(node0, nullptr);
    const uint16_t port = node0->port();
    std::unique_ptr<NodeGroup> first;
    Status second;
    std::thread nodes([&] {
        auto g = NodeGroup::connect(group_options(3, 1, port));
        EXPECT_TRUE(g.ok()) << g.message();
        if (g.ok()) first = std::move(g).value();  // stays connected while the second node 1 comes
        second = NodeGroup::connect(group_options(3, 1, port)).status();
    });
    Status s = node0->accept_all();
    nodes.join();
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(contains(s.message(), "node rank 1 connected twice")) << s.message();
    ASSERT_FALSE(second.ok());
    EXPECT_TRUE(contains(second.message(), "refused this node")) << second.message();
    EXPECT_TRUE(contains(second.message(), "connected twice")) << second.message();
}

TEST(NodeGroup, ANodeRestartedDuringTheRendezvousTakesItsOldPlace) {
    std::unique_ptr<NodeGroup> node0 = listening_node0(3);
    ASSERT_NE(node0, nullptr);
    const uint16_t port = node0->port();
    Status crashed, restarted, last;
    std::unique_ptr<NodeGroup> node1;
    std::thread nodes([&] {
        // Node 1 joins and dies (its group, and with it its connections, ends with the statement); its launcher
        // starts it again; node 2 comes last, so node 0 is still waiting when node 1 comes back.
        crashed = NodeGroup::connect(group_options(3, 1, port)).status();
        auto again = NodeGroup::connect(group_options(3, 1, port));
        restarted = again.status();
        if (again.ok()) node1 = std::move(again).value();
        last = NodeGroup::connect(group_options(3, 2, port)).status();
    });
    Status s = node0->accept_all();
    nodes.join();
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_TRUE(crashed.ok()) << crashed.message();
    ASSERT_TRUE(restarted.ok()) << restarted.message();
    ASSERT_TRUE(last.ok()) << last.message();
    // Node 0's channel to node 1 is the restarted node's.
    ASSERT_TRUE(node0->steps(1).send(5, bytes_of("after the restart"), kTestTimeout).ok());
    uint32_t tag = 0;
    std::vector<std::byte> payload;
    ASSERT_TRUE(node1->steps(0).recv(tag, payload, 64, kTestTimeout).ok());
    EXPECT_EQ(text_of(payload), "after the restart");
}

TEST(NodeGroup, AHelloOfAnotherVersionIsRefusedNamingItsAddressNotARank) {
    std::unique_ptr<NodeGroup> node0 = listening_node0(2);
    ASSERT_NE(node0, nullptr);
    auto other = connect_with_retry(HostPort{"127.0.0.1", node0->port()}, kTestTimeout);
    ASSERT_TRUE(other.ok()) << other.message();
    ASSERT_TRUE(send_bare_hello(*other, 999).ok());  // its layout after the version is unknown: none follows
    Status s = node0->accept_all();
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(contains(s.message(), "the node at 127.0.0.1:")) << s.message();
    EXPECT_TRUE(contains(s.message(), "protocol version 999 (node 0: ")) << s.message();
    EXPECT_FALSE(contains(s.message(), "node 0 does not match node 0")) << s.message();
    uint32_t tag = 0;
    std::vector<std::byte> payload;
    ASSERT_TRUE(other->recv(tag, payload, 4096, kTestTimeout).ok());
    EXPECT_EQ(tag, kRefuseTag);
    EXPECT_EQ(text_of(payload), s.message());
}

TEST(NodeGroup, AShortHelloIsDroppedAndTheRealNodeStillJoins) {
    std::unique_ptr<NodeGroup> node0 = listening_node0(2);
    ASSERT_NE(node0, nullptr);
    const uint16_t port = node0->port();
    // This version's magic and version, then nothing: connected before node 1, so node 0 reads it first.
    auto short_hello = connect_with_retry(HostPort{"127.0.0.1", port}, kTestTimeout);
    ASSERT_TRUE(short_hello.ok()) << short_hello.message();
    ASSERT_TRUE(send_bare_hello(*short_hello, kThisVersion).ok());
    Status node1;
    std::thread joining([&] { node1 = NodeGroup::connect(group_options(2, 1, port)).status(); });
    Status s = node0->accept_all();
    joining.join();
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_TRUE(node1.ok()) << node1.message();
    uint32_t tag = 0;
    std::vector<std::byte> payload;
    Status dropped = short_hello->recv(tag, payload, 4096, kTestTimeout);
    ASSERT_FALSE(dropped.ok());
    EXPECT_TRUE(contains(dropped.message(), "closed the connection")) << dropped.message();
}

TEST(NodeGroup, AnAcceptErrorEndsTheWaitWithThatError) {
    std::unique_ptr<NodeGroup> node0 = listening_node0(2);
    ASSERT_NE(node0, nullptr);
    auto queued = connect_with_retry(HostPort{"127.0.0.1", node0->port()}, kTestTimeout);
    ASSERT_TRUE(queued.ok()) << queued.message();
    // No file descriptor left for the queued connection: accept fails (EMFILE) and the connection stays queued,
    // keeping the listener readable. Retrying would spin until the deadline and then blame the nodes.
    const int lowest_free = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(lowest_free, 0);
    ::close(lowest_free);
    rlimit saved{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
    rlimit none_left = saved;
    none_left.rlim_cur = static_cast<rlim_t>(lowest_free);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &none_left), 0);
    Status s = node0->accept_all();
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(contains(s.message(), std::strerror(EMFILE))) << s.message();
}

TEST(NodeGroup, CancelEndsTheWaitWhileAConnectionIsSilent) {
    std::atomic<bool> cancel{false};
    NodeGroupOptions o = group_options(2, 0, 0);
    o.cancel = &cancel;
    auto node0 = NodeGroup::listen(o);
    ASSERT_TRUE(node0.ok()) << node0.message();
    auto silent = connect_with_retry(HostPort{"127.0.0.1", (*node0)->port()}, kTestTimeout);  // says nothing
    ASSERT_TRUE(silent.ok()) << silent.message();
    // Set while node 0 most likely waits for the silent connection's hello (the outcome is the same either way).
    std::thread stop([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        cancel = true;
    });
    Status s = (*node0)->accept_all();
    stop.join();
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(contains(s.message(), "shutting down")) << s.message();
}

TEST(NodeGroup, Node0GivesUpNamingTheNodesThatDidNotCome) {
    NodeGroupOptions o = group_options(3, 0, 0);
    o.timeout = Timeout(500);
    auto g = NodeGroup::listen(o);
    ASSERT_TRUE(g.ok()) << g.message();
    // A connection that is not a pagoda node (a port scanner) is dropped; it does not stop the wait.
    auto stranger = connect_with_retry(HostPort{"127.0.0.1", (*g)->port()}, kTestTimeout);
    ASSERT_TRUE(stranger.ok());
    ASSERT_TRUE(stranger->send(0x1234, bytes_of("GET / HTTP/1.1"), kTestTimeout).ok());
    Status s = (*g)->accept_all();
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(contains(s.message(), "node(s) 1, 2 did not connect")) << s.message();
}

TEST(NodeGroup, ANodeGivesUpWhenNode0NeverListens) {
    const UnlistenedPort unlistened;
    NodeGroupOptions o = group_options(2, 1, unlistened.port());
    o.timeout = Timeout(600);
    auto g = NodeGroup::connect(o);
    ASSERT_FALSE(g.ok());
    EXPECT_TRUE(contains(g.message(), "node 1 of 2 reaching node 0")) << g.message();
    EXPECT_TRUE(contains(g.message(), o.address.to_string())) << g.message();
}

// Runs fn(rank, communicator) on `size` TCP communicators at once, each in its own thread, over a formed group.
template <typename F>
void on_tcp_ranks(int size, F fn) {
    Formed f = form_group(size, [](NodeGroupOptions&) {});
    ASSERT_TRUE(f.node0.ok()) << f.node0.message();
    std::vector<std::unique_ptr<TcpCommunicator>> comms;
    for (int r = 0; r < size; ++r)
        comms.push_back(std::make_unique<TcpCommunicator>(f.nodes[static_cast<size_t>(r)]->take_collective_channels(),
                                                          r, size, kTestTimeout));
    RankThreads threads(RankThreadsOptions{size, 0});
    threads.run([&](int r) { fn(r, *comms[static_cast<size_t>(r)]); });
}

TEST(TcpCommunicator, AllReduceGivesTheInProcessGroupsBits) {
    // 1e8 + 3 + 3 - 1e8 in fp32 depends on the order: the TCP sum must add in rank order, as the CPU group does.
    const float values[] = {1e8f, 3.0f, 3.0f, -1e8f};
    for (int size : {2, 3, 4}) {
        std::vector<std::vector<float>> tcp(static_cast<size_t>(size)), in_process(static_cast<size_t>(size));
        auto fill = [&](int r, HostTensor& x) {
            for (int64_t i = 0; i < x.tensor.numel(); ++i)
                x.tensor.data_as<float>()[i] = values[(r + i) % 4] + static_cast<float>(i);
        };
        on_tcp_ranks(size, [&](int r, Communicator& comm) {
            HostTensor x = HostTensor::empty(DType::F32, Shape{1001});
            fill(r, x);
            comm.all_reduce_sum(x.tensor);
            tcp[static_cast<size_t>(r)].assign(x.tensor.data_as<float>(), x.tensor.data_as<float>() + 1001);
        });
        auto group = make_cpu_communicators(size);
        RankThreads threads(RankThreadsOptions{size, 0});
        threads.run([&](int r) {
            HostTensor x = HostTensor::empty(DType::F32, Shape{1001});
            fill(r, x);
            group[static_cast<size_t>(r)]->all_reduce_sum(x.tensor);
            in_process[static_cast<size_t>(r)].assign(x.tensor.data_as<float>(), x.tensor.data_as<float>() + 1001);
        });
        for (int r = 0; r < size; ++r)
            EXPECT_EQ(tcp[static_cast<size_t>(r)], in_process[0]) << "size " << size << " rank " << r;
    }
}

TEST(TcpCommunicator, AllGatherAndBroadcastFromEveryRoot) {
    const int size = 3;
    std::vector<std::vector<int32_t>> gathered(size), cast(size);
    std::vector<Status> statuses(size);
    on_tcp_ranks(size, [&](int r, TcpCommunicator& comm) {
        HostTensor in = HostTensor::empty(DType::I32, Shape{5});
        for (int i = 0; i < 5; ++i)
            in.tensor.data_as<int32_t>()[i] = r * 100 + i;
        HostTensor all = HostTensor::zeros(DType::I32, Shape{size, 5});
        comm.all_gather(in.tensor, all.tensor);
        gathered[static_cast<size_t>(r)].assign(all.tensor.data_as<int32_t>(), all.tensor.data_as<int32_t>() + 15);
        for (int root = 0; root < size; ++root) {
            HostTensor x = HostTensor::empty(DType::I32, Shape{2});
            x.tensor.data_as<int32_t>()[0] = r;
            x.tensor.data_as<int32_t>()[1] = -r;
            comm.broadcast(x.tensor, root);
            cast[static_cast<size_t>(r)].push_back(x.tensor.data_as<int32_t>()[0]);
            cast[static_cast<size_t>(r)].push_back(x.tensor.data_as<int32_t>()[1]);
        }
        statuses[static_cast<size_t>(r)] = comm.status();
    });
    for (int r = 0; r < size; ++r) {
        EXPECT_TRUE(statuses[static_cast<size_t>(r)].ok()) << statuses[static_cast<size_t>(r)].message();
        for (int s = 0; s < size; ++s)
            for (int i = 0; i < 5; ++i)
                EXPECT_EQ(gathered[static_cast<size_t>(r)][static_cast<size_t>(s * 5 + i)], s * 100 + i);
        EXPECT_EQ(cast[static_cast<size_t>(r)], (std::vector<int32_t>{0, 0, 1, -1, 2, -2}));
    }
}

TEST(TcpCommunicator, ALostPeerIsAStatusOnEveryRankNotAHang) {
    const int size = 3;
    std::vector<Status> statuses(size);
    on_tcp_ranks(size, [&](int r, TcpCommunicator& comm) {
        HostTensor x = HostTensor::zeros(DType::F32, Shape{64});
        comm.all_reduce_sum(x.tensor);  // one that works
        if (r == 2) {
            comm.close();  // rank 2's process goes away before the next collective
        } else {
            for (int i = 0; i < 3; ++i)  // the failed one and later ones return at once
                comm.all_reduce_sum(x.tensor);
        }
        statuses[static_cast<size_t>(r)] = comm.status();
    });
    ASSERT_FALSE(statuses[0].ok());
    EXPECT_TRUE(contains(statuses[0].message(), "node 2")) << statuses[0].message();
    EXPECT_TRUE(contains(statuses[0].message(), "closed the connection")) << statuses[0].message();
    ASSERT_FALSE(statuses[1].ok());  // rank 0 closed its channels when it failed, so rank 1 stopped waiting
    EXPECT_TRUE(contains(statuses[1].message(), "node 0")) << statuses[1].message();
}

TEST(NcclCommunicator, JoiningAGroupAcrossProcessesChecksTheRanksFirst) {
    // Runs without a GPU: the arguments are refused before NCCL or CUDA is called (or the build has no NCCL).
    const int devices[] = {0, 1};
    void* const streams[] = {nullptr, nullptr};
    auto comms = make_nccl_communicators(NcclUniqueId{}, /*world_size=*/2, /*first_rank=*/1, devices, streams);
    ASSERT_FALSE(comms.ok());
    EXPECT_TRUE(contains(comms.message(), nccl_compiled() ? "outside a group of 2" : "without NCCL"))
        << comms.message();
}

}  // namespace
}  // namespace pagoda
