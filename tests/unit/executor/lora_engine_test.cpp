// Multi-LoRA through the whole engine on the CPU: requests for three adapters of the golden qwen3 model and for the
// base model, batched together, each get what they get alone (greedy tokens and their logprobs); fewer adapter slots
// than adapters (--max-loras 2, and as many host copies) make requests wait and adapters take turns, read again from
// disk, with the same results; an adapter dropped from host memory is read again when a request names it, so the
// engine never reads the disk for it; an adapter unloaded while a request uses it stays until that request ends; the
// stats name the running adapters. With PAGODA_TEST_DEVICE=cuda (the GPU machine's script), decode steps with adapters
// replayed from CUDA graphs give the eager steps' results.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "async_scheduling.h"
#include "common/file.h"
#include "dist/tcp_channel.h"
#include "engine/engine.h"
#include "executor/create_engine.h"
#include "executor/tensor_parallel_worker.h"
#include "golden/golden_reference.h"

namespace pagoda::executor {
namespace {

const char* const kAdapters[] = {"attn", "mlp_rslora", "regex"};

struct Output {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
};

class LoraEngineTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!file_exists(golden::dir("lora/qwen3/attn/adapter_config.json"))) GTEST_SKIP() << "no LoRA golden data";
        for (int32_t t = 0; t < 20; ++t)
            prompt_.push_back((t * 37 + 11) % 1000);
    }
    static EngineOptions options(int32_t max_loras, int32_t max_cpu_loras = 3, int32_t tensor_parallel = 1) {
        EngineOptions o;
        o.tensor_parallel_size = tensor_parallel;
        o.enable_lora = true;
        o.max_loras = max_loras;
        o.max_lora_rank = 8;
        o.max_cpu_loras = max_cpu_loras;
        for (const char* a : kAdapters)
            o.lora_modules.emplace_back(a, golden::dir(std::string("lora/qwen3/") + a));
        o.lora_reserved_names = {"qwen3"};
        o.max_model_len = 64;
        o.max_num_seqs = 8;
        o.async_scheduling = engine::testing::testing_async_scheduling();
        return o;
    }
    std::unique_ptr<ServingEngine> start(int32_t max_loras, int32_t max_cpu_loras = 3, int32_t tensor_parallel = 1) {
        return start(options(max_loras, max_cpu_loras, tensor_parallel));
    }
    std::unique_ptr<ServingEngine> start(const EngineOptions& o) {
        auto s = create_engine(golden::dir("qwen3"), o);
        EXPECT_TRUE(s.ok()) << s.message();
        return s.ok() ? std::move(s).value() : nullptr;
    }
    engine::Request request(ServingEngine& s, const std::string& adapter) {
        engine::Request r;
        r.prompt_tokens = prompt_;
        r.params.temperature = 0.0f;
        r.params.max_tokens = 8;
        r.params.ignore_eos = true;
        r.params.logprobs = true;
        if (!adapter.empty()) {
            auto ref = s.lora()->find(adapter);
            EXPECT_TRUE(ref.has_value()) << adapter;
            r.lora_id = ref->id;
            r.lora_hold = ref->hold;
        }
        return r;
    }
    static Output collect(engine::RequestStream& stream) {
        Output out;
        engine::StreamChunk chunk;
        while (stream.read(chunk)) {
            for (const engine::ChoiceDelta& d : chunk.choices) {
                out.tokens.insert(out.tokens.end(), d.token_ids.begin(), d.token_ids.end());
                for (const engine::TokenLogprobs& lp : d.logprobs)
                    out.logprobs.push_back(lp.logprob);
            }
            if (chunk.done) break;
        }
        return out;
    }
    Output alone(ServingEngine& s, const std::string& adapter) {
        auto stream = s.engine().submit(request(s, adapter));
        EXPECT_TRUE(stream.ok()) << stream.message();
        return collect(**stream);
    }
    // The base model and each adapter, one request at a time.
    std::vector<Output> each_alone(ServingEngine& s) {
        std::vector<Output> outs;
        for (const std::string a : {"", "attn", "mlp_rslora", "regex"})
            outs.push_back(alone(s, a));
        return outs;
    }
    // The four requests (base and each adapter) submitted while the engine is paused, so that they share steps.
    std::vector<Output> together(ServingEngine& s) {
        s.engine().pause();
        std::vector<std::shared_ptr<engine::RequestStream>> streams;
        for (const std::string a : {"", "attn", "mlp_rslora", "regex"}) {
            auto stream = s.engine().submit(request(s, a));
            EXPECT_TRUE(stream.ok()) << stream.message();
            streams.push_back(*stream);
        }
        s.engine().resume();
        std::vector<Output> outs;
        for (auto& st : streams)
            outs.push_back(collect(*st));
        return outs;
    }
    static void expect_same(const Output& got, const Output& want, const std::string& what, double tolerance = 1e-4) {
        EXPECT_EQ(got.tokens, want.tokens) << what;
        ASSERT_EQ(got.logprobs.size(), want.logprobs.size()) << what;
        for (size_t i = 0; i < got.logprobs.size(); ++i)
            EXPECT_NEAR(got.logprobs[i], want.logprobs[i], tolerance) << what << " token " << i;
    }

    std::vector<int32_t> prompt_;
};

