#include "cli/args.h"

#include <gtest/gtest.h>

namespace pagoda::cli {
namespace {

ArgParser make_parser() {
    ArgParser p("pagoda x MODEL [options]", "test");
    p.add_positional("MODEL", "model dir");
    p.add_option("ids", "IDS", "token ids");
    p.add_option("kw", "K=V", "keyword", true);
    p.add_switch("json", "json output");
    return p;
}

TEST(ArgParser, ParsesOptionsSwitchesAndPositionals) {
    auto p = make_parser();
    std::vector<std::string_view> args = {"dir", "--ids", "1 2", "--kw=a=1", "--kw", "b=2", "--json"};
    ASSERT_TRUE(p.parse(args).ok());
    EXPECT_EQ(*p.positional("MODEL"), "dir");
    EXPECT_EQ(*p.get("ids"), "1 2");
    EXPECT_EQ(p.get_all("kw"), (std::vector<std::string>{"a=1", "b=2"}));
    EXPECT_TRUE(p.has("json"));
    EXPECT_FALSE(p.help_requested());
}

TEST(ArgParser, ErrorsNameTheProblem) {
    auto p1 = make_parser();
    std::vector<std::string_view> unknown = {"dir", "--nope"};
    EXPECT_NE(p1.parse(unknown).message().find("--nope"), std::string::npos);
    auto p2 = make_parser();
    std::vector<std::string_view> no_value = {"dir", "--ids"};
    EXPECT_NE(p2.parse(no_value).message().find("needs a value"), std::string::npos);
    auto p3 = make_parser();
    std::vector<std::string_view> missing = {"--json"};
    EXPECT_NE(p3.parse(missing).message().find("MODEL"), std::string::npos);
    auto p4 = make_parser();
    std::vector<std::string_view> extra = {"a", "b"};
    EXPECT_FALSE(p4.parse(extra).ok());
}

TEST(ArgParser, HelpStopsParsingAndListsOptions) {
    auto p = make_parser();
    std::vector<std::string_view> args = {"--help", "--bogus"};
    ASSERT_TRUE(p.parse(args).ok());
    EXPECT_TRUE(p.help_requested());
    EXPECT_NE(p.help_text().find("--kw K=V"), std::string::npos);
}

TEST(ParseTokenIds, AcceptsTheWaysPeopleTypeIds) {
    for (std::string_view text : {"1 2 3", "1,2,3", "[1, 2, 3]", " 1\t2\n3\n"}) {
        auto ids = parse_token_ids(text);
        ASSERT_TRUE(ids.ok()) << text << ": " << ids.message();
        EXPECT_EQ(*ids, (std::vector<int32_t>{1, 2, 3})) << text;
    }
    auto empty = parse_token_ids("  ");
    ASSERT_TRUE(empty.ok());
    EXPECT_TRUE(empty->empty());
}

TEST(ParseTokenIds, NamesTheBadIdAndWhereItIs) {
    for (auto [text, bad] : {std::pair{"1 x2 3", "'x2' (at character 2)"},
                             {"1 -5", "'-5' (at character 2)"},
                             {"7 99999999999", "'99999999999'"},
                             {"4 5a", "'5a'"}}) {
        auto ids = parse_token_ids(text);
        ASSERT_FALSE(ids.ok()) << text;
        EXPECT_NE(ids.message().find(bad), std::string::npos) << ids.message();
    }
}

}  // namespace
}  // namespace pagoda::cli
