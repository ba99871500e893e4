// The tensor-parallel forward pass on the CPU: N ranks — threads with the in-process communicator, each holding its
// shard of a tiny golden checkpoint (tests/golden) — against the plain, unsplit model on the same steps (a full
// prefill, a prefix then token-by-token decode, a mixed batch):
//  - TP = 1 through the same code (a rank thread, a size-1 group) gives exactly the plain logits;
//  - TP = 2, 4 give them within fp32 tolerance (only the order of the sums changes), and every rank ends with the
//    same logits, bit for bit;
//  - a vocabulary that N does not divide (padding on the last rank) and tied embeddings;
//  - the hybrid and MoE families: Gated DeltaNet heads, routed experts' and the shared expert's features split, or
//    with expert parallelism whole routed experts per rank;
//  - sizes that do not split the model are clear load errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/file.h"
#include "dist/rank_threads.h"
#include "golden/checkpoint_entries.h"
#include "golden/golden_reference.h"
#include "model/model.h"
#include "model/runner.h"
#include "model/safetensors.h"
#include "runtime/backend.h"
#include "runtime/communicator.h"

namespace pagoda::model {
namespace {

namespace fs = std::filesystem;

using Logits = std::vector<std::vector<float>>;  // per feed: [rows * vocab]

// The steps every configuration runs: feeds over 3 sequences, from the reference prompt.
struct Script {
    std::vector<int32_t> ids;
    std::vector<std::vector<SequenceRunner::Feed>> steps;

    explicit Script(std::vector<int32_t> tokens) : ids(std::move(tokens)) {
        auto span = [&](size_t begin, size_t end) { return std::span<const int32_t>(ids).subspan(begin, end - begin); };
        const size_t n = ids.size();
        steps.push_back({{0, span(0, n), true}});  // every position of the whole sequence
        steps.push_back({{1, span(0, 70), false}});
        for (size_t t = 70; t < 76; ++t)
            steps.push_back({{1, span(t, t + 1), false}});                    // decode
        steps.push_back({{2, span(0, 30), true}, {1, span(76, 77), false}});  // a prefill and a decode together
        steps.push_back({{1, span(77, 78), false}, {2, span(30, 41), true}});
    }
};

Result<std::vector<Logits>> run_plain(const std::string& dir, const Script& script, const LoadOptions& load = {}) {
    auto backend = make_cpu_backend();
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::load(dir, *backend, single_communicator(), load));
    PAGODA_ASSIGN_OR_RETURN(SequenceRunner runner,
                            SequenceRunner::create(*model, 3, static_cast<int32_t>(script.ids.size()) + 8));
    std::vector<Logits> out;
    for (const auto& feeds : script.steps) {
        PAGODA_ASSIGN_OR_RETURN(Logits step, runner.step(feeds));
        out.push_back(std::move(step));
    }
    return out;
}

// The same script on `size` ranks: rank r's model holds shard r; out[r][step] are rank r's logits.
Result<std::vector<std::vector<Logits>>> run_tensor_parallel(const std::string& dir, int size, const Script& script,
                                                             LoadOptions load = {}) {
    const bool expert_parallel = load.expert_parallel;
    std::vector<std::unique_ptr<Communicator>> comms = make_cpu_communicators(size);
    std::vector<std::unique_ptr<Backend>> backends;
    std::vector<std::unique_ptr<Model>> models;
    std::vector<SequenceRunner> runners;
    for (int r = 0; r < size; ++r) {
        backends.push_back(make_cpu_backend());
        PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::load(dir, *backends.back(), *comms[r], load));
        const ShardPlan& plan = model->shard_plan();
        const int64_t E = model->spec().num_experts;
        if (expert_parallel &&
            (!plan.expert_parallel || plan.experts.count != E / size || plan.experts.first != r * E / size))
            return Status::error("rank " + std::to_string(r) + " does not hold its " + std::to_string(E / size) +
                                 " whole experts");
        // Nor more in memory: a per-expert checkpoint's stacks are built of the rank's share only (whole experts, or
        // dense experts' features), not of every expert and then cut.
        const int64_t I = model->spec().moe_intermediate_size;
        for (const LayerWeights& layer : model->weights().layers) {
            if (size == 1 || layer.mlp != MlpKind::kMoe) continue;
            const MoeWeights& m = layer.moe;
            const bool share =
                expert_parallel ? m.gate_up.data.dim(0) == E / size : m.gate_up.out_features() == 2 * I / size;
            if (!share || (m.per_expert_checkpoint && (expert_parallel || m.gate_up.is_dense()) && !m.stacked_for_rank))
                return Status::error("rank " + std::to_string(r) + " did not stack its share of the experts alone");
        }
        PAGODA_ASSIGN_OR_RETURN(SequenceRunner runner,
                                SequenceRunner::create(*model, 3, static_cast<int32_t>(script.ids.size()) + 8));
        models.push_back(std::move(model));
        runners.push_back(std::move(runner));
    }
    RankThreads threads(RankThreadsOptions{size, /*cpu_threads_per_rank=*/1});
    std::vector<std::vector<Logits>> out(static_cast<size_t>(size));
    for (const auto& feeds : script.steps) {
        std::vector<Result<Logits>> results(static_cast<size_t>(size), Status::error("not run"));
        threads.run([&](int r) { results[static_cast<size_t>(r)] = runners[static_cast<size_t>(r)].step(feeds); });
        for (int r = 0; r < size; ++r) {
            PAGODA_RETURN_IF_ERROR(results[static_cast<size_t>(r)]);
            out[static_cast<size_t>(r)].push_back(std::move(results[static_cast<size_t>(r)]).value());
        }
    }
    return out;
}

