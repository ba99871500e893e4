#include <gtest/gtest.h>

#include "grammar/gbnf.h"
#include "grammar_test_util.h"

namespace pagoda::grammar {
namespace {

using testing::full_match;

Grammar compile_gbnf(std::string_view text) {
    auto src = parse_gbnf(text);
    EXPECT_TRUE(src.ok()) << src.message();
    auto g = compile_grammar(*src);
    EXPECT_TRUE(g.ok()) << g.message();
    return std::move(g).value();
}

TEST(Gbnf, LlamaCppArithmeticExample) {
    const Grammar g = compile_gbnf(R"gbnf(
        # from llama.cpp's grammars/arithmetic.gbnf, in spirit
        root  ::= (expr "=" ws term "\n")+
        expr  ::= term ([-+*/] term)*
        term  ::= ident | num | "(" ws expr ")" ws
        ident ::= [a-z] [a-z0-9_]* ws
        num   ::= [0-9]+ ws
        ws    ::= [ \t\n]*
    )gbnf");
    EXPECT_TRUE(full_match(g, "1+2= 3\n"));
    EXPECT_TRUE(full_match(g, "(a*b)/c= x1\n2=2\n"));
    EXPECT_FALSE(full_match(g, "1+= 3\n"));
    EXPECT_FALSE(full_match(g, "1+2=3"));
}

TEST(Gbnf, AlternativesOnFollowingLinesAndQuotes) {
    const Grammar g = compile_gbnf("root ::= \"yes\"\n  | 'no'\n  | maybe\nmaybe ::= \"m\" \"aybe\"{1,2}\n");
    for (const char* s : {"yes", "no", "maybe", "maybeaybe"})
        EXPECT_TRUE(full_match(g, s)) << s;
    for (const char* s : {"ye", "yesno", "m", "maybeaybeaybe"})
        EXPECT_FALSE(full_match(g, s)) << s;
}

TEST(Gbnf, LeftRecursionAndEmptyAlternatives) {
    const Grammar g =
        compile_gbnf("root ::= list\nlist ::= list \",\" item | item\nitem ::= \"x\" opt\nopt ::= \"!\" | \n");
    EXPECT_TRUE(full_match(g, "x"));
    EXPECT_TRUE(full_match(g, "x,x!,x"));
    EXPECT_FALSE(full_match(g, "x,"));
}

TEST(Gbnf, ClassesEscapesAndAnyChar) {
    const Grammar g = compile_gbnf(R"gbnf(root ::= [^"\\] [\x41-\x43] "\u00e9" . "\t" [\]])gbnf");
    EXPECT_TRUE(full_match(g, "zB\xc3\xa9\xe2\x82\xac\t]"));
    EXPECT_FALSE(full_match(g, "\"B\xc3\xa9x\t]"));
    EXPECT_FALSE(full_match(g, "zD\xc3\xa9x\t]"));
}

TEST(Gbnf, RepetitionForms) {
    const Grammar g = compile_gbnf("root ::= \"a\"{2} \"b\"{1,} \"c\"{,1} \"d\"{0,2}");
    EXPECT_TRUE(full_match(g, "aab"));
    EXPECT_TRUE(full_match(g, "aabbbcdd"));
    EXPECT_FALSE(full_match(g, "ab"));
    EXPECT_FALSE(full_match(g, "aabccd"));
    EXPECT_FALSE(full_match(g, "aabddd"));
}

TEST(Gbnf, ErrorsSayWhat) {
    struct Bad {
        const char* text;
        const char* says;
    };
    for (const Bad& b : {Bad{"root ::= \"a", "unterminated literal"}, Bad{"root ::= [a-", "unterminated"},
                         Bad{"root ::= (a", "missing ')'"}, Bad{"item ::= \"a\"", "no 'root' rule"},
                         Bad{"root ::= \"a\"\nroot ::= \"b\"", "defined twice"}, Bad{"root \"a\"", "::="},
                         Bad{"root ::= \"a\"{3,1}", "n < m"}, Bad{"", "empty"}, Bad{"root ::= @", "unexpected"},
                         Bad{"root ::= \"\\q\"", "unknown escape"}}) {
        auto r = parse_gbnf(b.text);
        ASSERT_FALSE(r.ok()) << b.text;
        EXPECT_NE(r.message().find(b.says), std::string::npos) << r.message();
    }
    auto undefined = parse_gbnf("root ::= item");
    ASSERT_TRUE(undefined.ok());
    auto g = compile_grammar(*undefined);
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.message().find("'item' is used but not defined"), std::string::npos) << g.message();
}

TEST(Gbnf, PrintedGrammarReadsBackTheSame) {
    auto src = parse_gbnf(R"gbnf(root ::= ("a" | [b-d\]]+) x{2,3} "\"q\"" [^\n]? 
                             x ::= "\u00e9" | "\n")gbnf");
    ASSERT_TRUE(src.ok()) << src.message();
    const std::string text = to_gbnf(*src);
    auto again = parse_gbnf(text);
    ASSERT_TRUE(again.ok()) << again.message() << "\n" << text;
    EXPECT_EQ(to_gbnf(*again), text);
}

}  // namespace
}  // namespace pagoda::grammar
