// The matcher on the real Qwen3 vocabulary (151,665 tokens, byte-level BPE with tokens that split UTF-8 characters):
// along the tokens of a valid JSON answer, the mask equals the brute-force "does this token's byte string fit here"
// check over every token, on the first pass (cache filling) and on a second pass (masks from the cache). Skips,
// saying why, when the vocabulary is absent.
#include <gtest/gtest.h>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "qwen_vocabulary.h"

namespace pagoda::grammar {
namespace {

TEST(QwenVocab, MasksEqualBruteForceAlongAnAnswer) {
    auto qwen = testing::load_qwen_vocabulary();
    if (!qwen.vocab) GTEST_SKIP() << "the Qwen3 vocabulary is not available: " << qwen.error;
    const auto& vocab = qwen.vocab;
    const Tokenizer* tok = &*qwen.tokenizer;
    auto schema = Json::parse(R"({"type":"object","properties":{"name":{"type":"string"},
        "tags":{"type":"array","items":{"type":"string"}},"n":{"type":"integer","minimum":-5,"maximum":500}},
        "required":["name","tags","n"]})");
    ASSERT_TRUE(schema.ok());
    auto g = compile_grammar(*json_schema_grammar(*schema));
    ASSERT_TRUE(g.ok());
    auto compiled = std::make_shared<const CompiledGrammar>(std::move(g).value(), vocab);
    // Multi-byte characters split across tokens, escapes, and a closing quote inside a longer token.
    const std::vector<int32_t> answer =
        tok->encode(R"({"name":"Zoë \"Ω\" 東京 😀","tags":["a,b","","x"],"n":417})", /*parse_special=*/false);
    for (int pass = 0; pass < 2; ++pass) {
        GrammarMatcher m(compiled);
        int hits = 0;
        for (size_t step = 0; step <= answer.size(); ++step) {
            std::vector<uint32_t> mask(mask_words(vocab->size()), 0);
            const bool eos = m.fill_mask(mask);
            hits += m.last_stats().cache_hit;
            EXPECT_EQ(eos, step == answer.size()) << "step " << step;
            if (step % 3 == 0 || step == answer.size()) {
                for (int32_t id = 0; id < vocab->size(); ++id) {
                    GrammarMatcher probe = m;
                    const bool want = probe.accept_token(id);
                    ASSERT_EQ(((mask[id / 32] >> (id % 32)) & 1) != 0, want)
                        << "pass " << pass << " step " << step << " token " << id << " '" << vocab->bytes(id) << "'";
                }
            }
            if (step < answer.size()) {
                ASSERT_TRUE(m.accept_token(answer[step])) << "step " << step;
            }
        }
        if (pass == 1) {
            EXPECT_GT(hits, 0);
        }
    }
}

}  // namespace
}  // namespace pagoda::grammar