struct Diff {
    float max_abs_diff = 0;
    float max_abs_ref = 0;
};
Diff compare(const std::vector<Logits>& ours, const std::vector<Logits>& ref) {
    Diff d;
    for (size_t s = 0; s < ref.size(); ++s)
        for (size_t f = 0; f < ref[s].size(); ++f) {
            EXPECT_EQ(ours[s][f].size(), ref[s][f].size());
            for (size_t i = 0; i < std::min(ours[s][f].size(), ref[s][f].size()); ++i) {
                const float diff = std::fabs(ours[s][f][i] - ref[s][f][i]);
                d.max_abs_diff = std::isnan(diff) ? INFINITY : std::max(d.max_abs_diff, diff);
                d.max_abs_ref = std::max(d.max_abs_ref, std::fabs(ref[s][f][i]));
            }
        }
    return d;
}

// Writes `src`'s checkpoint into `dst` with the vocabulary cut to its first `vocab` entries (embedding rows, and
// lm_head rows when present), for a vocabulary the tensor-parallel sizes do not divide.
Status write_truncated_vocab_model(const std::string& src, const std::string& dst, int64_t vocab) {
    fs::create_directories(dst);
    PAGODA_ASSIGN_OR_RETURN(std::string config_text, read_file(src + "/config.json"));
    PAGODA_ASSIGN_OR_RETURN(Json config, Json::parse(config_text));
    config.set("vocab_size", Json(static_cast<int64_t>(vocab)));
    std::ofstream(dst + "/config.json") << config.dump();
    PAGODA_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::open_dir(src));
    std::string header = "{", data;
    for (const TensorView* t : checkpoint.tensors()) {
        std::vector<int64_t> shape = t->shape;
        size_t bytes = t->nbytes;
        if (t->name == "model.embed_tokens.weight" || t->name == "lm_head.weight") {
            bytes = t->nbytes / static_cast<size_t>(shape[0]) * static_cast<size_t>(vocab);
            shape[0] = vocab;
        }
        std::string dims;
        for (int64_t d : shape)
            dims += (dims.empty() ? "" : ",") + std::to_string(d);
        header += (header.size() > 1 ? "," : "") + std::string("\"") + t->name + "\":{\"dtype\":\"" +
                  std::string(storage_dtype_name(t->dtype)) + "\",\"shape\":[" + dims + "],\"data_offsets\":[" +
                  std::to_string(data.size()) + "," + std::to_string(data.size() + bytes) + "]}";
        data.append(reinterpret_cast<const char*>(t->data), bytes);
    }
    header += "}";
    const uint64_t length = header.size();
    std::ofstream out(dst + "/model.safetensors", std::ios::binary);
    out.write(reinterpret_cast<const char*>(&length), 8);
    out << header << data;
    return out ? ok_status() : Status::error("cannot write " + dst);
}

