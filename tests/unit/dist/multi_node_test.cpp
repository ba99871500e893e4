// Tensor parallelism across nodes on the CPU (docs/deployment-multinode.md), with two "nodes" as two threads of this
// process over loopback TCP: node 0 schedules and sends each step, node 1 runs run_tensor_parallel_worker. The
// logits are those of the in-process group of the same size bit for bit (the TCP sum adds in the same order) and
// those of the unsplit model within fp32 rounding; greedy tokens through the engine are the unsplit model's; a node
// that differs is refused; a node that goes away mid-step is an error on the other, never a hang.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "async_scheduling.h"
#include "common/file.h"
#include "dist/node_messages.h"
#include "dist/step_codec.h"
#include "dist/tcp_channel.h"
#include "executor/create_engine.h"
#include "executor/greedy_batch.h"
#include "executor/tensor_parallel_runner.h"
#include "executor/tensor_parallel_worker.h"
#include "golden/golden_reference.h"
#include "model/model.h"
#include "runtime/backend.h"
#include "runtime/forward_batch.h"

namespace pagoda::executor {

using dist::decode_pool_sizes;
using dist::NodeMessage;
using dist::PoolSizes;
using dist::recv_message;
using dist::send_status;
namespace {

bool contains(const std::string& text, std::string_view part) {
    return text.find(part) != std::string::npos;
}

EngineOptions node_options(int tp, int node_rank, const std::string& address) {
    EngineOptions o;
    o.max_model_len = 160;
    o.max_num_seqs = 4;
    o.num_threads = 1;
    o.device = "cpu";
    o.tensor_parallel_size = tp;
    o.nnodes = 2;
    o.node_rank = node_rank;
    o.dist_init_addr = address;
    o.dist_timeout_s = 30;  // a bug fails the test after this, rather than hanging it
    o.async_scheduling = engine::testing::testing_async_scheduling();  // node 0's engine (the others have none)
    return o;
}

engine::EngineConfig pool_config() {
    engine::EngineConfig c;
    c.num_kv_blocks = 32;
    c.block_size = 16;
    c.max_num_seqs = 4;
    c.max_model_len = 160;
    c.max_num_batched_tokens = 256;
    return c;
}

// A port that was free a moment ago, for node 0 run by create_engine, which listens itself (so the port cannot come
// from listening first). Node 1 starts connecting before anyone listens there, to a port in the ephemeral range,
// which can connect its socket to itself; connect_with_retry refuses such a connection. The race left is another
// process taking the port meanwhile, which fails node 0 loudly ("cannot listen on port ...").
uint16_t free_port() {
    auto l = TcpListener::listen(0);
    EXPECT_TRUE(l.ok()) << l.message();
    return l.ok() ? l->port() : 0;
}

// Node 0's group, listening on a port of its own choosing (port 0) before node 1 starts, which then reaches it at
// address_of(group): no port is chosen before it is listened on. `flags` sets what both nodes are started with.
using NodeFlags = void (*)(EngineOptions&);
void no_flags(EngineOptions&) {}
Result<std::unique_ptr<NodeGroup>> listening_node0(const std::string& dir, NodeFlags flags = no_flags) {
    EngineOptions zero = node_options(2, 0, "127.0.0.1:0");
    flags(zero);
    PAGODA_ASSIGN_OR_RETURN(const NodeGroupOptions options, node_group_options(dir, zero));
    return NodeGroup::listen(options);
}
std::string address_of(const NodeGroup& group) {
    return "127.0.0.1:" + std::to_string(group.port());
}

// Node 0 as a TensorParallelRunner (its group formed with node 1), node 1 as a worker on a thread of its own.
struct TwoNodes {
    std::unique_ptr<TensorParallelRunner> node0;
    std::thread worker;
    Status worker_status;

