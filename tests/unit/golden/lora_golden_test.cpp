// Multi-LoRA against peft: tools/make_lora_golden.py saved small PEFT adapters for the tiny golden models
// (tests/golden/lora/<model>/<adapter>/) with the logits transformers + peft compute for a prompt; pagoda's CPU
// forward with the adapter must give them within the golden tolerance (1e-3 · max|ref|), and visibly differ from the
// base model's; so must a model split over two tensor-parallel ranks, each holding its cut of the adapter. Bad
// adapters are refused with a message that names what is wrong.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/file.h"
#include "common/json.h"
#include "dist/rank_threads.h"
#include "golden/golden_reference.h"
#include "model/model.h"
#include "model/runner.h"
#include "runtime/backend.h"
#include "runtime/communicator.h"

namespace pagoda::model {
namespace {

namespace fs = std::filesystem;

struct Case {
    std::string model, adapter;
    bool packed = false;  // weights in one buffer: the fused q/k/v, gate/up and delta-net projections run
};
std::string case_name(const ::testing::TestParamInfo<Case>& info) {
    return info.param.model + "_" + info.param.adapter + (info.param.packed ? "_fused" : "");
}

struct LoraReference {
    std::vector<int32_t> prompt;
    int64_t vocab = 0;
};
LoraReference read_reference(const std::string& model) {
    LoraReference r;
    auto text = read_file(golden::dir("lora/" + model) + "/reference.json");
    EXPECT_TRUE(text.ok()) << text.message();
    if (!text.ok()) return r;
    auto j = Json::parse(*text);
    EXPECT_TRUE(j.ok()) << j.message();
    for (const Json& v : j->find("prompt_ids")->as_array())
        r.prompt.push_back(static_cast<int32_t>(v.as_int()));
    r.vocab = j->find("vocab")->as_int();
    return r;
}

// A CPU model with LoRA on, the adapter in slot of id 1.
struct LoraModel {
    std::unique_ptr<Backend> backend = make_cpu_backend();
    std::unique_ptr<Model> model;