struct Case {
    std::string model;                // golden directory
    int64_t vocab = 0;                // > 0: the model rewritten with its vocabulary cut to this size
    std::vector<int> sizes = {2, 4};  // the split sizes to run (those the model's heads allow)
    float tolerance = 1e-5f;          // max|Δ| allowed against the plain model, relative to max|logit|
    bool expert_parallel = false;     // ranks hold whole experts (--enable-expert-parallel)
    std::string quantization = "";    // --quantization (fp8: the bf16 checkpoint quantized at load)
    bool kv_fp8 = false;              // --kv-cache-dtype fp8 (scales 1.0)

    LoadOptions load() const {
        LoadOptions o;
        o.expert_parallel = expert_parallel;
        o.quantization = quantization;
        if (kv_fp8) o.kv_cache_dtype = KvCacheDtype::kFp8E4M3;
        return o;
    }
};
// The hybrid models carry rounding from step to step in their recurrent states, and the MoE ones through their routing
// weights, so a changed order of additions grows more than in a dense model: the split tiny qwen3_5_moe lies 4.4e-5
// from the plain one (max|logit| 4.5), of the order of the plain model's own fp32 distance to transformers (2.7e-5,
// golden_test, whose bound is 1e-3). 1e-4 keeps a margin and stays ten times inside that bound.
constexpr float kRecurrentTolerance = 1e-4f;
// With an fp8 KV cache a K or V value that the split sums moved across an e4m3 rounding boundary would be stored one
// e4m3 step (1/16 relative) away. None does on these models (measured: 1.1e-6 of max|logit| for qwen3 at 2 and 4
// ranks, 2.1e-5 for qwen3_5), so the bound stays ten times the recurrent one: a cache each rank fills in another
// dtype than the single model's would be ~10% away (kv_fp8_golden_test).
constexpr float kKvFp8Tolerance = 1e-3f;

void PrintTo(const Case& c, std::ostream* os) {
    *os << c.model << (c.vocab > 0 ? " vocab " + std::to_string(c.vocab) : "") << (c.expert_parallel ? " ep" : "")
        << (c.quantization.empty() ? "" : " " + c.quantization) << (c.kv_fp8 ? " kv fp8" : "");
}

class TensorParallelTest : public ::testing::TestWithParam<Case> {
  protected:
    void SetUp() override {
        dir_ = golden::dir(GetParam().model);
        if (!file_exists(dir_ + "/config.json")) GTEST_SKIP() << "no golden data in " << dir_;
        std::vector<int32_t> ids = golden::load(dir_, /*with_tensors=*/false).ids;
        ASSERT_GE(ids.size(), 80u);
        if (GetParam().vocab > 0) {
            tmp_ = (fs::temp_directory_path() / ("pagoda_tp_test_" + std::to_string(getpid()))).string();
            Status s = write_truncated_vocab_model(dir_, tmp_, GetParam().vocab);
            ASSERT_TRUE(s.ok()) << s.message();
            dir_ = tmp_;
            for (int32_t& id : ids)
                id = static_cast<int32_t>(id % GetParam().vocab);
        }
        script_ = std::make_unique<Script>(std::move(ids));
        auto plain = run_plain(dir_, *script_, GetParam().load());
        ASSERT_TRUE(plain.ok()) << plain.message();
        plain_ = std::move(plain).value();
    }
    void TearDown() override {
        if (!tmp_.empty()) fs::remove_all(tmp_);
    }

    std::string dir_, tmp_;
    std::unique_ptr<Script> script_;
    std::vector<Logits> plain_;
};

TEST_P(TensorParallelTest, SizeOneThroughTheSameCodeIsExactlyThePlainModel) {
    auto tp = run_tensor_parallel(dir_, 1, *script_, GetParam().load());
    ASSERT_TRUE(tp.ok()) << tp.message();
    const Diff d = compare((*tp)[0], plain_);
    EXPECT_EQ(d.max_abs_diff, 0.0f);
}

