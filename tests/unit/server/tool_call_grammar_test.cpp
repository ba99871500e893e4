// The forced tool-call grammars: what they accept is a call the matching tool parser reads back, with arguments
// of the types the function's schema declares.
#include "server/openai/tool_call_grammar.h"

#include <gtest/gtest.h>

#include "../grammar/grammar_test_util.h"
#include "chat/output/tool_parser.h"
#include "grammar/grammar.h"

namespace pagoda::server::openai {
namespace {

using grammar::testing::full_match;

const char* kTools = R"([{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object",
    "$defs": {"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "unit": {"$ref": "#/$defs/unit"},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "hours": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 23}, "maxItems": 3},
        "detail": {"type": "object", "properties": {"wind": {"type": "boolean"}}, "required": ["wind"]},
        "level": {"type": ["integer", "null"], "maximum": 5}},
    "required": ["city", "days"]}}},
  {"type": "function", "function": {"name": "now"}}])";

grammar::Grammar xml_grammar(bool parallel) {
    auto tools = Json::parse(kTools);
    EXPECT_TRUE(tools.ok());
    auto src = xml_tool_call_grammar(*tools, parallel);
    EXPECT_TRUE(src.ok()) << src.message();
    auto g = grammar::compile_grammar(*src);
    EXPECT_TRUE(g.ok()) << g.message();
    return std::move(g).value();
}

std::string call(const std::string& params, const std::string& name = "get_weather") {
    return "<tool_call>\n<function=" + name + ">\n" + params + "</function>\n</tool_call>";
}

std::string param(const std::string& key, const std::string& value) {
    return "<parameter=" + key + ">\n" + value + "\n</parameter>\n";
}

TEST(XmlToolCallGrammar, AcceptsCallsInTheParsersFormat) {
    const grammar::Grammar g = xml_grammar(false);
    EXPECT_TRUE(full_match(g, call(param("city", "Paris") + param("days", "3"))));
    EXPECT_TRUE(
        full_match(g, call(param("city", "New\nYork, \"NY\"") + param("days", "7") + param("unit", "celsius") +
                           param("code", "JFK") + param("hours", "[0,23]") + param("detail", "{\"wind\":true}"))));
    EXPECT_TRUE(full_match(g, call(param("city", "nul") + param("days", "1") + param("level", "null"))));
    EXPECT_TRUE(full_match(g, call(param("city", "") + param("days", "1"))));
    EXPECT_TRUE(full_match(g, call("", "now")));
}

TEST(XmlToolCallGrammar, RefusesWhatTheParserWouldReadWrong) {
    const grammar::Grammar g = xml_grammar(false);
    for (const std::string& bad : {
             call(param("days", "3")),                           // a required parameter missing
             call(param("days", "3") + param("city", "Paris")),  // out of the schema's order
             call(param("city", "null") + param("days", "3")),   // read back as null
             call(param("city", "NuLL") + param("days", "3")),   // so is any case of it
             call(param("city", "a<b") + param("days", "3")),    // '<' could start a closing tag
             call(param("city", "Paris") + param("days", "8")),  // out of bounds
             call(param("city", "Paris") + param("days", "3") + param("unit", "kelvin")),
             call(param("city", "Paris") + param("days", "3") + param("code", "jfk")),
             call(param("city", "Paris") + param("days", "3") + param("hours", "[1,2,3,4]")),
             call(param("city", "Paris") + param("days", "3") + param("extra", "1")), call("", "later"),
             call(param("city", "a") + param("days", "1")) + "\n" + call("", "now"),  // not parallel
         })
        EXPECT_FALSE(full_match(g, bad)) << bad;
    EXPECT_TRUE(full_match(xml_grammar(true), call(param("city", "a") + param("days", "1")) + "\n" + call("", "now")));
}

TEST(XmlToolCallGrammar, WhatItAcceptsParsesToTypedArguments) {
    const std::string text = call(param("city", "Paris") + param("days", "3") + param("unit", "celsius") +
                                  param("hours", "[1,2]") + param("detail", "{\"wind\":false}") + param("level", "4"));
    ASSERT_TRUE(full_match(xml_grammar(false), text));
    auto tools = Json::parse(kTools);
    chat::ToolParserOptions options;
    options.tools = &*tools;
    options.id_seed = 1;
    const chat::ToolParseResult r = chat::parse_tool_calls(chat::ToolParserKind::kQwen3Coder, text, options);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    auto args = Json::parse(r.calls[0].arguments);
    ASSERT_TRUE(args.ok()) << r.calls[0].arguments;
    EXPECT_EQ(args->dump(),
              R"({"city":"Paris","days":3,"unit":"celsius","hours":[1,2],"detail":{"wind":false},"level":4})");
}

TEST(XmlToolCallGrammar, ABadPatternIsAnErrorNamingTheParameter) {
    auto tools = Json::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object",
        "properties":{"p":{"type":"string","pattern":"(a)\\1"}}}}}])");
    auto src = xml_tool_call_grammar(*tools, false);
    ASSERT_FALSE(src.ok());
    EXPECT_NE(src.message().find("parameter 'p'"), std::string::npos) << src.message();
}

}  // namespace
}  // namespace pagoda::server::openai
