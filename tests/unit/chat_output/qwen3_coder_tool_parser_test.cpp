// qwen3_coder (XML) tool calls as the Qwen3.5 chat template writes them:
//   '<tool_call>\n<function=' + name + '>\n' + for each argument '<parameter=' + key + '>\n' +
//   (value | tojson if mapping or list, else value | string) + '\n</parameter>\n' + '</function>\n</tool_call>'
// with '\n\n' before the first call after content and '\n' between calls. Expected arguments
// follow vLLM's Qwen3CoderToolParser: json.dumps of the parameters converted by the schema type.
#include <gtest/gtest.h>

#include "chat/output/py_json.h"
#include "chat/output/tool_parser_impl.h"
#include "common/json.h"
#include "tool_test_util.h"

namespace pagoda::chat {
namespace {

using testing::check_chunkings;

constexpr auto kXml = ToolParserKind::kQwen3Coder;

Json parse(std::string_view s) {
    auto r = Json::parse(s);
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : Json();
}

// Python str() of a scalar, as the template's `| string` filter writes it.
std::string py_str(const Json& v) {
    switch (v.type()) {
        case Json::Type::kBool:
            return v.as_bool() ? "True" : "False";
        case Json::Type::kNull:
            return "None";
        case Json::Type::kString:
            return v.as_string();
        default:
            return py_json_dump(v);
    }
}

std::string render_call(std::string_view name, const Json& args) {
    std::string out = "<tool_call>\n<function=" + std::string(name) + ">\n";
    for (const auto& [key, value] : args.as_object()) {
        out += "<parameter=" + key + ">\n";
        out += (value.is_object() || value.is_array()) ? py_json_dump(value) : py_str(value);
        out += "\n</parameter>\n";
    }
    return out + "</function>\n</tool_call>";
}

const Json& weather_tools() {
    static const Json tools = parse(R"([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {
            "location": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
            "threshold": {"type": "number"}, "tags": {"type": "array"}, "opts": {"type": "object"},
            "note": {"type": "string"}}}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}])");
    return tools;
}

TEST(Qwen3CoderToolParser, TemplateRoundTripWithSchemaTypes) {
    const Json args = parse(R"({"location": "San Francisco, CA", "days": 3, "metric": true, "threshold": 2.5,
        "tags": ["a", "b"], "opts": {"x": 1, "y": [null]}, "note": "line1\n<b>line2</b>\n"})");
    const auto r = check_chunkings(kXml, render_call("get_weather", args), &weather_tools());
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(r.calls[0].arguments, py_json_dump(args));
    EXPECT_EQ(r.content, "");
}

TEST(Qwen3CoderToolParser, ContentThenTwoCalls) {
    const Json a1 = parse(R"({"location": "Paris", "days": 1})");
    const Json a2 = parse(R"({})");
    const std::string text =
        "I'll look that up.\n\n" + render_call("get_weather", a1) + "\n" + render_call("get_time", a2);
    const auto r = check_chunkings(kXml, text, &weather_tools());
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.content, "I'll look that up.\n\n");
    EXPECT_EQ(r.calls[0].arguments, py_json_dump(a1));
    EXPECT_EQ(r.calls[1].name, "get_time");
    EXPECT_EQ(r.calls[1].arguments, "{}");
}

TEST(Qwen3CoderToolParser, WithoutSchemaEverythingIsAString) {
    const auto r = check_chunkings(kXml, render_call("f", parse(R"({"n": 5, "b": true})")));
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, R"({"n": "5", "b": "True"})");
}

TEST(Qwen3CoderToolParser, TruncatedCallIsClosed) {
    // vLLM's regexes accept a function and a parameter running to the end of the output.
    const auto r = check_chunkings(
        kXml, "<tool_call>\n<function=get_weather>\n<parameter=location>\nBerlin\n</parameter>\n<parameter=days>\n2",
        &weather_tools());
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, R"({"location": "Berlin", "days": 2})");
}

TEST(Qwen3CoderToolParser, MissingParameterCloseTags) {
    // vLLM: a parameter also ends at the next <parameter= or at </function>.
    const auto r = check_chunkings(kXml,
                                   "<tool_call>\n<function=get_weather>\n<parameter=location>\nRome\n<parameter=days>"
                                   "\n4\n</function>\n</tool_call>",
                                   &weather_tools());
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, R"({"location": "Rome", "days": 4})");
}