TEST_P(TensorParallelTest, SplitLogitsMatchThePlainModel) {
    for (int size : GetParam().sizes) {
        SCOPED_TRACE("tp " + std::to_string(size));
        auto tp = run_tensor_parallel(dir_, size, *script_, GetParam().load());
        ASSERT_TRUE(tp.ok()) << tp.message();
        const Diff d = compare((*tp)[0], plain_);
        // fp32 throughout; only the order of the additions differs (per-rank partial sums, then the all-reduce).
        const float tol = GetParam().tolerance * d.max_abs_ref;
        EXPECT_LE(d.max_abs_diff, tol);
        std::ostringstream label;
        PrintTo(GetParam(), &label);
        std::printf("[ %s tp=%d ] max|Δ| vs plain %.3g (max|logit| %.3g, tolerance %.3g)\n", label.str().c_str(), size,
                    d.max_abs_diff, d.max_abs_ref, tol);
        for (int r = 1; r < size; ++r) {
            EXPECT_EQ(compare((*tp)[static_cast<size_t>(r)], (*tp)[0]).max_abs_diff, 0.0f) << "rank " << r;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Golden, TensorParallelTest,
    // The hybrid models have 2 linear-attention key heads: 2 ranks at most.
    ::testing::Values(Case{"qwen3"}, Case{"qwen2_tied"}, Case{"qwen2_tied", 997},
                      Case{"qwen3_moe", 0, {2, 4}, kRecurrentTolerance}, Case{"qwen3_5", 0, {2}, kRecurrentTolerance},
                      Case{"qwen3_next", 0, {2}, kRecurrentTolerance}, Case{"qwen3_5_moe", 0, {2}, kRecurrentTolerance},
                      // Expert parallelism: each rank holds 8 / N whole experts.
                      Case{"qwen3_moe", 0, {2, 4}, kRecurrentTolerance, true},
                      Case{"qwen3_next", 0, {2}, kRecurrentTolerance, true},
                      Case{"qwen3_5_moe", 0, {2}, kRecurrentTolerance, true},
                      // fp8 block scales cut through their blocks (each rank's share is smaller than a block: 64 of
                      // qwen3_fp8's 128 q rows, 16 of qwen3_moe_fp8's 32 expert features, 2 of qwen3_next_fp8's 4
                      // b/a rows): the cut keeps one scale a row or column, every weight its own scale.
                      Case{"qwen3_fp8", 0, {2, 4}}, Case{"qwen3_moe_fp8", 0, {2, 4}, kRecurrentTolerance},
                      Case{"qwen3_next_fp8", 0, {2}, kRecurrentTolerance},
                      // Quantized weights, cut with their scales (and int4 zero points):
                      // --quantization fp8 (per channel), AWQ / GPTQ / compressed-tensors int4
                      // groups. (The tiny fp8 goldens' 32x32 and 128x128 blocks are wider than
                      // their heads' shares: shard_plan_test cuts fp8 blocks.)
                      Case{"qwen3", 0, {2, 4}, 1e-5f, false, "fp8"},
                      // An fp8 KV cache: each rank stores its own KV heads in e4m3.
                      Case{"qwen3", 0, {2, 4}, kKvFp8Tolerance, false, "", true},
                      Case{"qwen3_5", 0, {2}, kKvFp8Tolerance, false, "", true}, Case{"qwen3_awq", 0, {2}},
                      Case{"qwen3_gptq", 0, {2}}, Case{"qwen3_w4a16", 0, {2}}, Case{"qwen3_w4a16_asym", 0, {2}},
                      // int4 experts (AWQ, groups of 16): each expert's share of its features, and whole experts.
                      Case{"qwen3_moe_awq", 0, {2}, kRecurrentTolerance},
                      Case{"qwen3_moe_awq", 0, {2}, kRecurrentTolerance, true}),
    [](const ::testing::TestParamInfo<Case>& info) {
        return info.param.model + (info.param.vocab > 0 ? "_vocab" + std::to_string(info.param.vocab) : "") +
               (info.param.expert_parallel ? "_ep" : "") +
               (info.param.quantization.empty() ? "" : "_quantized_" + info.param.quantization) +
               (info.param.kv_fp8 ? "_kv_fp8" : "");
    });

TEST(TensorParallel, Qwen2SplitsInTwoWithItsBiases) {
    const std::string dir = golden::dir("qwen2");  // 6 heads, 2 KV heads: 2 works, 4 does not
    if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no golden data";
    Script script(golden::load(dir, /*with_tensors=*/false).ids);
    auto plain = run_plain(dir, script);
    ASSERT_TRUE(plain.ok()) << plain.message();
    auto tp = run_tensor_parallel(dir, 2, script);
    ASSERT_TRUE(tp.ok()) << tp.message();
    const Diff d = compare((*tp)[0], *plain);
    EXPECT_LE(d.max_abs_diff, 1e-5f * d.max_abs_ref);
    std::printf("[ qwen2 tp=2 ] max|Δ| vs plain %.3g (max|logit| %.3g)\n", d.max_abs_diff, d.max_abs_ref);
}

TEST(TensorParallel, SizesThatDoNotSplitTheModelAreLoadErrors) {
    const std::string qwen2 = golden::dir("qwen2"), hybrid = golden::dir("qwen3_5");
    if (!file_exists(qwen2 + "/config.json") || !file_exists(hybrid + "/config.json")) GTEST_SKIP() << "no golden data";
    auto comms = make_cpu_communicators(4);
    auto backend = make_cpu_backend();
    auto model = Model::load(qwen2, *backend, *comms[1]);
    ASSERT_FALSE(model.ok());
    EXPECT_NE(model.message().find("num_attention_heads (6) is not divisible by the tensor-parallel size 4"),
              std::string::npos)
        << model.message();
    EXPECT_NE(model.message().find("sizes that work for this model: 1, 2"), std::string::npos) << model.message();
    auto hybrid_model =
        Model::load(hybrid, *backend, *comms[0]);  // 4 attention heads, but 2 linear-attention key heads
    ASSERT_FALSE(hybrid_model.ok());
    EXPECT_NE(hybrid_model.message().find("linear_num_key_heads (2) is not divisible by the tensor-parallel size 4"),
              std::string::npos)
        << hybrid_model.message();
}

// An act-order GPTQ weight holds its inputs scattered by its permutation, so a cut along its inputs (o_proj, down_proj)
// is refused, saying to serve with -tp 1; a cut along its outputs would be fine but the model has both.
TEST(TensorParallel, ActOrderWeightsCutAlongTheirInputsAreLoadErrors) {
    const std::string dir = golden::dir("qwen3_gptq_actorder");
    if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no golden data";
    auto comms = make_cpu_communicators(2);
    auto backend = make_cpu_backend();
    auto model = Model::load(dir, *backend, *comms[0]);
    ASSERT_FALSE(model.ok());
    EXPECT_NE(model.message().find("act-order GPTQ weights"), std::string::npos) << model.message();
    EXPECT_NE(model.message().find("-tp 1"), std::string::npos) << model.message();
}

// qwen3 (2 KV heads, every layer full attention) in `dst` with k_scale / v_scale beside each layer's attention: one
// value each (per tensor) when a pair's two heads are given equal, else one per KV head.
void write_with_kv_scales(const std::string& src, const std::string& dst, const float (&k)[2], const float (&v)[2]) {
    fs::create_directories(dst);
    fs::copy_file(src + "/config.json", dst + "/config.json", fs::copy_options::overwrite_existing);
    std::vector<test::Entry> entries = test::read_entries(src + "/model.safetensors");
    auto spec = load_model_spec(src + "/config.json");
    ASSERT_TRUE(spec.ok()) << spec.message();
    const int layers = static_cast<int>(spec->num_hidden_layers);
    auto scale = [](const std::string& name, const float(&s)[2], bool per_head) {
        const int n = per_head ? 2 : 1;
        return test::Entry{name, "F32", {n}, std::string(reinterpret_cast<const char*>(s), 4 * static_cast<size_t>(n))};
    };
    for (int l = 0; l < layers; ++l) {
        const std::string base = "model.layers." + std::to_string(l) + ".self_attn.";
        entries.push_back(scale(base + "k_scale", k, k[0] != k[1]));
        entries.push_back(scale(base + "v_scale", v, v[0] != v[1]));
    }
    test::write_entries(dst + "/model.safetensors", entries);
}

// A checkpoint calibrated with per-head KV cache scales (vLLM: k/v_scale = [num_kv_heads]): each head is stored and
// read with its own, and each rank takes its heads' scales. Per-tensor scales of 0.02 / 0.01 against per-head ones
// with head 1's K scale doubled and V scale halved.
TEST(TensorParallel, PerHeadKvCacheScalesGoWithTheirHeads) {
    const std::string src = golden::dir("qwen3");
    if (!file_exists(src + "/config.json")) GTEST_SKIP() << "no golden data";
    const std::string tmp = (fs::temp_directory_path() / ("pagoda_kv_heads_" + std::to_string(getpid()))).string();
    write_with_kv_scales(src, tmp + "/tensor", {0.02f, 0.02f}, {0.01f, 0.01f});
    write_with_kv_scales(src, tmp + "/heads", {0.02f, 0.04f}, {0.01f, 0.005f});
    const Script script(golden::load(src, /*with_tensors=*/false).ids);
    LoadOptions fp8;
    fp8.kv_cache_dtype = KvCacheDtype::kFp8E4M3;
    auto per_tensor = run_plain(tmp + "/tensor", script, fp8);
    auto per_head = run_plain(tmp + "/heads", script, fp8);
    auto split = run_tensor_parallel(tmp + "/heads", 2, script, fp8);
    fs::remove_all(tmp);
    ASSERT_TRUE(per_tensor.ok() && per_head.ok() && split.ok())
        << per_tensor.message() << per_head.message() << split.message();
    const Diff moved = compare(*per_head, *per_tensor);
    EXPECT_GT(moved.max_abs_diff, 1e-3f * moved.max_abs_ref);  // the per-head scales are used
    const Diff d = compare((*split)[0], *per_head);
    EXPECT_LE(d.max_abs_diff, kKvFp8Tolerance * d.max_abs_ref);
    std::printf(
        "per-head KV scales: logits moved %.3g from per-tensor ones; two ranks %.3g from one (max|logit| %.3g)\n",
        moved.max_abs_diff, d.max_abs_diff, d.max_abs_ref);
}

// --fp8-activations with ranks: a row-parallel projection's rank rounds its share of the inputs, so block-group
// checkpoints need whole groups a rank (qwen3_fp8's o_proj has 128 inputs, 64 a rank of two: refused, naming it);
// per-token rounding (--quantization fp8) rounds each rank's share with its own scale, as vLLM does, and runs.
TEST(TensorParallel, Fp8ActivationsNeedWholeGroupsARank) {
    const std::string fp8 = golden::dir("qwen3_fp8"), bf16 = golden::dir("qwen3");
    if (!file_exists(fp8 + "/config.json")) GTEST_SKIP() << "no golden data";
    const Script script(golden::load(bf16, /*with_tensors=*/false).ids);
    LoadOptions w8a8;
    w8a8.fp8_activations = true;
    auto refused = run_tensor_parallel(fp8, 2, script, w8a8);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.message().find("o_proj.weight's 64 inputs a rank are not whole groups of 128"), std::string::npos)
        << refused.message();
    w8a8.quantization = "fp8";
    auto per_token = run_tensor_parallel(bf16, 2, script, w8a8);
    EXPECT_TRUE(per_token.ok()) << per_token.message();
}

TEST(TensorParallel, EachRankCachesItsOwnKvHeads) {
    const std::string dir = golden::dir("qwen3");  // 2 KV heads
    if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no golden data";
    for (int size : {1, 2, 4}) {
        auto comms = make_cpu_communicators(size);
        auto backend = make_cpu_backend();
        auto model = Model::load(dir, *backend, *comms[0]);
        ASSERT_TRUE(model.ok()) << model.message();
        EXPECT_EQ((*model)->kv_cache_config(8, 16).num_kv_heads, size == 1 ? 2 : 1);  // split, then replicated
        EXPECT_EQ((*model)->vocab_size(), 1024);  // the whole vocabulary, also on a shard
    }
}

TEST(TensorParallel, EachRankHoldsTheStatesOfItsOwnLinearAttentionHeads) {
    const std::string dir = golden::dir("qwen3_5");  // 2 key heads of 16, 4 value heads of 32, conv kernel 4
    if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no golden data";
    for (int size : {1, 2}) {
        auto comms = make_cpu_communicators(size);
        auto backend = make_cpu_backend();
        auto model = Model::load(dir, *backend, *comms[size - 1]);
        ASSERT_TRUE(model.ok()) << model.message();
        const StateCacheConfig c = (*model)->state_cache_config(8);
        EXPECT_EQ(c.num_v_heads, 4 / size);
        EXPECT_EQ(c.conv_dim, (2 * 2 * 16 + 4 * 32) / size);
    }
}

}  // namespace
}  // namespace pagoda::model