TEST_F(LoraEngineTest, MixedBatchGivesEachRequestWhatItGetsAlone) {
    auto s = start(3);
    ASSERT_TRUE(s);
    const std::vector<Output> solo = each_alone(*s);
    // The adapters change the output, so the comparison below would see one applied to the wrong request.
    for (size_t i = 1; i < solo.size(); ++i)
        EXPECT_NE(solo[i].logprobs, solo[0].logprobs) << kAdapters[i - 1];
    const std::vector<Output> mixed = together(*s);
    for (size_t i = 0; i < solo.size(); ++i)
        expect_same(mixed[i], solo[i], i == 0 ? "base" : kAdapters[i - 1]);
}

// Decode steps with adapters are recorded as CUDA graphs of their own (the adapters' slots and tiles are batch data)
// and replayed with the eager steps' results, for a mix of adapters and the base, and for each request alone. GPU only
// (PAGODA_TEST_DEVICE=cuda): the CPU records nothing.
TEST_F(LoraEngineTest, CudaGraphsGiveTheEagerSteps) {
    const char* device = std::getenv("PAGODA_TEST_DEVICE");
    if (device == nullptr || std::string(device) != "cuda") GTEST_SKIP() << "CUDA graphs need PAGODA_TEST_DEVICE=cuda";
    EngineOptions eager = options(3);
    eager.device = "cuda";
    eager.enforce_eager = true;
    EngineOptions graphs = eager;
    graphs.enforce_eager = false;
    auto e = start(eager);
    auto g = start(graphs);
    ASSERT_TRUE(e && g);
    // An adapter's request first, alone on the graph engine: its decode steps must have been recorded and replayed
    // (a recording that failed would run them eagerly and pass every comparison below).
    alone(*g, "attn");
    EXPECT_GT(g->recorded_cuda_graphs(), 0u) << "no decode step with an adapter was recorded";
    EXPECT_GT(g->replayed_cuda_graphs(), 0u) << "no decode step with an adapter was replayed";
    const std::vector<Output> eager_solo = each_alone(*e), eager_mixed = together(*e);
    const std::vector<Output> graph_solo = each_alone(*g), graph_mixed = together(*g);
    EXPECT_EQ(e->recorded_cuda_graphs(), 0u);
    EXPECT_GT(g->replayed_cuda_graphs(), g->recorded_cuda_graphs());
    EXPECT_GT(g->recorded_cuda_graphs(), 0u);
    // The same kernels on the same rows (a bucket of 1 or 4 pads nothing here), but split-KV attention planned for
    // the graph's width: f32 sums in another order, far below a logprob's 1e-3.
    for (size_t i = 0; i < eager_solo.size(); ++i) {
        const std::string what = i == 0 ? "base" : kAdapters[i - 1];
        expect_same(graph_solo[i], eager_solo[i], what + " alone", 1e-3);
        expect_same(graph_mixed[i], eager_mixed[i], what + " in the mixed batch", 1e-3);
    }
    // The warm-up step ran the adapters' kernels (every token in an empty slot), so no LoRA step grew scratch memory
    // afterwards (which would have dropped the recorded graphs).
    EXPECT_EQ(g->scratch_growths_after_warm_up(), 0u);
    EXPECT_EQ(e->scratch_growths_after_warm_up(), 0u);
    // And the adapters were applied in the graphs: each adapter's request differs from the base one.
    for (size_t i = 1; i < graph_solo.size(); ++i)
        EXPECT_NE(graph_solo[i].logprobs, graph_solo[0].logprobs) << kAdapters[i - 1];
}

