// hermes tool calls as the Qwen2.5/Qwen3 chat templates write them:
//   '<tool_call>\n{"name": "' + name + '", "arguments": ' + (arguments | tojson) + '}\n</tool_call>'
// with '\n' before each call after content or a previous call. Expected results follow vLLM's
// Hermes2ProToolParser: arguments = json.dumps(arguments), content = the text before the calls,
// and the whole output returned as content when a call is not valid JSON.
#include <gtest/gtest.h>

#include "chat/output/py_json.h"
#include "common/json.h"
#include "tool_test_util.h"

namespace pagoda::chat {
namespace {

using testing::check_chunkings;

constexpr auto kHermes = ToolParserKind::kHermes;

Json parse(std::string_view s) {
    auto r = Json::parse(s);
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : Json();
}

// What the Qwen3 template renders for one call (HF tojson = json.dumps).
std::string render_call(std::string_view name, const Json& args) {
    return "<tool_call>\n{\"name\": \"" + std::string(name) + "\", \"arguments\": " + py_json_dump(args) +
           "}\n</tool_call>";
}

TEST(HermesToolParser, OneCallFromTemplate) {
    const Json args = parse(R"({"location": "Paris, France", "unit": "celsius", "days": 3, "x": [1.5, null, true]})");
    const auto r = check_chunkings(kHermes, render_call("get_weather", args));
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(r.calls[0].arguments, py_json_dump(args));  // vLLM: json.dumps(arguments)
    EXPECT_EQ(parse(r.calls[0].arguments), args);
    EXPECT_EQ(r.content, "");
}

TEST(HermesToolParser, ContentThenSeveralCalls) {
    const Json a1 = parse(R"({"city": "Tokyo"})");
    const Json a2 = parse(R"({"city": "\u5317\u4eac", "note": "a \"quoted\" <tag> </tool_call\n"})");
    const Json a3 = parse(R"({})");
    const std::string text = "Let me check both cities.\n" + render_call("get_weather", a1) + "\n" +
                             render_call("get_weather", a2) + "\n" + render_call("get_time", a3);
    const auto r = check_chunkings(kHermes, text);
    ASSERT_EQ(r.calls.size(), 3u);
    EXPECT_EQ(r.content, "Let me check both cities.\n");
    EXPECT_EQ(parse(r.calls[0].arguments), a1);
    EXPECT_EQ(parse(r.calls[1].arguments), a2);
    EXPECT_EQ(r.calls[2].name, "get_time");
    EXPECT_EQ(r.calls[2].arguments, "{}");
    EXPECT_NE(r.calls[0].id, r.calls[1].id);
}

TEST(HermesToolParser, NoCallsIsContent) {
    for (std::string_view text : {"Just an answer.", "a < b and b > c, <tool_ nope", "", "<tool_call"}) {
        const auto r = check_chunkings(kHermes, text);
        EXPECT_EQ(r.content, text);
        EXPECT_TRUE(r.calls.empty());
    }
}

TEST(HermesToolParser, UnterminatedButCompleteCallIsAccepted) {
    // vLLM's regex also takes "<tool_call>(.*)" to the end of the output.
    const auto r = check_chunkings(kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, "{\"a\": 1}");
}

TEST(HermesToolParser, OtherKeyOrderIsBufferedAndReserialised) {
    const auto r =
        check_chunkings(kHermes, "<tool_call>\n{\"arguments\": {\"a\":[1,2]}, \"name\": \"f\"}\n</tool_call>");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, "f");
    EXPECT_EQ(r.calls[0].arguments, "{\"a\": [1, 2]}");  // json.dumps form
}

TEST(HermesToolParser, MalformedFallsBackToContent) {
    // vLLM: json.loads fails -> tools_called=False, content = the whole output.
    for (std::string_view text : {
             "Sure.\n<tool_call>\nnot json at all\n</tool_call>",
             "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }}\n</tool_call>",
             "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}\n</tool_call>",
             "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
             "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"trunc",
             "<tool_call>\n{\"name\": 5, \"arguments\": {}}\n</tool_call>",
             "<tool_call></tool_call>",
             "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{oops}\n</tool_call>",
         }) {
        const auto r = check_chunkings(kHermes, text);
        EXPECT_EQ(r.content, text);
        EXPECT_TRUE(r.calls.empty()) << text;
    }
}

TEST(HermesToolParser, MalformedBeforeNameStreamsAsContent) {
    const std::string text = "Sure.\n<tool_call>\nnot json\n</tool_call>";
    ToolParserOptions opt;
    const auto s = testing::stream_tools(kHermes, {text}, opt);
    EXPECT_EQ(s.content, text);
    EXPECT_TRUE(s.calls.empty());
}

TEST(HermesToolParser, TextAfterCalls) {
    // Whitespace between and after calls is dropped; other text is kept as content.
    const auto r = check_chunkings(kHermes, render_call("f", parse("{}")) + "\n\nDone.");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.content, "\n\nDone.");
    const auto r2 = check_chunkings(kHermes, render_call("f", parse("{}")) + "\n  \n");
    EXPECT_EQ(r2.content, "");
}

TEST(HermesToolParser, ScalarAndStringArguments) {
    const auto r = check_chunkings(kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": 7}\n</tool_call>");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, "7");
    const auto r2 =
        check_chunkings(kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}\n</tool_call>");
    ASSERT_EQ(r2.calls.size(), 1u);
    EXPECT_EQ(r2.calls[0].arguments, "\"{\\\"a\\\": 1}\"");  // json.dumps of the string
}

TEST(ToolParserSelection, NamesAndAuto) {
    EXPECT_EQ(tool_parser_from_name("hermes"), ToolParserKind::kHermes);
    EXPECT_EQ(tool_parser_from_name("qwen3_coder"), ToolParserKind::kQwen3Coder);
    EXPECT_FALSE(tool_parser_from_name("mistral").has_value());
    EXPECT_EQ(detect_tool_parser("... <tool_call>\\n<function=example_function_name> ..."),
              ToolParserKind::kQwen3Coder);
    EXPECT_EQ(detect_tool_parser("<tool_call>\\n{\"name\": <function-name>, ...}"), ToolParserKind::kHermes);
}

}  // namespace
}  // namespace pagoda::chat

namespace pagoda::chat {
namespace {

TEST(HermesToolParser, StreamsNameThenArgumentsIncrementally) {
    auto p = make_tool_parser(kHermes, {});
    ToolDelta d;
    p->feed("Hi <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Os", d);
    EXPECT_EQ(d.content, "Hi ");
    ASSERT_EQ(d.tool_calls.size(), 2u);
    EXPECT_EQ(d.tool_calls[0].name, "get_weather");
    EXPECT_EQ(d.tool_calls[0].id.rfind("call_", 0), 0u);
    EXPECT_EQ(d.tool_calls[1].arguments, "{\"city\": \"Os");
    d.clear();
    p->feed("lo\"}}\n</tool_call>", d);
    ASSERT_EQ(d.tool_calls.size(), 1u);
    EXPECT_EQ(d.tool_calls[0].arguments, "lo\"}");
    EXPECT_EQ(d.tool_calls[0].index, 0);
}

}  // namespace
}  // namespace pagoda::chat