    Status load(const std::string& model_name, int32_t max_loras = 4, int64_t max_rank = 16, bool packed = false) {
        LoadOptions options;
        options.pack_weights = packed;
        auto m = Model::load(golden::dir(model_name), *backend, single_communicator(), options);
        if (!m.ok()) return m.status();
        model = std::move(m).value();
        return model->enable_lora(max_loras, max_rank);
    }
    Status add(int32_t id, const std::string& adapter_dir) {
        auto adapter = model->read_lora(adapter_dir);
        if (!adapter.ok()) return adapter.status();
        std::shared_ptr<const LoraAdapter> a = *adapter;
        const int32_t ids[] = {id};
        return model->lora()->make_resident(ids, [a](int32_t) { return a; });
    }
};

// The prompt and transformers + peft's logits of one adapter [prompt, vocab] (empty when unreadable), and the golden
// tolerance 1e-3 · max|logit|.
struct PeftLogits {
    std::vector<int32_t> prompt;
    std::vector<float> logits;
    float tolerance = 0;
};
PeftLogits read_peft(const Case& c) {
    const LoraReference ref = read_reference(c.model);
    PeftLogits p;
    p.prompt = ref.prompt;
    const size_t n = ref.prompt.size() * static_cast<size_t>(ref.vocab);
    p.logits = golden::read_f32(golden::dir("lora/" + c.model) + "/logits_" + c.adapter + ".bin", n);
    if (p.logits.size() != n) p.logits.clear();
    for (float v : p.logits)
        p.tolerance = std::max(p.tolerance, 1e-3f * std::fabs(v));
    return p;
}

class LoraGoldenTest : public ::testing::TestWithParam<Case> {
  protected:
    void SetUp() override {
        dir_ = golden::dir("lora/" + GetParam().model);
        if (!file_exists(dir_ + "/reference.json")) GTEST_SKIP() << "no LoRA golden data in " << dir_;
        ref_ = read_peft(GetParam());
        ASSERT_FALSE(ref_.logits.empty()) << "logits_" << GetParam().adapter << ".bin unreadable";
    }
    std::string dir_;
    PeftLogits ref_;
};

TEST_P(LoraGoldenTest, LogitsMatchPeftAtEveryPosition) {
    const Case& c = GetParam();
    const std::string& dir = dir_;
    const PeftLogits& ref = ref_;
    const auto rows = static_cast<int64_t>(ref.prompt.size());
    const std::vector<float>& want = ref.logits;
    const float tol = ref.tolerance;

    LoraModel m;
    ASSERT_TRUE(m.load(c.model, 4, 16, c.packed).ok());
    if (c.packed) {  // the fused projections really run: fewer projections carry adapter sets
        LoraModel separate;
        ASSERT_TRUE(separate.load(c.model).ok());
        EXPECT_LT(m.model->lora()->num_sets(), separate.model->lora()->num_sets());
    }
    Status added = m.add(1, dir + "/" + c.adapter);
    ASSERT_TRUE(added.ok()) << added.message();
    auto runner = SequenceRunner::create(*m.model, 2, static_cast<int32_t>(rows) + 8);
    ASSERT_TRUE(runner.ok()) << runner.message();
    // The adapter's sequence and a base one in the same step: each gets its own.
    const SequenceRunner::Feed feeds[] = {{0, ref.prompt, true, 1}, {1, ref.prompt, true, 0}};
    auto out = runner->step(feeds);
    ASSERT_TRUE(out.ok()) << out.message();
    float d = 0, from_base = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        d = std::max(d, std::fabs((*out)[0][i] - want[i]));
        from_base = std::max(from_base, std::fabs((*out)[1][i] - want[i]));
    }
    EXPECT_LE(d, tol) << "max|Δ| from peft";
    EXPECT_GT(from_base, 20 * tol) << "the adapter barely changes the logits: the test would not see it missing";
    std::printf("[ %s/%s ] max|Δ| from peft %.3g (tolerance %.3g); the base model is %.3g away\n", c.model.c_str(),
                c.adapter.c_str(), d, tol, from_base);
}

INSTANTIATE_TEST_SUITE_P(Peft, LoraGoldenTest,
                         ::testing::Values(Case{"qwen3", "attn"}, Case{"qwen3", "mlp_rslora"}, Case{"qwen3", "regex"},
                                           Case{"qwen3_5", "all"}, Case{"qwen3_moe", "attn"},
                                           Case{"qwen3_next", "mixed"}, Case{"qwen3", "attn", true},
                                           Case{"qwen3", "mlp_rslora", true}, Case{"qwen3_5", "all", true},
                                           Case{"qwen3_next", "mixed", true}),
                         case_name);

// Two CPU ranks (threads, the in-process communicator), each with its shard of the model and its cut of the adapter:
// column-parallel projections keep their rows of B, row-parallel ones their columns of A (lora_table.h).
TEST_P(LoraGoldenTest, TwoTensorParallelRanksMatchPeft) {
    const Case& c = GetParam();
    const std::string& dir = dir_;
    const PeftLogits& ref = ref_;
    const auto rows = static_cast<int64_t>(ref.prompt.size());
    const std::vector<float>& want = ref.logits;
    const float tol = ref.tolerance;

    constexpr int kRanks = 2;
    auto comms = make_cpu_communicators(kRanks);
    std::vector<std::unique_ptr<Backend>> backends;
    std::vector<std::unique_ptr<Model>> models;
    std::vector<SequenceRunner> runners;
    LoadOptions options;
    options.pack_weights = c.packed;
    for (int r = 0; r < kRanks; ++r) {
        backends.push_back(make_cpu_backend());
        auto m = Model::load(golden::dir(c.model), *backends.back(), *comms[static_cast<size_t>(r)], options);
        ASSERT_TRUE(m.ok()) << m.message();
        ASSERT_TRUE((*m)->enable_lora(4, 16).ok());
        models.push_back(std::move(m).value());
    }
    auto adapter = models[0]->read_lora(dir + "/" + c.adapter);  // as the server reads it: once, on rank 0's model
    ASSERT_TRUE(adapter.ok()) << adapter.message();
    const std::shared_ptr<const LoraAdapter> a = *adapter;
    for (auto& model : models) {
        const int32_t ids[] = {1};
        Status s = model->lora()->make_resident(ids, [a](int32_t) { return a; });
        ASSERT_TRUE(s.ok()) << s.message();
        auto runner = SequenceRunner::create(*model, 2, static_cast<int32_t>(rows) + 8);
        ASSERT_TRUE(runner.ok()) << runner.message();
        runners.push_back(std::move(runner).value());
    }
    const SequenceRunner::Feed feeds[] = {{0, ref.prompt, true, 1}, {1, ref.prompt, true, 0}};
    std::vector<Result<std::vector<std::vector<float>>>> out(kRanks, Status::error("not run"));
    RankThreads threads(RankThreadsOptions{kRanks, /*cpu_threads_per_rank=*/1});
    threads.run([&](int r) { out[static_cast<size_t>(r)] = runners[static_cast<size_t>(r)].step(feeds); });
    for (const auto& o : out)
        ASSERT_TRUE(o.ok()) << o.message();
    float d = 0, from_base = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        d = std::max(d, std::fabs((*out[0])[0][i] - want[i]));
        from_base = std::max(from_base, std::fabs((*out[0])[1][i] - want[i]));
        ASSERT_EQ((*out[1])[0][i], (*out[0])[0][i]) << "the ranks' logits differ at " << i;
    }
    EXPECT_LE(d, tol) << "max|Δ| from peft on two ranks";
    EXPECT_GT(from_base, 20 * tol) << "the adapter barely changes the logits";
    std::printf("[ %s/%s tp=2 ] max|Δ| from peft %.3g (tolerance %.3g)\n", c.model.c_str(), c.adapter.c_str(), d, tol);
}

