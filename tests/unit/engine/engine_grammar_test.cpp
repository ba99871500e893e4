// Structured output through the engine: every choice (n > 1, greedy and sampled, sampled by the engine or by the
// runner as a device would) follows the grammar and ends with EOS where the grammar ends; logprobs are those of the
// masked distribution.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/engine.h"
#include "fake_model_runner.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"

namespace pagoda::engine {
namespace {

using testing::FakeModelRunner;
using testing::testing_async_scheduling;

constexpr int32_t kVocab = 64;
constexpr int32_t kEos = 0;

// Token t > 0 is the byte 'a' + (t - 1) % 26 repeated 1 + (t - 1) / 26 times ("a".."z", "aa".."zz", "aaa"...).
std::shared_ptr<const grammar::TokenVocabulary> vocab() {
    std::vector<std::string> bytes(kVocab);
    bytes[0] = "<eos>";
    for (int32_t t = 1; t < kVocab; ++t)
        bytes[t] = std::string(1 + (t - 1) / 26, static_cast<char>('a' + (t - 1) % 26));
    const int32_t excluded[] = {kEos};
    return std::make_shared<grammar::TokenVocabulary>(std::move(bytes), excluded);
}

std::shared_ptr<const grammar::CompiledGrammar> regex(const char* pattern) {
    auto src = grammar::regex_grammar(pattern);
    EXPECT_TRUE(src.ok());
    auto g = grammar::compile_grammar(*src);
    EXPECT_TRUE(g.ok());
    return std::make_shared<grammar::CompiledGrammar>(std::move(g).value(), vocab());
}

EngineConfig config() {
    EngineConfig c;
    c.block_size = 4;
    c.num_kv_blocks = 64;
    c.max_model_len = 128;
    c.max_num_seqs = 8;
    c.max_num_batched_tokens = 64;
    c.max_waiting_requests = 100;
    c.eos_token_ids = {kEos};
    c.seed = 5;
    return c;
}

struct Choice {
    std::vector<int32_t> tokens;
    std::vector<TokenLogprobs> logprobs;
    FinishReason reason = FinishReason::kNone;
    std::string message;
};

std::vector<Choice> run(Engine& engine, const Request& r) {
    auto stream = engine.submit(r);
    EXPECT_TRUE(stream.ok()) << stream.message();
    std::vector<Choice> out(r.params.n);
    StreamChunk chunk;
    while ((*stream)->read(chunk)) {
        for (size_t c = 0; c < chunk.choices.size(); ++c) {
            const ChoiceDelta& d = chunk.choices[c];
            out[c].tokens.insert(out[c].tokens.end(), d.token_ids.begin(), d.token_ids.end());
            out[c].logprobs.insert(out[c].logprobs.end(), d.logprobs.begin(), d.logprobs.end());
            if (d.finish_reason != FinishReason::kNone)
                out[c].reason = d.finish_reason, out[c].message = d.finish_message;
        }
    }
    return out;
}

void check(const std::shared_ptr<const grammar::CompiledGrammar>& g, const Choice& c, bool logprobs) {
    ASSERT_FALSE(c.tokens.empty());
    EXPECT_EQ(c.reason, FinishReason::kStop);
    EXPECT_EQ(c.tokens.back(), kEos) << "a finished grammar ends with EOS";
    grammar::GrammarMatcher m(g);
    for (size_t i = 0; i + 1 < c.tokens.size(); ++i)
        ASSERT_TRUE(m.accept_token(c.tokens[i])) << "token " << i << " breaks the grammar";
    EXPECT_TRUE(m.can_end());
    if (!logprobs) return;
    for (size_t i = 0; i < c.logprobs.size(); ++i) {
        const TokenLogprobs& lp = c.logprobs[i];
        // The masked distribution: its top entries are allowed tokens, and their probabilities (all of them when
        // few tokens are allowed) add up to at most 1, with the sampled token among the allowed ones.
        double mass = 0;
        grammar::GrammarMatcher here(g);
        for (size_t k = 0; k < i; ++k)
            here.accept_token(c.tokens[k]);
        for (int32_t k = 0; k < lp.num_top; ++k) {
            const int32_t t = lp.top[k].token;
            grammar::GrammarMatcher probe = here;
            EXPECT_TRUE(t == kEos ? here.can_end() : probe.accept_token(t)) << "top logprob for a masked token " << t;
            mass += std::exp(static_cast<double>(lp.top[k].logprob));
        }
        EXPECT_LE(mass, 1.0 + 1e-4);
        EXPECT_TRUE(std::isfinite(lp.logprob));
    }
}

class EngineGrammar : public ::testing::TestWithParam<bool> {};

TEST_P(EngineGrammar, EveryChoiceFollowsTheGrammar) {
    const bool runner_samples = GetParam();
    EngineConfig c = config();
    FakeModelRunner runner(kVocab, c.num_kv_blocks, c.block_size, 0);
    runner.samples_on_runner = runner_samples;
    auto engine = Engine::create(c, engine_runner(runner));
    ASSERT_TRUE(engine.ok());
    auto g = regex("(ab|c|dd)+e(f|gg)?");
    for (float temperature : {0.0f, 1.0f}) {
        Request r;
        r.prompt_tokens = {3, 4, 5, 6, 7};
        r.params.n = 4;
        r.params.temperature = temperature;
        r.params.max_tokens = 60;
        r.params.logprobs = true;
        r.params.top_logprobs = 5;
        r.params.grammar = g;
        for (const Choice& ch : run(**engine, r))
            check(g, ch, true);
    }
    // With async scheduling the masks wait in the runner for the previous step's token: steps still go out ahead.
    if (testing_async_scheduling()) {
        EXPECT_GT((*engine)->stats().num_steps_launched_ahead, 0);
    }
}

// Reasoning: the output is free until grammar_after_token (</think> in the server), the grammar holds after it. A
// bias makes that token the first draw; the grammar would never allow it ('z' is not in the regex).
TEST_P(EngineGrammar, TheGrammarStartsAfterItsToken) {
    EngineConfig c = config();
    FakeModelRunner runner(kVocab, c.num_kv_blocks, c.block_size, 0);
    runner.samples_on_runner = GetParam();
    auto engine = Engine::create(c, engine_runner(runner));
    ASSERT_TRUE(engine.ok());
    constexpr int32_t kThinkEnd = 26;  // "z"
    Request r;
    r.prompt_tokens = {3, 4, 5};
    r.params.n = 2;
    r.params.max_tokens = 60;
    r.params.grammar = regex("(ab|c|dd)+e");
    r.params.grammar_after_token = kThinkEnd;
    r.params.logit_bias = {{kThinkEnd, 100.0f}};
    for (Choice ch : run(**engine, r)) {
        ASSERT_FALSE(ch.tokens.empty());
        EXPECT_EQ(ch.tokens.front(), kThinkEnd) << "the free part drew the biased token";
        ch.tokens.erase(ch.tokens.begin());
        check(r.params.grammar, ch, false);
    }
}

// A checkpoint that names no EOS token (random-weight ones made by transformers do not): a finished grammar has no
// token left to draw, and the choice ends there with "stop"; a grammar with no way on (its next byte is in no token)
// ends its choice with the reason. Neither may fail the step or the process: the H200 run that found this crashed the
// CPU server and failed every sequence of the CUDA step.
TEST_P(EngineGrammar, NoTokenLeftEndsTheChoiceNotTheStep) {
    EngineConfig c = config();
    c.eos_token_ids.clear();
    FakeModelRunner runner(kVocab, c.num_kv_blocks, c.block_size, 0);
    runner.samples_on_runner = GetParam();
    auto engine = Engine::create(c, engine_runner(runner));
    ASSERT_TRUE(engine.ok());
    for (float temperature : {0.0f, 1.0f}) {
        Request done;
        done.prompt_tokens = {3, 4, 5};
        done.params.n = 3;
        done.params.temperature = temperature;
        done.params.max_tokens = 60;
        done.params.ignore_eos = true;
        // A penalty reads the tokens so far: with async scheduling a choice that ended with no token still has a row
        // in the step launched after it, whose sampling must not read past its tokens.
        done.params.repetition_penalty = 1.1f;
        done.params.grammar = regex("(ab|c)+e");
        for (const Choice& ch : run(**engine, done)) {
            EXPECT_EQ(ch.reason, FinishReason::kStop);
            grammar::GrammarMatcher m(done.params.grammar);
            for (int32_t t : ch.tokens)
                ASSERT_TRUE(m.accept_token(t)) << "token " << t << " breaks the grammar";
            EXPECT_TRUE(m.must_end()) << "the choice ended where the grammar ends";
        }
        Request stuck = done;
        stuck.params.grammar = regex("ab-c");  // no token holds '-'
        for (const Choice& ch : run(**engine, stuck)) {
            EXPECT_EQ(ch.reason, FinishReason::kAbort);
            EXPECT_NE(ch.message.find("the grammar allows no token"), std::string::npos) << ch.message;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(CpuAndRunnerSampling, EngineGrammar, ::testing::Bool());

// An engine over the fake model, for the tests below.
struct FakeEngine {
    EngineConfig c = config();
    FakeModelRunner runner{kVocab, c.num_kv_blocks, c.block_size, 0};
    std::unique_ptr<Engine> engine = std::move(Engine::create(c, engine_runner(runner))).value();
};

TEST(EngineGrammarLimits, MinTokensIsRefused) {
    FakeEngine f;
    Request r;
    r.prompt_tokens = {1, 2};
    r.params.grammar = regex("a");
    r.params.min_tokens = 2;
    auto s = f.engine->submit(r);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("min_tokens"), std::string::npos);
}

TEST(EngineGrammarLimits, OutputStopsAtMaxTokensInsideTheGrammar) {
    FakeEngine f;
    Request r;
    r.prompt_tokens = {1, 2};
    r.params.grammar = regex("a+b");
    r.params.max_tokens = 3;
    r.params.temperature = 0.0f;
    const std::vector<Choice> out = run(*f.engine, r);
    ASSERT_EQ(out.size(), 1u);
    grammar::GrammarMatcher m(r.params.grammar);
    for (int32_t t : out[0].tokens) {
        if (t != kEos) {
            EXPECT_TRUE(m.accept_token(t));
        }
    }
    EXPECT_LE(out[0].tokens.size(), 3u);
}

}  // namespace
}  // namespace pagoda::engine