TEST_F(LoraEngineTest, FewerSlotsThanAdaptersTakeTurns) {
    auto wide = start(3);
    ASSERT_TRUE(wide);
    const std::vector<Output> solo = each_alone(*wide);
    wide.reset();
    // Two device slots and two host copies for three adapters: the third is read again from its directory.
    auto s = start(2, 2);
    ASSERT_TRUE(s);
    const std::vector<Output> mixed = together(*s);
    for (size_t i = 0; i < solo.size(); ++i)
        expect_same(mixed[i], solo[i], i == 0 ? "base" : kAdapters[i - 1]);
    const engine::EngineStats st = s->engine().stats();
    EXPECT_TRUE(st.running_lora_ids.empty());
    EXPECT_TRUE(st.waiting_lora_ids.empty());
}

// A request for an adapter that is not on the device, arriving while another request runs, waits while the adapter is
// paged in beside the steps (executor/lora_pager.h) rather than stopping the running request for its install, then
// gets what it gets alone; the running request's tokens are those it gets alone. On one rank and on two (each pages in
// its own cut; with PAGODA_TEST_DEVICE=cuda on one GPU, where the adapter's copy runs on a second stream). The steps
// before the adapter's first one are slowed (1 ms each) so that the running request outlasts the paging on a loaded
// machine.
TEST_F(LoraEngineTest, AColdAdapterIsPagedInWhileOtherRequestsRun) {
    const char* device = std::getenv("PAGODA_TEST_DEVICE");
    const bool cuda = device != nullptr && std::string(device) == "cuda";
    struct Steps final : engine::StepObserver {
        void on_step(const engine::StepInput& input, const engine::EngineStats&) override {
            const bool adapter = std::any_of(input.batch.lora_ids.begin(), input.batch.lora_ids.end(),
                                             [](int32_t id) { return id != 0; });
            if (adapter) {
                ++with_adapter;
            } else if (cold_submitted && with_adapter == 0) {
                ++before_adapter;
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
        }
        std::atomic<bool> cold_submitted{false};
        std::atomic<int> before_adapter{0}, with_adapter{0};
    };
    for (const int32_t ranks : {1, 2}) {
        if (cuda && ranks > 1) continue;
        SCOPED_TRACE(std::to_string(ranks) + " rank(s)");
        Steps steps;
        EngineOptions o = options(3, 3, ranks);
        o.max_model_len = 512;
        if (cuda) o.device = "cuda";
        const auto long_request = [&](ServingEngine& s) {
            engine::Request r = request(s, "");
            r.params.max_tokens = 480;
            return r;
        };
        auto reference = start(o);
        ASSERT_TRUE(reference);
        auto base_stream = reference->engine().submit(long_request(*reference));
        ASSERT_TRUE(base_stream.ok()) << base_stream.message();
        const Output base_alone = collect(**base_stream);
        const Output attn_alone = alone(*reference, "attn");
        reference.reset();

        o.observer = &steps;
        auto s = start(o);
        ASSERT_TRUE(s);
        ASSERT_NE(s->lora_pager(), nullptr);
        auto running = s->engine().submit(long_request(*s));
        ASSERT_TRUE(running.ok()) << running.message();
        Output base;
        engine::StreamChunk chunk;
        ASSERT_TRUE((*running)->read(chunk));  // it runs
        for (const engine::ChoiceDelta& d : chunk.choices) {
            base.tokens.insert(base.tokens.end(), d.token_ids.begin(), d.token_ids.end());
            for (const engine::TokenLogprobs& lp : d.logprobs)
                base.logprobs.push_back(lp.logprob);
        }
        steps.cold_submitted = true;
        auto cold = s->engine().submit(request(*s, "attn"));
        ASSERT_TRUE(cold.ok()) << cold.message();
        // (On a GPU a batch of two rounds a little differently from one: 1e-3, and the running request's first 64
        // tokens, before a near-tie of the random model can turn greedy decoding another way.)
        const double tolerance = cuda ? 1e-3 : 1e-4;
        expect_same(collect(**cold), attn_alone, "attn, paged in", tolerance);
        const Output rest = collect(**running);
        base.tokens.insert(base.tokens.end(), rest.tokens.begin(), rest.tokens.end());
        base.logprobs.insert(base.logprobs.end(), rest.logprobs.begin(), rest.logprobs.end());
        Output want = base_alone;
        for (Output* out : {&base, &want}) {
            if (!cuda || out->tokens.size() <= 64) continue;
            out->tokens.resize(64);
            out->logprobs.resize(64);
        }
        expect_same(base, want, "the request running meanwhile", tolerance);
        EXPECT_EQ(s->lora_pager()->paged_in(), 1);
        EXPECT_EQ(s->lora_pager()->installed_by_steps(), 0);
        EXPECT_GT(steps.before_adapter.load(), 0) << "the running request stepped while the adapter came in";
        EXPECT_GT(steps.with_adapter.load(), 0);
        s.reset();  // (before `steps`, which it observes)
    }
}

TEST_F(LoraEngineTest, UnloadedAdapterStaysUntilItsRequestEnds) {
    auto s = start(1);
    ASSERT_TRUE(s);
    const Output want = alone(*s, "attn");
    s->engine().pause();
    auto stream = s->engine().submit(request(*s, "attn"));
    ASSERT_TRUE(stream.ok()) << stream.message();
    ASSERT_TRUE(s->lora()->unload("attn").ok());
    EXPECT_FALSE(s->lora()->find("attn").has_value());
    EXPECT_FALSE(s->lora()->unload("attn").ok());
    const engine::EngineStats waiting = s->engine().stats();
    ASSERT_EQ(waiting.waiting_lora_ids.size(), 1u);
    EXPECT_EQ(s->lora()->name_of(waiting.waiting_lora_ids[0]), "attn");  // still named while in flight
    s->engine().resume();
    expect_same(collect(**stream), want, "attn after its unload");
    // Loaded again under the same name it is a new adapter (a new id: the prefix cache starts afresh).
    ASSERT_TRUE(s->lora()->load("attn", golden::dir("lora/qwen3/attn")).ok());
    EXPECT_NE(s->lora()->find("attn")->id, waiting.waiting_lora_ids[0]);
    expect_same(alone(*s, "attn"), want, "attn loaded again");
}

// One host copy for two adapters: naming the dropped one reads it again on the request's thread, and the request's
// hold keeps that copy, so the engine thread does not read the disk for it (here the files are gone by then).
TEST_F(LoraEngineTest, ANamedAdapterIsReadBeforeTheEngineNeedsIt) {
    namespace fs = std::filesystem;
    const fs::path tmp = fs::temp_directory_path() / ("pagoda_lora_fetch_" + std::to_string(::getpid()));
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    for (const char* a : {"attn", "mlp_rslora"})
        fs::copy(golden::dir(std::string("lora/qwen3/") + a), tmp / a, fs::copy_options::recursive);
    const Output want = [&] {
        auto s = start(3);
        return s ? alone(*s, "attn") : Output{};
    }();
    EngineOptions o;
    o.enable_lora = true, o.max_loras = 1, o.max_lora_rank = 8, o.max_cpu_loras = 1;
    o.lora_modules = {{"attn", (tmp / "attn").string()}, {"mlp", (tmp / "mlp_rslora").string()}};
    o.max_model_len = 64, o.max_num_seqs = 8;
    auto s = create_engine(golden::dir("qwen3"), o);
    ASSERT_TRUE(s.ok()) << s.message();
    // Loading mlp dropped attn from host memory; the request names it, then its files go away.
    engine::Request r = request(**s, "attn");
    fs::remove_all(tmp / "attn");
    auto stream = (*s)->engine().submit(r);
    ASSERT_TRUE(stream.ok()) << stream.message();
    expect_same(collect(**stream), want, "attn read when named");
    fs::remove_all(tmp);
}

// Two tensor-parallel ranks, each with its cut of every adapter: each request gets what one rank gives it, alone and
// in a batch that mixes the adapters and the base model.
TEST_F(LoraEngineTest, TensorParallelRanksGiveWhatOneRankGives) {
    auto one = start(3);
    auto two = start(3, 3, /*tensor_parallel=*/2);
    ASSERT_TRUE(one && two);
    const std::vector<Output> want = each_alone(*one);
    const std::vector<Output> alone_on_two = each_alone(*two);
    const std::vector<Output> together_on_two = together(*two);
    for (size_t i = 0; i < want.size(); ++i) {
        const std::string what = i == 0 ? std::string("base") : kAdapters[i - 1];
        expect_same(alone_on_two[i], want[i], what + " alone on two ranks");
        expect_same(together_on_two[i], want[i], what + " in a mixed batch on two ranks");
    }
}

// Two nodes (one rank each, over TCP): node 0 names each adapter to node 1 before the first step that uses it, node 1
// reads it from that directory and cuts it as rank 1; with two slots for three adapters they take turns on both nodes.
// Each request gets what two ranks of one process give it, alone and in mixed batches. A node started with other LoRA
// sizes is refused, naming them.
TEST_F(LoraEngineTest, TwoNodesGiveWhatTwoRanksGive) {
    auto in_process = start(2, 2, /*tensor_parallel=*/2);
    ASSERT_TRUE(in_process);
    const std::vector<Output> want = each_alone(*in_process);
    in_process.reset();
    std::string address;
    {
        auto listener = TcpListener::listen(0);  // a port that was free a moment ago
        ASSERT_TRUE(listener.ok()) << listener.message();
        address = "127.0.0.1:" + std::to_string(listener->port());
    }
    auto node = [&](int32_t rank) {
        EngineOptions o = options(2, 2, /*tensor_parallel=*/2);
        o.nnodes = 2, o.node_rank = rank, o.dist_init_addr = address, o.dist_timeout_s = 30, o.num_threads = 1;
        return o;
    };
    Status worker = Status::error("the worker did not run");
    std::thread node1([&] { worker = run_tensor_parallel_worker(golden::dir("qwen3"), node(1)); });
    auto node0 = start(node(0));
    if (!node0) {
        node1.join();
        FAIL() << "node 0 did not start; node 1: " << worker.message();
    }
    const std::vector<Output> alone = each_alone(*node0);
    const std::vector<Output> mixed = together(*node0);
    for (size_t i = 0; i < want.size(); ++i) {
        const std::string what = i == 0 ? std::string("base") : kAdapters[i - 1];
        expect_same(alone[i], want[i], what + " alone on two nodes");
        expect_same(mixed[i], want[i], what + " in a mixed batch on two nodes");
    }
    node0.reset();  // node 1 is told to shut down
    node1.join();
    EXPECT_TRUE(worker.ok()) << worker.message();

    // Node 1 with another --max-lora-rank: both refuse, node 0 naming the difference.
    EngineOptions other = node(1);
    other.max_lora_rank = 16;
    std::thread refused([&] { worker = run_tensor_parallel_worker(golden::dir("qwen3"), other); });
    auto s = create_engine(golden::dir("qwen3"), node(0));
    refused.join();
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("--max-lora-rank 16 (node 0: --enable-lora --max-loras 2 --max-lora-rank 8)"),
              std::string::npos)
        << s.message();
    EXPECT_FALSE(worker.ok());
}

TEST_F(LoraEngineTest, RefusedSettings) {
    EngineOptions o;
    o.enable_lora = true;
    o.max_loras = 2;
    o.max_cpu_loras = 1;
    auto s = create_engine(golden::dir("qwen3"), o);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("--max-cpu-loras"), std::string::npos) << s.message();
    o.max_cpu_loras = 0;
    o.lora_modules = {{"bad", golden::dir("lora/qwen3_next/mixed")}};  // another model's adapter
    s = create_engine(golden::dir("qwen3"), o);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("--lora-modules bad="), std::string::npos) << s.message();
    // A request for an adapter of an engine without LoRA is refused at submit.
    o = EngineOptions();
    auto plain = create_engine(golden::dir("qwen3"), o);
    ASSERT_TRUE(plain.ok()) << plain.message();
    engine::Request r;
    r.prompt_tokens = prompt_;
    r.lora_id = 3;
    EXPECT_FALSE((*plain)->engine().submit(r).ok());
}

}  // namespace
}  // namespace pagoda::executor