// A slot holds an adapter of the largest rank on every projection (A [r, K] and B [N, r] in F32), each rank's share
// when the model is split; every adapter installed above passed the check that it fits its slot.
TEST(LoraSlots, HoldTheLargestRankOnEveryProjection) {
    const std::string dir = golden::dir("qwen3");
    if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no golden data";
    constexpr int64_t kRank = 16;
    for (int size : {1, 2}) {
        SCOPED_TRACE("tp " + std::to_string(size));
        auto comms = make_cpu_communicators(size);
        auto backend = make_cpu_backend();
        auto model = Model::load(dir, *backend, *comms[static_cast<size_t>(size - 1)]);
        ASSERT_TRUE(model.ok()) << model.message();
        ASSERT_TRUE((*model)->enable_lora(2, kRank).ok());
        const ModelSpec& sp = (*model)->spec();
        const int64_t H = sp.hidden_size, I = sp.intermediate_size / size;
        const int64_t Q = sp.num_attention_heads * sp.head_dim / size, KV = sp.num_key_value_heads * sp.head_dim / size;
        // q, k, v, gate, up: N split; o, down: K split. Each part's rank (an int32 in the slot's header), then its
        // A [rank, K] and B [N, rank] in bf16 at 256-byte boundaries (on a device the kernels find them there).
        const auto align = [](size_t n) { return (n + 255) / 256 * 256; };
        const std::pair<int64_t, int64_t> parts[] = {{Q, H}, {KV, H}, {KV, H}, {H, Q}, {I, H}, {I, H}, {H, I}};
        size_t per_layer = 0;
        for (const auto& [N, K] : parts)
            per_layer += align(static_cast<size_t>(kRank * K) * sizeof(uint16_t)) +
                         align(static_cast<size_t>(N * kRank) * sizeof(uint16_t));
        const auto layers = static_cast<size_t>(sp.num_hidden_layers);
        EXPECT_EQ((*model)->lora()->slot_bytes(), align(layers * 7 * sizeof(int32_t)) + layers * per_layer);
    }
}

// --- refusals ----------------------------------------------------------------------------------------------------

