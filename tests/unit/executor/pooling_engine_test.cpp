// Pooling requests (embeddings, reranker scores) through the engine, the CPU runner and the model, against the
// references of tests/golden/qwen3_pooling/ (tools/make_pooling_golden.py): sentence-transformers' normalised
// last-token embeddings of a tiny random Qwen3 checkpoint, and transformers' softmax([no, yes])[yes] at the end of
// Qwen3-Reranker-formatted pairs. Pooling requests share steps with generation without changing either's result.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "async_scheduling.h"
#include "common/file.h"
#include "common/json.h"
#include "engine/engine.h"
#include "executor/create_engine.h"
#include "golden/golden_reference.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::executor {
namespace {

using engine::FinishReason;
using engine::PoolingTask;
using engine::Request;

// fp32 here and in transformers, summed in other orders: components of a unit vector agree to ~1e-6.
constexpr double kTol = 1e-4;

struct Pooled {
    std::vector<float> values;
    FinishReason reason = FinishReason::kNone;
    std::string message;
    int32_t prompt_tokens = 0, cached_tokens = 0, output_tokens = 0;
};

Pooled collect(engine::RequestStream& stream) {
    Pooled p;
    engine::StreamChunk chunk;
    while (stream.read(chunk)) {
        if (!chunk.pooled.empty()) p.values = chunk.pooled;
        const auto& d = chunk.choices.at(0);
        p.output_tokens += static_cast<int32_t>(d.token_ids.size());
        if (d.finish_reason != FinishReason::kNone) p.reason = d.finish_reason, p.message = d.finish_message;
        p.prompt_tokens = chunk.usage.prompt_tokens;
        p.cached_tokens = chunk.usage.cached_tokens;
    }
    return p;
}

std::vector<int32_t> generated(engine::RequestStream& stream) {
    std::vector<int32_t> tokens;
    engine::StreamChunk chunk;
    while (stream.read(chunk))
        tokens.insert(tokens.end(), chunk.choices.at(0).token_ids.begin(), chunk.choices.at(0).token_ids.end());
    return tokens;
}

std::vector<float> normalized(std::vector<float> v) {
    double sum = 0;
    for (float x : v)
        sum += double{x} * x;
    for (float& x : v)
        x = static_cast<float>(x / std::sqrt(sum));
    return v;
}

std::vector<int32_t> ints(const Json& a) {
    std::vector<int32_t> out;
    for (const Json& v : a.as_array())
        out.push_back(static_cast<int32_t>(v.as_int()));
    return out;
}

Request pooling_request(std::vector<int32_t> ids, PoolingTask task, std::vector<int32_t> token_ids = {}) {
    Request r;
    r.prompt_tokens = std::move(ids);
    r.pooling = task;
    r.pooling_token_ids = std::move(token_ids);
    return r;
}

class PoolingEngineTest : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = golden::dir("qwen3_pooling");
        if (!file_exists(dir_ + "/config.json")) GTEST_SKIP() << "no golden data in " << dir_;
        auto text = read_file(dir_ + "/reference.json");
        ASSERT_TRUE(text.ok()) << text.message();
        auto ref = Json::parse(*text);
        ASSERT_TRUE(ref.ok()) << ref.message();
        ref_ = std::move(ref).value();
        auto tok = Tokenizer::load_from_dir(dir_);
        ASSERT_TRUE(tok.ok()) << tok.message();
        tokenizer_.emplace(std::move(tok).value());
    }

    std::unique_ptr<ServingEngine> start(bool prefix_caching = true) {
        EngineOptions o;
        o.max_model_len = 512;
        o.max_num_seqs = 8;
        o.max_num_batched_tokens = 256;  // the reranker pairs (~240 tokens) need more than one chunk among others
        o.num_threads = 1;
        o.enable_prefix_caching = prefix_caching;
        o.async_scheduling = engine::testing::testing_async_scheduling();
        auto s = create_engine(dir_, o);
        EXPECT_TRUE(s.ok()) << s.message();
        return s.ok() ? std::move(s).value() : nullptr;
    }

    const Json& embed() const { return *ref_.find("embed"); }
    const Json& rerank() const { return *ref_.find("rerank"); }
    std::vector<int32_t> embed_ids(size_t i) const { return ints(embed().find("ids")->as_array()[i]); }
    std::vector<float> embedding(size_t i) const {
        std::vector<float> v;
        for (const Json& x : embed().find("embeddings")->as_array()[i].as_array())
            v.push_back(static_cast<float>(x.as_double()));
        return v;
    }
    std::vector<int32_t> pair_ids(size_t doc) const {
        std::vector<int32_t> ids = tokenizer_->encode(rerank().find("query")->as_string());
        tokenizer_->encode(rerank().find("documents")->as_array()[doc].as_string(), ids);
        return ids;
    }
    std::vector<int32_t> no_yes() const {
        return {static_cast<int32_t>(rerank().find("no_id")->as_int()),
                static_cast<int32_t>(rerank().find("yes_id")->as_int())};
    }

    std::string dir_;
    Json ref_;
    std::optional<Tokenizer> tokenizer_;
};

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
        EXPECT_NEAR(got[i], want[i], kTol) << what << " [" << i << "]";
}

