// Bounded repetitions (a string's minLength/maxLength, a regex or GBNF {m,n}) under the budget probe: masks at every
// count come from one entry per kind of position, so these tests compare them with the reference walk (mask_check.h)
// over many random grammars and prefixes, on a small vocabulary and on the real Qwen3 one, and check that the counts
// of a long string really share entries (no vocabulary walk per character).
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "mask_check.h"
#include "qwen_vocabulary.h"

namespace pagoda::grammar {
namespace {

using testing::bind_vocab;
using testing::check_walks;
using testing::WalkStats;

Result<GrammarSource> schema_grammar(const std::string& text) {
    auto schema = Json::parse(text);
    if (!schema.ok()) return Status::error("bad test schema " + text);
    return json_schema_grammar(*schema);
}

// `"minLength":a,"maxLength":b,` with either left out now and then.
std::string length_bounds(std::mt19937& rng) {
    const int lo = static_cast<int>(rng() % 4);
    const int hi = rng() % 4 == 0 ? 64 : lo + static_cast<int>(rng() % 7);
    std::string s;
    if (rng() % 3 != 0) s += "\"minLength\":" + std::to_string(lo) + ",";
    if (rng() % 5 != 0 || s.empty()) s += "\"maxLength\":" + std::to_string(hi) + ",";
    return s;
}

std::string random_schema(std::mt19937& rng) {
    if (rng() % 3 == 0) {
        const int lo = static_cast<int>(rng() % 3);
        return R"({"type":"array","minItems":)" + std::to_string(lo) +
               ",\"maxItems\":" + std::to_string(lo + static_cast<int>(rng() % 3)) + R"(,"items":{)" +
               length_bounds(rng) + R"("type":"string"}})";
    }
    std::string props, required;
    const int n = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < n; ++i) {
        const std::string name(1, static_cast<char>('a' + i));
        props += (i ? "," : "") + ("\"" + name + "\":{") + length_bounds(rng) + "\"type\":\"string\"}";
        if (rng() % 2) required += (required.empty() ? "\"" : ",\"") + name + "\"";
    }
    return R"({"type":"object","properties":{)" + props + "},\"required\":[" + required + "]}";
}

std::string random_regex(std::mt19937& rng) {
    // Ambiguous counts, a nullable repeated group and nested bounds are here on purpose: they take the exact paths.
    static const char* const kShapes[] = {
        "[a-z]{%d,%d}",     "(ab|c){%d,%d}x?", "[0-9]{%d}-[a-z]{%d,%d}", "(é|a|\\\\){%d,%d}\"",
        "[^\"]{%d,%d}",     "(a|aa){%d,%d}",   "a{0,%d}a{%d,%d}",        "(a?b?){%d,%d}c",
        "(x{1,2}y){%d,%d}", ".{%d,%d}!",       "(yes|no){%d,%d}",        "[a-c]{%d,%d}(ok)?[a-c]{0,%d}",
    };
    const char* shape = kShapes[rng() % std::size(kShapes)];
    const int a = static_cast<int>(rng() % 4), b = a + static_cast<int>(rng() % 6), c = b + static_cast<int>(rng() % 4);
    char buf[128];
    std::snprintf(buf, sizeof buf, shape, a, b, c);
    return buf;
}

std::shared_ptr<const TokenVocabulary> vocab_with_runs() {
    return testing::small_vocab({"abc", "hello", "aaaa", "aa", "ab", "xyxy", "a\"", "\"x", "c\",\"", "no\"}",
                                 "\xc3\xa9\"", "\xc3\xa9\xc3\xa9\xc3\xa9", "zz", "---", "yesno", "\"]", "\",\"", "okok",
                                 "1-a"});
}

TEST(BoundedRepeat, RandomSchemasMatchTheReference) {
    auto vocab = vocab_with_runs();
    std::mt19937 rng(20);
    WalkStats total;
    for (int i = 0; i < 60; ++i) {
        const std::string schema = random_schema(rng);
        SCOPED_TRACE(schema);
        auto g = bind_vocab(schema_grammar(schema), vocab);
        const WalkStats s = check_walks(g, 4, 40, static_cast<uint32_t>(i));
        total.hits += s.hits, total.probed += s.probed;
        if (HasFailure()) return;
    }
    EXPECT_GT(total.probed, 0) << "no mask was shared by a repetition's counts";
    EXPECT_GT(total.hits, 0);
}

TEST(BoundedRepeat, RandomRegexesAndGbnfMatchTheReference) {
    auto vocab = vocab_with_runs();
    std::mt19937 rng(21);
    WalkStats total;
    for (int i = 0; i < 80; ++i) {
        const std::string re = random_regex(rng);
        SCOPED_TRACE(re);
        const WalkStats s = check_walks(bind_vocab(regex_grammar(re), vocab), 4, 20, static_cast<uint32_t>(i));
        total.hits += s.hits, total.probed += s.probed;
        if (HasFailure()) return;
    }
    for (const char* gbnf :
         {"root ::= \"[\" item{1,3} (\",\" item){0,4} \"]\"\nitem ::= [a-c]{0,5} | \"no\"",
          "root ::= ([a-z] | \"\\\"\" ){2,9} \"!\"{1,2}", "root ::= x{3,6}\nx ::= \"a\" | \"bc\" | \"\""}) {
        SCOPED_TRACE(gbnf);
        const WalkStats s = check_walks(bind_vocab(parse_gbnf(gbnf), vocab), 6, 25, 7);
        total.probed += s.probed;
        if (HasFailure()) return;
    }
    EXPECT_GT(total.probed, 0);
}

TEST(BoundedRepeat, QwenVocabularyMatchesTheReference) {
    auto qwen = testing::load_qwen_vocabulary();
    if (!qwen.vocab) GTEST_SKIP() << "the Qwen3 vocabulary is not available: " << qwen.error;
    std::mt19937 rng(22);
    WalkStats total;
    auto run = [&](const Result<GrammarSource>& src, uint32_t seed) {
        const WalkStats s = check_walks(bind_vocab(src, qwen.vocab), 1, 24, seed);
        total.hits += s.hits, total.probed += s.probed;
    };
    for (uint32_t i = 0; i < 5 && !HasFailure(); ++i) {
        const std::string schema = random_schema(rng);
        SCOPED_TRACE(schema);
        run(schema_grammar(schema), i);
    }
    for (const char* s :
         {R"({"type":"string","minLength":20,"maxLength":30})",
          R"({"type":"object","properties":{"a":{"type":"string","maxLength":64}},"required":["a"]})"}) {
        if (HasFailure()) break;
        SCOPED_TRACE(s);
        run(schema_grammar(s), 100);
    }
    for (const char* re : {"[a-z ]{3,40}\\.", "(\\w+ ){2,5}end", ".{0,12}"}) {
        if (HasFailure()) break;
        SCOPED_TRACE(re);
        run(regex_grammar(re), 200);
    }
    EXPECT_GT(total.probed, 0);
}

// Along a 64-character string with maxLength 64 (its last steps with almost no budget left), only the first step
// of a kind walks the vocabulary; every other step takes its mask from the cache and walks only the few tokens that
// close the string.
TEST(BoundedRepeat, OneWalkServesEveryCountOfAString) {
    auto qwen = testing::load_qwen_vocabulary();
    if (!qwen.vocab) GTEST_SKIP() << "the Qwen3 vocabulary is not available: " << qwen.error;
    auto g = bind_vocab(schema_grammar(R"({"type":"string","minLength":3,"maxLength":64})"), qwen.vocab,
                        kCacheMinWalkedBytes);
    const std::string text = "The Analytical Engine weaves algebraic patterns like a loom does";
    ASSERT_EQ(text.size(), 64u);
    const std::vector<int32_t> answer = qwen.tokenizer->encode("\"" + text + "\"", /*parse_special=*/false);
    GrammarMatcher m(g);
    int64_t full_walk = 0;
    int misses = 0;
    std::vector<int64_t> hit_bytes;
    for (int32_t token : answer) {
        std::vector<uint32_t> mask(mask_words(qwen.vocab->size()), 0);
        m.fill_mask(mask);
        ASSERT_TRUE((mask[token / 32] >> (token % 32)) & 1);
        if (m.last_stats().cache_hit)
            hit_bytes.push_back(m.last_stats().walked_bytes);
        else if (m.last_stats().walked_bytes > 100'000)
            ++misses, full_walk = std::max(full_walk, m.last_stats().walked_bytes);
        ASSERT_TRUE(m.accept_token(token));
    }
    // One walk below minLength, one between the bounds; the opening quote's position is cheap and not cached.
    EXPECT_LE(misses, 2);
    EXPECT_GE(hit_bytes.size(), answer.size() - 4);
    for (int64_t b : hit_bytes)
        EXPECT_LT(b * 50, full_walk) << "a cached step walked " << b << " bytes (a full walk: " << full_walk << ")";
}

}  // namespace
}  // namespace pagoda::grammar