TEST(Qwen3CoderToolParser, BareFunctionWithoutWrapper) {
    const auto r = check_chunkings(kXml, "Ok.\n<function=get_time>\n</function>", &weather_tools());
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.content, "Ok.\n");
    EXPECT_EQ(r.calls[0].arguments, "{}");
}

TEST(Qwen3CoderToolParser, NoCallsIsContent) {
    for (std::string_view text :
         {"plain answer", "x <tool_call> y", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>", "a <function b", ""}) {
        const auto r = check_chunkings(kXml, text);
        EXPECT_EQ(r.content, text);
        EXPECT_TRUE(r.calls.empty());
    }
}

TEST(Qwen3CoderToolParser, MalformedFallsBackToContent) {
    for (std::string_view text :
         {"<tool_call>\n<function=get\nweather>\n</function>\n</tool_call>",
          "<tool_call>\n<function=>\n</function>\n</tool_call>", "<tool_call>\n<function=f",
          "<tool_call>\n<function=f>\n<parameter=a\n1\n</parameter>\n</function>\n</tool_call>"}) {
        const auto r = check_chunkings(kXml, text);
        EXPECT_EQ(r.content, text);
        EXPECT_TRUE(r.calls.empty()) << text;
    }
}

TEST(XmlParameterConversion, FollowsVllmRules) {
    const Json* tools = &weather_tools();
    auto conv = [&](std::string_view param, std::string_view value) {
        return py_json_dump(convert_xml_parameter(tools, "get_weather", param, value));
    };
    EXPECT_EQ(conv("days", " 42 "), "42");      // Python int() strips whitespace
    EXPECT_EQ(conv("days", "1_000"), "1000");   // and reads underscores
    EXPECT_EQ(conv("days", "4.5"), "\"4.5\"");  // int() fails -> the string
    EXPECT_EQ(conv("threshold", "4.0"), "4");   // integral floats become ints
    EXPECT_EQ(conv("threshold", "1e-3"), "0.001");
    EXPECT_EQ(conv("threshold", "inf"), "\"inf\"");
    EXPECT_EQ(conv("metric", "True"), "true");
    EXPECT_EQ(conv("metric", "yes"), "false");    // anything but "true" is false
    EXPECT_EQ(conv("location", "NULL"), "null");  // "null" in any case is None
    EXPECT_EQ(conv("opts", "{\"a\":1}"), "{\"a\": 1}");
    EXPECT_EQ(conv("opts", "{bad"), "\"{bad\"");
    EXPECT_EQ(conv("unknown", "5"), "\"5\"");  // not in the schema -> string
    EXPECT_EQ(conv("location", "5"), "\"5\"");
    const Json odd = parse(R"([{"type": "function", "function": {"name": "g", "parameters": {"properties": {
        "v": {"type": ["integer", "null"]}, "w": {"description": "no type"}}}}}])");
    EXPECT_EQ(py_json_dump(convert_xml_parameter(&odd, "g", "v", "7")), "7");            // ast.literal_eval
    EXPECT_EQ(py_json_dump(convert_xml_parameter(&odd, "g", "v", "true")), "\"true\"");  // not a Python literal
    EXPECT_EQ(py_json_dump(convert_xml_parameter(&odd, "g", "v", "True")), "true");
    EXPECT_EQ(py_json_dump(convert_xml_parameter(&odd, "g", "w", "7")), "\"7\"");  // no type -> string
}

}  // namespace
}  // namespace pagoda::chat

namespace pagoda::chat {
namespace {

TEST(Qwen3CoderToolParser, HeaderBeforeParameters) {
    auto p = make_tool_parser(kXml, {});
    ToolDelta d;
    p->feed("<tool_call>\n<function=run>\n<parameter=cmd>\nls -", d);
    ASSERT_EQ(d.tool_calls.size(), 2u);  // id+name, then "{"
    EXPECT_EQ(d.tool_calls[0].name, "run");
    EXPECT_EQ(d.tool_calls[1].arguments, "{");
    d.clear();
    p->feed("la\n</parameter>\n</function>\n</tool_call>", d);
    ASSERT_EQ(d.tool_calls.size(), 2u);
    EXPECT_EQ(d.tool_calls[0].arguments, "\"cmd\": \"ls -la\"");
    EXPECT_EQ(d.tool_calls[1].arguments, "}");
}

}  // namespace
}  // namespace pagoda::chat