    ~TwoNodes() {
        node0.reset();  // tells the worker to shut down
        if (worker.joinable()) worker.join();
    }
};

// Forms the group; `worker_body` runs as node 1 with the options it should use.
template <typename WorkerBody>
void start_two_nodes(const std::string& dir, TwoNodes& nodes, WorkerBody worker_body, NodeFlags flags = no_flags) {
    auto group = listening_node0(dir, flags);
    ASSERT_TRUE(group.ok()) << group.message();
    EngineOptions one = node_options(2, 1, address_of(**group));
    flags(one);
    nodes.worker = std::thread([&nodes, dir, one, worker_body] { nodes.worker_status = worker_body(dir, one); });
    ASSERT_TRUE((*group)->accept_all().ok());
    auto runner = TensorParallelRunner::load_node(dir, std::move(group).value(), 1);
    ASSERT_TRUE(runner.ok()) << runner.message();
    nodes.node0 = std::move(runner).value();
    const Status started = nodes.node0->start(pool_config());
    ASSERT_TRUE(started.ok()) << started.message();
}

// Two steps of two sequences: prefills (one with every row's logits), then one decode each over the cached K/V.
struct Steps {
    ForwardBatchBuilder prefill{16}, decode{16};
    engine::StepInput first, second;
    explicit Steps(const std::vector<int32_t>& ids) {
        const std::vector<int32_t> a(ids.begin(), ids.begin() + 40), b(ids.begin() + 40, ids.begin() + 57);
        const std::vector<int32_t> table_a{3, 4, 5}, table_b{7, 8};
        prefill.add_sequence(a, 0, table_a, 0);
        prefill.add_sequence(b, 0, table_b, 1, ForwardBatchBuilder::Logits::All);
        first.batch = prefill.view();
        const std::vector<int32_t> next_a{ids[60]}, next_b{ids[61]};
        decode.add_sequence(next_a, 40, table_a, 0);
        decode.add_sequence(next_b, 17, table_b, 1);
        second.batch = decode.view();
    }
};

// The logits of both steps through `runner`.
std::vector<std::vector<float>> run_steps(engine::ModelRunner& runner, Steps& steps) {
    std::vector<std::vector<float>> out;
    for (const engine::StepInput* input : {&steps.first, &steps.second}) {
        engine::StepOutput o = runner.execute(*input);
        EXPECT_TRUE(o.status.ok()) << o.status.message();
        out.emplace_back(o.logits.begin(), o.logits.end());
    }
    return out;
}

TEST(MultiNode, LogitsAreTheInProcessGroupsBitForBitAndTheUnsplitModels) {
    const std::string dir = golden::dir("qwen3");
    if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no golden data in " << dir;
    const std::vector<int32_t> ids = golden::load(dir, /*with_tensors=*/false).ids;
    ASSERT_GE(ids.size(), 62u);
    Steps steps(ids);

    CpuBackendOptions backend_options;
    backend_options.num_threads = 1;
    auto backend = make_cpu_backend(backend_options);
    auto model = model::Model::load(dir, *backend);
    ASSERT_TRUE(model.ok()) << model.message();
    auto plain = ModelEngineRunner::create(**model, pool_config());
    ASSERT_TRUE(plain.ok()) << plain.message();
    const auto want = run_steps(**plain, steps);

    auto in_process = TensorParallelRunner::load_cpu(dir, 2, 2);
    ASSERT_TRUE(in_process.ok()) << in_process.message();
    ASSERT_TRUE((*in_process)->start(pool_config()).ok());
    const auto same_bits = run_steps(**in_process, steps);

    TwoNodes nodes;
    start_two_nodes(dir, nodes, run_tensor_parallel_worker);
    ASSERT_NE(nodes.node0, nullptr);
    const auto got = run_steps(*nodes.node0, steps);

    ASSERT_EQ(got.size(), 2u);
    for (size_t s = 0; s < got.size(); ++s) {
        ASSERT_EQ(got[s].size(), want[s].size());
        ASSERT_FALSE(got[s].empty());
        EXPECT_EQ(got[s], same_bits[s]) << "step " << s;
        float max_abs = 0, max_diff = 0;
        for (size_t i = 0; i < got[s].size(); ++i) {
            max_abs = std::max(max_abs, std::fabs(want[s][i]));
            max_diff = std::max(max_diff, std::fabs(got[s][i] - want[s][i]));
        }
        EXPECT_LE(max_diff, 1e-4f * max_abs + 1e-5f) << "step " << s;
    }
    nodes.node0.reset();  // node 0 stops: the worker returns ok
    nodes.worker.join();
    EXPECT_TRUE(nodes.worker_status.ok()) << nodes.worker_status.message();
}

TEST(MultiNode, EngineOnNode0GivesTheGreedyTokensOfOneProcess) {
    for (const std::string model : {"qwen3", "qwen2", "qwen3_5_moe"}) {  // qwen3_5_moe: states, experts
        SCOPED_TRACE(model);
        const std::string dir = golden::dir(model);
        if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no golden data in " << dir;
        const std::vector<int32_t> ids = golden::load(dir, /*with_tensors=*/false).ids;
        ASSERT_GE(ids.size(), 100u);
        EngineOptions single = node_options(1, 0, "");
        single.nnodes = 1;
        auto plain = create_engine(dir, single);
        ASSERT_TRUE(plain.ok()) << plain.message();
        const Greedy want = greedy_batch(**plain, ids);
        ASSERT_EQ(want.tokens.size(), 3u);

        const std::string address = "127.0.0.1:" + std::to_string(free_port());
        Status worker_status = Status::error("the worker did not run");
        std::thread worker([&] { worker_status = run_tensor_parallel_worker(dir, node_options(2, 1, address)); });
        auto node0 = create_engine(dir, node_options(2, 0, address));
        if (!node0.ok()) {
            worker.join();
            FAIL() << node0.message() << " / worker: " << worker_status.message();
        }
        EXPECT_EQ((*node0)->model().shard_plan().size, 2);
        EXPECT_EQ((*node0)->config().num_kv_blocks, (*plain)->config().num_kv_blocks);
        const Greedy got = greedy_batch(**node0, ids);
        EXPECT_EQ(got.tokens, want.tokens);
        // Not bit for bit: how the engine batches the three requests depends on when each arrives, and a CPU GEMM's
        // rounding on the number of rows (the runner-level test above compares equal batches bit for bit).
        ASSERT_EQ(got.logprobs.size(), want.logprobs.size());
        for (size_t r = 0; r < got.logprobs.size(); ++r) {
            ASSERT_EQ(got.logprobs[r].size(), want.logprobs[r].size());
            for (size_t i = 0; i < got.logprobs[r].size(); ++i)
                EXPECT_NEAR(got.logprobs[r][i], want.logprobs[r][i], 1e-3) << "request " << r << " token " << i;
        }
        node0->reset();  // the engine stops; node 1 is told to shut down and returns ok
        worker.join();
        EXPECT_TRUE(worker_status.ok()) << worker_status.message();
    }
}

TEST(MultiNode, ANodeWithAnotherTensorParallelSizeIsRefused) {
    const std::string dir = golden::dir("qwen3");
    if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no golden data in " << dir;
    auto node0 = listening_node0(dir);
    ASSERT_TRUE(node0.ok()) << node0.message();
    // Node 1 believes in a group of three nodes, one rank each (valid on its own, so it gets to the handshake).
    EngineOptions three = node_options(3, 1, address_of(**node0));
    three.nnodes = 3;
    Status worker_status;
    std::thread worker([&] { worker_status = run_tensor_parallel_worker(dir, three); });
    const Status refused = (*node0)->accept_all();
    worker.join();
    ASSERT_FALSE(refused.ok());
    EXPECT_TRUE(contains(refused.message(), "--tensor-parallel-size 3 (node 0: 2)")) << refused.message();
    EXPECT_TRUE(contains(refused.message(), "--nnodes 3 (node 0: 2)")) << refused.message();
    ASSERT_FALSE(worker_status.ok());
    EXPECT_TRUE(contains(worker_status.message(), "refused this node")) << worker_status.message();
}

// --quantization fp8 (weights quantized at load), an fp8 KV cache and calculated scales reach node 1 through the
// handshake: the two nodes give the in-process group's logits with the same load options, bit for bit (node 1 loading
// bf16 weights or a bf16-equivalent cache would not), and not the plain model's.
TEST(MultiNode, EveryNodeLoadsWithTheFlagsThatShapeWeightsAndCaches) {
    const std::string dir = golden::dir("qwen3");
    if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no golden data in " << dir;
    const std::vector<int32_t> ids = golden::load(dir, /*with_tensors=*/false).ids;
    ASSERT_GE(ids.size(), 62u);
    Steps steps(ids);
    model::LoadOptions load;
    load.quantization = "fp8";
    load.kv_cache_dtype = KvCacheDtype::kFp8E4M3;
    load.calculate_kv_scales = true;
    auto in_process = TensorParallelRunner::load_cpu(dir, 2, 2, load);
    ASSERT_TRUE(in_process.ok()) << in_process.message();
    ASSERT_TRUE((*in_process)->start(pool_config()).ok());
    const auto want = run_steps(**in_process, steps);
    auto plain = TensorParallelRunner::load_cpu(dir, 2, 2);
    ASSERT_TRUE(plain.ok()) << plain.message();
    ASSERT_TRUE((*plain)->start(pool_config()).ok());
    const auto unquantized = run_steps(**plain, steps);

    TwoNodes nodes;
    start_two_nodes(dir, nodes, run_tensor_parallel_worker, [](EngineOptions& o) {
        o.quantization = "fp8";
        o.kv_cache_dtype = KvCacheDtype::kFp8E4M3;
        o.calculate_kv_scales = true;
    });
    ASSERT_NE(nodes.node0, nullptr);
    const auto got = run_steps(*nodes.node0, steps);
    ASSERT_EQ(got.size(), 2u);
    for (size_t s = 0; s < got.size(); ++s) {
        ASSERT_FALSE(got[s].empty());
        EXPECT_EQ(got[s], want[s]) << "step " << s;
        EXPECT_NE(got[s], unquantized[s]) << "step " << s;
    }
    nodes.node0.reset();
    nodes.worker.join();
    EXPECT_TRUE(nodes.worker_status.ok()) << nodes.worker_status.message();
}

TEST(MultiNode, FlagsThatCannotWorkAreErrors) {
    const std::string dir = golden::dir("qwen3");
    if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no golden data in " << dir;
    struct Case {
        EngineOptions options;
        const char* says;
    };
    std::vector<Case> cases;
    cases.push_back({node_options(3, 0, "127.0.0.1:1"), "not a multiple of --nnodes 2"});
    cases.push_back({node_options(2, 2, "127.0.0.1:1"), "--node-rank 2 is outside 0..1"});
    cases.push_back({node_options(2, 0, ""), "needs --dist-init-addr"});
    cases.push_back({node_options(2, 1, "127.0.0.1"), "HOST:PORT"});
    cases.push_back({node_options(4, 0, "127.0.0.1:0"), "one rank per node"});  // CPU: G = 2
    for (const Case& c : cases) {
        auto engine = create_engine(dir, c.options);
        ASSERT_FALSE(engine.ok()) << c.says;
        EXPECT_TRUE(contains(engine.message(), c.says)) << engine.message();
    }
}

// Node 1 that loads and makes its pools like a real worker, then goes away in the middle of the first step.
Status worker_that_vanishes_mid_step(const std::string& dir, const EngineOptions& options) {
    PAGODA_ASSIGN_OR_RETURN(const NodeGroupOptions group_options, node_group_options(dir, options));
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<NodeGroup> group, NodeGroup::connect(group_options));
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<TensorParallelRunner> runner,
                            TensorParallelRunner::load_node(dir, std::move(group), 1));
    TcpChannel& leader = runner->node_group()->steps(0);
    std::vector<std::byte> payload;
    PAGODA_RETURN_IF_ERROR(recv_message(leader, NodeMessage::kPoolSizes, payload, group_options.timeout));
    PAGODA_ASSIGN_OR_RETURN(const PoolSizes sizes, decode_pool_sizes(payload));
    PAGODA_RETURN_IF_ERROR(runner->start(sizes.to_config()));
    PAGODA_RETURN_IF_ERROR(send_status(leader, ok_status(), group_options.timeout));
    PAGODA_RETURN_IF_ERROR(recv_message(leader, NodeMessage::kStep, payload, group_options.timeout));
    runner->node_group()->close();
    return ok_status();  // the runner goes, and with it the collective channel: node 0's first all-reduce fails
}

