// The matcher's masks against brute force: at every step of a random walk through the grammar, the mask must equal
// "this token's bytes are accepted from here" checked token by token on a copy of the matcher. The cache threshold
// is 0 so that cached masks (and their context-dependent rechecks) are exercised from the second visit on.
#include <gtest/gtest.h>

#include <random>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"

namespace pagoda::grammar {
namespace {

constexpr int32_t kEos = 0;

// Every single byte (as byte-level BPE has), then multi-byte pieces: tokens that cross JSON structure, tokens that
// are part of a UTF-8 character, and duplicates.
std::shared_ptr<const TokenVocabulary> small_vocab() {
    std::vector<std::string> t{"<eos>"};
    for (int c = 0; c < 256; ++c)
        t.emplace_back(1, static_cast<char>(c));
    for (const char* s : {"{\"",          "\":",      "\",",
                          "\"}",          "\"}]",     "name",
                          "\"name\":\"",  "\xc3\xa9", "\xc3",
                          "\xa9",         "\xe2\x82", "\xac\"",
                          "\xe2\x82\xac", "123",      "true",
                          "null",         "\\n",      "\\u00",
                          "e9",           "ab\"c",    "\",\"",
                          "\":[",         "],\"",     "\n",
                          "\t",           " \"",      "\\\"",
                          "2024-",        "01",       "-0",
                          ".5",           "e+",       "yes",
                          "no",           "no way",   "\"}\"",
                          "{}",           "[]",       "\xf0\x9f\x98\x80",
                          "\x80",         "a\\",      "ok"})
        t.emplace_back(s);
    t.emplace_back("true");  // a duplicate id for the same bytes
    const int32_t eos[] = {kEos};
    return std::make_shared<TokenVocabulary>(std::move(t), eos);
}

std::shared_ptr<const CompiledGrammar> bind_vocab(const Result<GrammarSource>& src,
                                                  std::shared_ptr<const TokenVocabulary> vocab) {
    EXPECT_TRUE(src.ok()) << src.message();
    auto g = compile_grammar(*src);
    EXPECT_TRUE(g.ok()) << g.message();
    return std::make_shared<CompiledGrammar>(std::move(g).value(), std::move(vocab), /*cache_min_walked_bytes=*/0);
}

// Random walks; returns how many masks came from the cache.
int check_walks(const std::shared_ptr<const CompiledGrammar>& g, int walks, int max_steps, uint32_t seed) {
    const TokenVocabulary& v = g->vocab();
    std::mt19937 rng(seed);
    int hits = 0;
    for (int w = 0; w < walks; ++w) {
        GrammarMatcher m(g);
        for (int step = 0; step < max_steps; ++step) {
            std::vector<uint32_t> mask(mask_words(v.size()), 0);
            const bool eos = m.fill_mask(mask);
            hits += m.last_stats().cache_hit;
            std::vector<int32_t> allowed;
            for (int32_t id = 0; id < v.size(); ++id) {
                const bool bit = (mask[id / 32] >> (id % 32)) & 1;
                GrammarMatcher copy = m;
                const bool brute = id != kEos && copy.accept_token(id);
                EXPECT_EQ(bit, brute) << "walk " << w << " step " << step << " token " << id << " '" << v.bytes(id)
                                      << "'";
                if (bit) allowed.push_back(id);
            }
            EXPECT_EQ(eos, m.can_end());
            if (allowed.empty()) {
                EXPECT_TRUE(eos) << "a dead end: no token and no EOS";
                break;
            }
            // End now and then when allowed, so that walks also finish.
            if (eos && rng() % 4 == 0) break;
            const int32_t pick = allowed[rng() % allowed.size()];
            EXPECT_TRUE(m.accept_token(pick));
        }
    }
    return hits;
}

TEST(Matcher, JsonSchemaMasksEqualBruteForce) {
    auto schema = Json::parse(R"({"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"},
        "list":{"type":"array","items":{"enum":["ab\"c","x"]}},"d":{"type":"string","format":"date"}},
        "required":["name"]})");
    ASSERT_TRUE(schema.ok());
    auto g = bind_vocab(json_schema_grammar(*schema), small_vocab());
    const int hits = check_walks(g, 12, 40, 1);
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