// A copy of a good adapter in a temporary directory, to break one thing of.
class BadAdapterTest : public ::testing::Test {
  protected:
    void SetUp() override {
        good_ = golden::dir("lora/qwen3/attn");
        if (!file_exists(good_ + "/adapter_config.json")) GTEST_SKIP() << "no LoRA golden data";
        ASSERT_TRUE(model_.load("qwen3", 2, 8).ok());
        dir_ = (fs::temp_directory_path() / ("pagoda_lora_" + std::to_string(::getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                   .string();
        fs::remove_all(dir_);
        fs::create_directories(dir_);
        fs::copy(good_, dir_, fs::copy_options::recursive);
    }
    void TearDown() override {
        if (!dir_.empty()) fs::remove_all(dir_);
    }
    // Sets `key` of adapter_config.json to `value` (JSON text).
    void set_config(const std::string& key, const std::string& value) {
        auto j = Json::parse(*read_file(dir_ + "/adapter_config.json"));
        j->set(key, *Json::parse(value));
        std::ofstream(dir_ + "/adapter_config.json") << j->dump();
    }
    // Writes adapter_model.safetensors with F32 tensors of the given names and shapes (zeros).
    void write_weights(const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors) {
        Json header = Json::object();
        size_t offset = 0;
        for (const auto& [name, shape] : tensors) {
            size_t n = 4;
            Json dims = Json::array();
            for (int64_t d : shape)
                n *= static_cast<size_t>(d), dims.push_back(Json(d));
            Json e = Json::object();
            e.set("dtype", Json("F32"));
            e.set("shape", std::move(dims));
            Json offsets = Json::array();
            offsets.push_back(Json(static_cast<int64_t>(offset)));
            offsets.push_back(Json(static_cast<int64_t>(offset + n)));
            e.set("data_offsets", std::move(offsets));
            header.set(name, std::move(e));
            offset += n;
        }
        const std::string h = header.dump();
        const uint64_t len = h.size();
        std::ofstream out(dir_ + "/adapter_model.safetensors", std::ios::binary);
        out.write(reinterpret_cast<const char*>(&len), 8);
        out << h << std::string(offset, '\0');
    }
    // The adapter is refused with a message holding `what`.
    void expect_refused(const std::string& what) {
        auto a = model_.model->read_lora(dir_);
        ASSERT_FALSE(a.ok()) << "accepted; expected a refusal naming: " << what;
        EXPECT_NE(a.message().find(what), std::string::npos) << a.message();
    }

    LoraModel model_;
    std::string good_, dir_;
};

constexpr const char* kQ = "base_model.model.model.layers.0.self_attn.q_proj.";

TEST_F(BadAdapterTest, GoodCopyLoads) {
    EXPECT_TRUE(model_.model->read_lora(dir_).ok());
}
TEST_F(BadAdapterTest, MissingFiles) {
    fs::remove(dir_ + "/adapter_model.safetensors");
    expect_refused("no adapter_model.safetensors");
    fs::remove(dir_ + "/adapter_config.json");
    expect_refused("no adapter_config.json");
}
TEST_F(BadAdapterTest, ModulesToSave) {
    set_config("modules_to_save", R"(["lm_head"])");
    expect_refused("modules_to_save");
}
TEST_F(BadAdapterTest, Bias) {
    set_config("bias", R"("all")");
    expect_refused("bias \"all\" is not supported");
}
TEST_F(BadAdapterTest, TargetModuleTheModelLacks) {
    set_config("target_modules", R"(["q_proj", "in_proj_qkvz"])");
    expect_refused("target module 'in_proj_qkvz' is not a projection");
    set_config("target_modules", R"(".*\\.nothing_proj")");
    expect_refused("matches no projection of this model");
}
// target_modules as a regular expression from an adapter's file must not take the server down: deep nesting (which
// overflowed the stack in the regex compiler) is refused by name, a pattern that backtracks exponentially (which hung
// the load) is matched in polynomial time, and lookahead, which some trainers write, still works.
TEST_F(BadAdapterTest, TargetRegexThatCouldHangOrCrash) {
    set_config("target_modules", "\"" + std::string(100, '(') + ".*q_proj" + std::string(100, ')') + "\"");
    expect_refused("nests groups deeper than 64");
    set_config("target_modules", "\"" + std::string(20000, '(') + "q_proj" + std::string(20000, ')') + "\"");
    expect_refused("is longer than 4096 bytes");
    std::string backtracking;
    for (int i = 0; i < 30; ++i)
        backtracking += "(.*)*";
    set_config("target_modules", "\"" + backtracking + "x\"");
    const auto start = std::chrono::steady_clock::now();
    expect_refused("matches no projection of this model");
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    set_config("target_modules", R"x("^(?!.*visual).*\\.(q_proj|k_proj|v_proj|o_proj)")x");
    EXPECT_TRUE(model_.model->read_lora(dir_).ok());
}
TEST_F(BadAdapterTest, RankAboveMaxLoraRank) {
    set_config("r", "16");
    expect_refused("rank 16 exceeds --max-lora-rank 8");
}
TEST_F(BadAdapterTest, RankDiffersFromTheFile) {
    set_config("r", "4");  // the file holds rank-8 matrices
    expect_refused("lora_A.weight");
}
TEST_F(BadAdapterTest, MissingLoraB) {
    write_weights({{std::string(kQ) + "lora_A.weight", {8, 64}}});
    expect_refused("has lora_A but no lora_B");
}
TEST_F(BadAdapterTest, WrongShape) {
    write_weights({{std::string(kQ) + "lora_A.weight", {8, 63}}, {std::string(kQ) + "lora_B.weight", {128, 8}}});
    expect_refused("q_proj.lora_A.weight");
}
TEST_F(BadAdapterTest, ModuleTheModelLacks) {
    write_weights({{"base_model.model.model.layers.9.self_attn.q_proj.lora_A.weight", {8, 64}},
                   {"base_model.model.model.layers.9.self_attn.q_proj.lora_B.weight", {128, 8}}});
    expect_refused("model.layers.9.self_attn.q_proj is not a projection of this model");
}
TEST_F(BadAdapterTest, ExpertsAndOtherTensors) {
    write_weights({{"base_model.model.model.layers.0.mlp.experts.0.gate_proj.lora_A.weight", {8, 64}},
                   {"base_model.model.model.layers.0.mlp.experts.0.gate_proj.lora_B.weight", {128, 8}}});
    expect_refused("LoRA on MoE experts is not supported");
    write_weights({{"base_model.model.lm_head.weight", {8, 64}}});
    expect_refused("is not a LoRA A or B matrix");
}

// peft's adapter for the fused experts of a transformers-5 MoE (target_parameters) is refused by name.
TEST(LoraAdapterRefusal, FusedExpertsAdapter) {
    const std::string dir = golden::dir("lora/qwen3_next/experts");
    if (!file_exists(dir + "/adapter_config.json")) GTEST_SKIP() << "no LoRA golden data";
    LoraModel m;
    ASSERT_TRUE(m.load("qwen3_next").ok());
    auto a = m.model->read_lora(dir);
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.message().find("target_parameters"), std::string::npos) << a.message();
}

TEST(LoraAdapterRefusal, TooManyAdaptersForTheSlots) {
    LoraModel m;
    ASSERT_TRUE(m.load("qwen3", 1).ok());
    auto a = m.model->read_lora(golden::dir("lora/qwen3/attn"));
    ASSERT_TRUE(a.ok()) << a.message();
    std::shared_ptr<const LoraAdapter> adapter = *a;
    const int32_t two[] = {1, 2};
    Status s = m.model->lora()->make_resident(two, [adapter](int32_t) { return adapter; });
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("--max-loras is 1"), std::string::npos) << s.message();
    // One at a time they take turns in the one slot (least recently used out).
    for (int32_t id : {1, 2, 1}) {
        const int32_t one[] = {id};
        ASSERT_TRUE(m.model->lora()->make_resident(one, [adapter](int32_t) { return adapter; }).ok());
        EXPECT_TRUE(m.model->lora()->resident(id));
        EXPECT_FALSE(m.model->lora()->resident(id == 1 ? 2 : 1));
    }
}

}  // namespace
}  // namespace pagoda::model