TEST(MultiNode, ANodeThatVanishesMidStepIsAnErrorOnNode0NotAHang) {
    const std::string dir = golden::dir("qwen3");
    if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no golden data in " << dir;
    const std::vector<int32_t> ids = golden::load(dir, /*with_tensors=*/false).ids;
    ASSERT_GE(ids.size(), 62u);
    Steps steps(ids);
    TwoNodes nodes;
    start_two_nodes(dir, nodes, worker_that_vanishes_mid_step);
    ASSERT_NE(nodes.node0, nullptr);
    std::atomic<int> failures{0};
    nodes.node0->on_group_failure([&](const Status&) { ++failures; });

    engine::StepOutput out = nodes.node0->execute(steps.first);
    ASSERT_FALSE(out.status.ok());
    EXPECT_TRUE(contains(out.status.message(), "node 1")) << out.status.message();
    EXPECT_TRUE(contains(out.status.message(), "closed the connection")) << out.status.message();
    EXPECT_TRUE(contains(out.status.message(), "restart every node")) << out.status.message();
    // The group stays failed: later steps fail at once with the first error, and the callback ran once.
    engine::StepOutput again = nodes.node0->execute(steps.second);
    ASSERT_FALSE(again.status.ok());
    EXPECT_EQ(again.status.message(), out.status.message());
    EXPECT_EQ(failures.load(), 1);
    nodes.node0.reset();
    nodes.worker.join();
    EXPECT_TRUE(nodes.worker_status.ok()) << nodes.worker_status.message();
}

TEST(MultiNode, AWorkerWhoseNode0VanishesReturnsAnError) {
    const std::string dir = golden::dir("qwen3");
    if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no golden data in " << dir;
    TwoNodes nodes;
    start_two_nodes(dir, nodes, run_tensor_parallel_worker);
    ASSERT_NE(nodes.node0, nullptr);
    nodes.node0->node_group()->close();  // as if node 0's process died: no shutdown message
    nodes.worker.join();
    ASSERT_FALSE(nodes.worker_status.ok());
    EXPECT_TRUE(contains(nodes.worker_status.message(), "waiting for the next step")) << nodes.worker_status.message();
    EXPECT_TRUE(contains(nodes.worker_status.message(), "node 0")) << nodes.worker_status.message();
    EXPECT_TRUE(contains(nodes.worker_status.message(), "closed the connection")) << nodes.worker_status.message();
}

}  // namespace
}  // namespace pagoda::executor