TEST_F(PoolingEngineTest, TokenizerAppendsEndOfTextAsSentenceTransformers) {
    EXPECT_TRUE(tokenizer_->special_prefix().empty());
    ASSERT_EQ(tokenizer_->special_suffix().size(), 1u);
    const auto& inputs = embed().find("inputs")->as_array();
    for (size_t i = 0; i < inputs.size(); ++i) {
        std::vector<int32_t> ids = tokenizer_->encode(inputs[i].as_string());
        ids.push_back(tokenizer_->special_suffix()[0]);
        EXPECT_EQ(ids, embed_ids(i)) << inputs[i].as_string();
    }
}

TEST_F(PoolingEngineTest, LastHiddenStateMatchesSentenceTransformers) {
    auto s = start();
    ASSERT_TRUE(s);
    for (size_t i = 0; i < embed().find("ids")->as_array().size(); ++i) {
        auto stream = s->engine().submit(pooling_request(embed_ids(i), PoolingTask::kLastHidden));
        ASSERT_TRUE(stream.ok()) << stream.message();
        const Pooled p = collect(**stream);
        EXPECT_EQ(p.reason, FinishReason::kStop) << p.message;
        EXPECT_EQ(p.output_tokens, 0);
        EXPECT_EQ(p.prompt_tokens, static_cast<int32_t>(embed_ids(i).size()));
        expect_close(normalized(p.values), embedding(i), "input " + std::to_string(i));
    }
}

TEST_F(PoolingEngineTest, PoolingSharesStepsWithGenerationWithoutChangingEither) {
    auto s = start(/*prefix_caching=*/false);
    ASSERT_TRUE(s);
    Request gen;
    gen.prompt_tokens = pair_ids(0);
    gen.params.max_tokens = 12;
    gen.params.temperature = 0.0f;
    gen.params.ignore_eos = true;
    auto alone = s->engine().submit(gen);
    ASSERT_TRUE(alone.ok());
    const std::vector<int32_t> tokens_alone = generated(**alone);
    ASSERT_EQ(tokens_alone.size(), 12u);

    // Everything at once: the generation's prompt, two embeddings and two scores fill the first steps together.
    auto g = s->engine().submit(gen);
    std::vector<std::shared_ptr<engine::RequestStream>> embeds, scores;
    for (size_t i : {1, 2}) {
        auto st = s->engine().submit(pooling_request(embed_ids(i), PoolingTask::kLastHidden));
        ASSERT_TRUE(st.ok()) << st.message();
        embeds.push_back(*st);
    }
    for (size_t d : {1, 3}) {
        auto st = s->engine().submit(pooling_request(pair_ids(d), PoolingTask::kTokenLogits, no_yes()));
        ASSERT_TRUE(st.ok()) << st.message();
        scores.push_back(*st);
    }
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(generated(**g), tokens_alone);
    expect_close(normalized(collect(*embeds[0]).values), embedding(1), "input 1 in a mixed batch");
    expect_close(normalized(collect(*embeds[1]).values), embedding(2), "input 2 in a mixed batch");
    const auto& want = rerank().find("scores")->as_array();
    for (size_t k = 0; k < scores.size(); ++k) {
        const Pooled p = collect(*scores[k]);
        ASSERT_EQ(p.values.size(), 2u);
        const double score = 1.0 / (1.0 + std::exp(double{p.values[0]} - p.values[1]));
        EXPECT_NEAR(score, want[k == 0 ? 1 : 3].as_double(), kTol) << "document " << (k == 0 ? 1 : 3);
    }
}

