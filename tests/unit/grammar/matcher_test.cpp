// The matcher's masks against brute force (mask_check.h): at every step of a random walk through the grammar, the mask
// must equal "this token's bytes are accepted from here" checked token by token. The cache threshold is 0 so that
// cached masks (and their context-dependent rechecks) are exercised from the second visit on.
#include <gtest/gtest.h>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"
#include "mask_check.h"

namespace pagoda::grammar {
namespace {

using testing::bind_vocab;
using testing::check_walks;
using testing::small_vocab;

TEST(Matcher, JsonSchemaMasksEqualBruteForce) {
    auto schema = Json::parse(R"({"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"},
        "list":{"type":"array","items":{"enum":["ab\"c","x"]}},"d":{"type":"string","format":"date"}},
        "required":["name"]})");
    ASSERT_TRUE(schema.ok());
    auto g = bind_vocab(json_schema_grammar(*schema), small_vocab());
    const int hits = check_walks(g, 12, 40, 1).hits;
    EXPECT_GT(hits, 0) << "no mask came from the cache";
    EXPECT_GT(g->cache_entries(), 0u);
}

TEST(Matcher, JsonObjectMasksEqualBruteForce) {
    auto g = bind_vocab(json_object_grammar(), small_vocab());
    check_walks(g, 10, 40, 2);
}

TEST(Matcher, RegexAndGbnfMasksEqualBruteForce) {
    check_walks(bind_vocab(regex_grammar("(\\d{3}|[a-f]+)-(é|€|😀)*\\.\\w{0,3}"), small_vocab()), 10, 20, 3);
    check_walks(bind_vocab(parse_gbnf("root ::= item (\",\" item)*\nitem ::= \"\\\"\" [^\"\\\\]* \"\\\"\" | \"null\""),
                           small_vocab()),
                10, 30, 4);
}

TEST(Matcher, ChoiceEndsWithOnlyEos) {
    auto g = bind_vocab(choice_grammar({"yes", "no", "no way"}), small_vocab());
    GrammarMatcher m(g);
    const TokenVocabulary& v = g->vocab();
    std::vector<uint32_t> mask(mask_words(v.size()), 0);
    EXPECT_FALSE(m.fill_mask(mask));
    ASSERT_TRUE(m.accept_bytes("no"));
    EXPECT_TRUE(m.can_end());
    EXPECT_FALSE(m.must_end());  // " way" may follow
    ASSERT_TRUE(m.accept_bytes(" way"));
    std::fill(mask.begin(), mask.end(), 0u);
    EXPECT_TRUE(m.fill_mask(mask));
    EXPECT_TRUE(m.must_end());
    for (uint32_t w : mask)
        EXPECT_EQ(w, 0u) << "only EOS may follow a finished choice";
    EXPECT_FALSE(m.accept_bytes("x"));
}

TEST(Matcher, RejectedTokenLeavesStateUnchanged) {
    auto g = bind_vocab(regex_grammar("ab"), small_vocab());
    GrammarMatcher m(g);
    EXPECT_FALSE(m.accept_bytes("ax"));
    EXPECT_TRUE(m.accept_bytes("a"));
    EXPECT_FALSE(m.accept_bytes("a"));
    EXPECT_TRUE(m.accept_bytes("b"));
    EXPECT_TRUE(m.can_end());
}

TEST(Matcher, PartialUtf8TokensKeepTheMatcherInsideTheCharacter) {
    auto g = bind_vocab(regex_grammar("é€"), small_vocab());
    GrammarMatcher m(g);
    EXPECT_TRUE(m.accept_bytes("\xc3"));
    EXPECT_FALSE(m.can_end());
    EXPECT_TRUE(m.accept_bytes("\xa9\xe2\x82"));
    EXPECT_FALSE(m.accept_bytes("\xad"));
    EXPECT_TRUE(m.accept_bytes("\xac"));
    EXPECT_TRUE(m.can_end());
}

}  // namespace
}  // namespace pagoda::grammar
