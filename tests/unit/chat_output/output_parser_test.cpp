// The whole pipeline (reasoning, then tools on the content) on outputs shaped like the real
// Qwen3 / Qwen3.5 templates' assistant turns, streaming in every chunking vs non-streaming.
#include "chat/output/output_parser.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "chunking.h"
#include "common/json.h"

namespace pagoda::chat {
namespace {

ParsedChatOutput stream(const testing::Chunks& chunks, const OutputParserOptions& opt) {
    ChatOutputParser p(opt);
    ChatDelta d;
    ParsedChatOutput out;
    auto take = [&] {
        out.reasoning += d.reasoning;
        out.content += d.content;
        accumulate_tool_deltas(d.tool_calls, out.tool_calls);
        d.clear();
    };
    for (auto c : chunks) {
        p.feed(c, d);
        take();
    }
    p.finish(d);
    take();
    EXPECT_EQ(p.tool_calls_started(), static_cast<int>(out.tool_calls.size()));
    return out;
}

ParsedChatOutput check(std::string_view text, OutputParserOptions opt) {
    opt.tool_options.id_seed = 99;
    const ParsedChatOutput whole = parse_chat_output(text, opt);
    for (const auto& chunks : testing::all_chunkings(text)) {
        const ParsedChatOutput s = stream(chunks, opt);
        EXPECT_EQ(s.reasoning, whole.reasoning);
        EXPECT_EQ(s.content, whole.content);
        EXPECT_EQ(s.tool_calls.size(), whole.tool_calls.size());
        for (size_t i = 0; i < s.tool_calls.size() && i < whole.tool_calls.size(); ++i) {
            EXPECT_EQ(s.tool_calls[i].name, whole.tool_calls[i].name);
            EXPECT_EQ(s.tool_calls[i].arguments, whole.tool_calls[i].arguments);
        }
        if (::testing::Test::HasFailure()) break;
    }
    return whole;
}

TEST(ChatOutputParser, Qwen3ThinkingThenHermesCall) {
    OutputParserOptions opt;
    opt.reasoning = ReasoningOptions{};
    opt.tool_parser = ToolParserKind::kHermes;
    const auto r = check(
        "<think>\nNeed weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
        "\"Oslo\"}}\n</tool_call>",
        opt);
    EXPECT_EQ(r.reasoning, "\nNeed weather.\n");
    EXPECT_EQ(r.content, "\n\n");  // vLLM keeps the text before the call as content
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_calls[0].arguments, "{\"city\": \"Oslo\"}");
}

TEST(ChatOutputParser, Qwen35CallInsideUnclosedThinking) {
    OutputParserOptions opt;
    opt.reasoning = ReasoningOptions{};
    opt.tool_parser = ToolParserKind::kQwen3Coder;
    const auto r = check(
        "I should call it.\n<tool_call>\n<function=f>\n<parameter=q>\nhi\n</parameter>\n</function>\n</tool_call>",
        opt);
    EXPECT_EQ(r.reasoning, "I should call it.\n");
    EXPECT_EQ(r.content, "");
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_calls[0].arguments, "{\"q\": \"hi\"}");
}

TEST(ChatOutputParser, ThinkingOffPlainAnswer) {
    OutputParserOptions opt;
    opt.reasoning = ReasoningOptions{.thinking_enabled = false};
    opt.tool_parser = ToolParserKind::kQwen3Coder;
    const auto r = check("The capital is Paris.", opt);
    EXPECT_EQ(r.reasoning, "");
    EXPECT_EQ(r.content, "The capital is Paris.");
    EXPECT_TRUE(r.tool_calls.empty());
}

// `auto` picks the parser from the shipped chat templates.
std::string chat_template(const std::string& model) {
    std::ifstream f(std::string(PAGODA_SHARED_DIR) + "/qwen-tokenizers/" + model + "/tokenizer_config.json");
    if (!f) return "";
    std::stringstream ss;
    ss << f.rdbuf();
    auto j = Json::parse(ss.str());
    if (!j.ok() || j->find("chat_template") == nullptr) return "";
    return j->find("chat_template")->as_string();
}

TEST(ChatOutputParser, AutoDetectFromRealTemplates) {
    const std::string q35 = chat_template("qwen3.5-4b");
    const std::string q3 = chat_template("qwen3-4b");
    const std::string q25 = chat_template("qwen2.5-1.5b-instruct");
    if (q35.empty() || q3.empty() || q25.empty()) GTEST_SKIP() << "shared qwen-tokenizers not found";
    EXPECT_EQ(detect_tool_parser(q35), ToolParserKind::kQwen3Coder);
    EXPECT_EQ(detect_tool_parser(q3), ToolParserKind::kHermes);
    EXPECT_EQ(detect_tool_parser(q25), ToolParserKind::kHermes);
}

}  // namespace
}  // namespace pagoda::chat