TEST_F(PoolingEngineTest, RerankerScoresMatchTransformers) {
    auto s = start();
    ASSERT_TRUE(s);
    const auto& want = rerank().find("scores")->as_array();
    const auto& lengths = rerank().find("pair_lengths")->as_array();
    for (size_t d = 0; d < want.size(); ++d) {
        const std::vector<int32_t> ids = pair_ids(d);
        EXPECT_EQ(static_cast<int64_t>(ids.size()), lengths[d].as_int()) << "document " << d;
        auto stream = s->engine().submit(pooling_request(ids, PoolingTask::kTokenLogits, no_yes()));
        ASSERT_TRUE(stream.ok()) << stream.message();
        const Pooled p = collect(**stream);
        ASSERT_EQ(p.values.size(), 2u) << p.message;
        EXPECT_NEAR(1.0 / (1.0 + std::exp(double{p.values[0]} - p.values[1])), want[d].as_double(), kTol)
            << "document " << d;
    }
}

TEST_F(PoolingEngineTest, PrefixCacheServesARepeatedPromptWithTheSameVector) {
    auto s = start();
    ASSERT_TRUE(s);
    std::vector<int32_t> ids = pair_ids(0);  // long enough for whole cached blocks
    auto first = s->engine().submit(pooling_request(ids, PoolingTask::kLastHidden));
    ASSERT_TRUE(first.ok());
    const Pooled a = collect(**first);
    auto second = s->engine().submit(pooling_request(ids, PoolingTask::kLastHidden));
    ASSERT_TRUE(second.ok());
    const Pooled b = collect(**second);
    EXPECT_EQ(a.cached_tokens, 0);
    EXPECT_GT(b.cached_tokens, 0);
    expect_close(b.values, a.values, "cached");
}

TEST_F(PoolingEngineTest, BadPoolingRequestsAreRefusedWithAMessage) {
    auto s = start();
    ASSERT_TRUE(s);
    Request two = pooling_request(embed_ids(0), PoolingTask::kLastHidden);
    two.params.n = 2;
    EXPECT_FALSE(s->engine().submit(two).ok());
    EXPECT_FALSE(s->engine().submit(pooling_request(embed_ids(0), PoolingTask::kTokenLogits)).ok());
    EXPECT_FALSE(s->engine().submit(pooling_request(embed_ids(0), PoolingTask::kTokenLogits, {-1})).ok());
    EXPECT_FALSE(s->engine().submit(pooling_request(embed_ids(0), PoolingTask::kTokenLogits, {1 << 20})).ok());
    // A pooling prompt may fill the whole context (nothing is generated after it); one token more may not.
    const std::vector<int32_t> full(512, 100);
    auto fits = s->engine().submit(pooling_request(full, PoolingTask::kLastHidden));
    ASSERT_TRUE(fits.ok()) << fits.message();
    EXPECT_EQ(collect(**fits).reason, FinishReason::kStop);
    EXPECT_FALSE(s->engine().submit(pooling_request(std::vector<int32_t>(513, 100), PoolingTask::kLastHidden)).ok());
}

}  // namespace
}  // namespace pagoda::executor
