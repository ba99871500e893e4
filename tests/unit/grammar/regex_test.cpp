#include <gtest/gtest.h>

#include "grammar/regex.h"
#include "grammar_test_util.h"

namespace pagoda::grammar {
namespace {

using testing::full_match;

Grammar compile_regex(std::string_view pattern) {
    auto src = regex_grammar(pattern);
    EXPECT_TRUE(src.ok()) << pattern << ": " << src.message();
    auto g = compile_grammar(*src);
    EXPECT_TRUE(g.ok()) << g.message();
    return std::move(g).value();
}

struct Case {
    const char* pattern;
    std::vector<const char*> yes, no;
};

TEST(Regex, FullMatchLikePython) {
    const std::vector<Case> cases = {
        {"abc", {"abc"}, {"ab", "abcd", ""}},
        {"a|bc|", {"a", "bc", ""}, {"b", "abc"}},
        {"a*b+c?", {"b", "aab", "abbbc", "bc"}, {"a", "ac", "abcc"}},
        {"x{3}", {"xxx"}, {"xx", "xxxx"}},
        {"x{2,}", {"xx", "xxxxx"}, {"x"}},
        {"x{1,3}y", {"xy", "xxxy"}, {"y", "xxxxy"}},
        {"x{,2}", {"", "x", "xx"}, {"xxx"}},
        {"(ab)+", {"ab", "abab"}, {"aba", ""}},
        {"(?:a|b)(?P<n>c)", {"ac", "bc"}, {"c", "abc"}},
        {"[a-c0-2_]+", {"a1_", "cc"}, {"d", "3", ""}},
        {"[^a-z]", {"A", "1", "\xc3\xa9"}, {"a", "z", "AB"}},
        {"\\d{2}-\\w+\\s\\S", {"12-ab_9 x"}, {"1a-ab x", "12-ab  "}},
        {"[\\d.]+", {"3.14"}, {"3,14"}},
        {"\\D\\W", {"a-"}, {"1-", "a_"}},
        {".", {"a", "\xe2\x82\xac", "\xf0\x9f\x98\x80"}, {"\n", "ab"}},
        {"\\x41\\u00e9\\.\\*", {"A\xc3\xa9.*"}, {"Ae.*"}},
        {"^a+$", {"aaa"}, {""}},
        {"[]a]", {"]", "a"}, {"b"}},
        {"a+?b*?", {"a", "aab"}, {"b"}},
        {"x{a}", {"x{a}"}, {"x"}},
        {"[\xc3\xa9-\xc3\xbf]", {"\xc3\xa9", "\xc3\xbf"}, {"\xc3\xa8", "e"}},
    };
    for (const Case& c : cases) {
        const Grammar g = compile_regex(c.pattern);
        for (const char* s : c.yes)
            EXPECT_TRUE(full_match(g, s)) << "/" << c.pattern << "/ should match '" << s << "'";
        for (const char* s : c.no)
            EXPECT_FALSE(full_match(g, s)) << "/" << c.pattern << "/ should not match '" << s << "'";
    }
}

TEST(Regex, PartialUtf8IsNotAMatch) {
    const Grammar g = compile_regex(".");
    EXPECT_FALSE(full_match(g, "\xe2\x82"));  // the first two bytes of the euro sign
    EXPECT_FALSE(full_match(g, "\x80"));      // a lone continuation byte
}

TEST(Regex, RefusesWhatAGrammarCannotExpress) {
    for (const char* p : {"a**", "a{2}{3}", "(a)\\1", "(?=a)", "(?!a)", "(?<=a)b", "\\bword", "(?i)abc", "a++", "*a",
                          "(ab", "ab)", "[ab", "a{3,2}", "\\", "\\q", "a$b", "a^b"}) {
        auto r = parse_regex(p);
        EXPECT_FALSE(r.ok()) << p;
        if (!r.ok()) {
            EXPECT_NE(r.message().find("regex:"), std::string::npos) << r.message();
        }
    }
}

TEST(Regex, HugeRepetitionIsAnErrorNotAnAllocation) {
    auto src = regex_grammar("a{9999999}");
    if (src.ok()) {
        EXPECT_FALSE(compile_grammar(*src).ok());
    }
}

}  // namespace
}  // namespace pagoda::grammar
