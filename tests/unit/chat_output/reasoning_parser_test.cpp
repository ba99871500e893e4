// ReasoningParser against vLLM's qwen3 reasoning parser semantics (extract_reasoning: strip
// "<think>", partition at "</think>", "<tool_call>" as an implicit end, all reasoning when the
// end is missing and thinking is on) on outputs shaped as the Qwen3 / Qwen3.5 templates write
// assistant turns ('<think>\n' + reasoning + '\n</think>\n\n' + content).
#include "chat/output/reasoning_parser.h"

#include <gtest/gtest.h>

#include "chunking.h"

namespace pagoda::chat {
namespace {

using testing::all_chunkings;

ReasoningSplit stream(const testing::Chunks& chunks, ReasoningOptions opt) {
    ReasoningParser parser(opt);
    ReasoningDelta d;
    for (auto c : chunks)
        parser.feed(c, d);
    parser.finish(d);
    return {d.reasoning, d.content};
}

// Every chunking gives the non-streaming result, which must be `want`.
void check(std::string_view text, ReasoningOptions opt, std::string_view reasoning, std::string_view content) {
    const ReasoningSplit whole = split_reasoning(text, opt);
    EXPECT_EQ(whole.reasoning, reasoning) << "text: " << text;
    EXPECT_EQ(whole.content, content) << "text: " << text;
    for (const auto& chunks : all_chunkings(text)) {
        const ReasoningSplit s = stream(chunks, opt);
        ASSERT_EQ(s.reasoning, whole.reasoning) << "text: " << text << " chunks: " << chunks.size();
        ASSERT_EQ(s.content, whole.content) << "text: " << text << " chunks: " << chunks.size();
    }
}

// Python's str.strip('\n') / lstrip('\n'), as the templates use them to split a stored turn.
std::string strip_nl(std::string s) {
    while (!s.empty() && s.front() == '\n')
        s.erase(0, 1);
    while (!s.empty() && s.back() == '\n')
        s.pop_back();
    return s;
}
std::string lstrip_nl(std::string s) {
    while (!s.empty() && s.front() == '\n')
        s.erase(0, 1);
    return s;
}

TEST(ReasoningParser, Qwen3ModelOpensThinking) {
    // Qwen3 template: the prompt ends "<|im_start|>assistant\n", the model writes the block.
    check("<think>\nThe user greets.\n</think>\n\nHello!", {}, "\nThe user greets.\n", "\n\nHello!");
}

TEST(ReasoningParser, Qwen35PromptOpensThinking) {
    // Qwen3.5 template: the prompt ends "<think>\n", the output has only the closing tag.
    check("The user greets.\n</think>\n\nHello!", {}, "The user greets.\n", "\n\nHello!");
}

TEST(ReasoningParser, SplitAgreesWithTemplateRoundTrip) {
    // The template re-reads a stored turn with split('</think>') and strip('\n'); our split of a
    // turn it wrote must give back the same reasoning and content.
    const std::string r = "Step 1: think <b>hard</b>.\nStep 2: answer.";
    const std::string c = "The answer is 42 </thin but not a tag.";
    const std::string turn = "<think>\n" + r + "\n</think>\n\n" + c;
    const ReasoningSplit s = split_reasoning(turn);
    EXPECT_EQ(strip_nl(s.reasoning), r);
    EXPECT_EQ(lstrip_nl(s.content), c);
    check(turn, {}, "\n" + r + "\n", "\n\n" + c);
}

TEST(ReasoningParser, ThinkingDisabledIsAllContent) {
    check("Hello there.", {.thinking_enabled = false}, "", "Hello there.");
    check("<think>x</think>y", {.thinking_enabled = false}, "", "<think>x</think>y");
}

TEST(ReasoningParser, MissingEndIsAllReasoningWhenThinking) {
    // vLLM: thinking enabled and no </think> -> a truncated thought, all reasoning.
    check("Let me think about this for a wh", {}, "Let me think about this for a wh", "");
    check("<think>\nstill going", {}, "\nstill going", "");
    check("partial end tag </thi", {}, "partial end tag </thi", "");
    check("", {}, "", "");
    check("  \n", {}, "  \n", "");
    check("<thi", {}, "<thi", "");
}

TEST(ReasoningParser, ToolCallEndsReasoning) {
    // Qwen3.5 may open a tool call without closing its thought: the call starts the content.
    check("I need the weather.\n<tool_call>\n<function=get_weather>\n</function>\n</tool_call>", {},
          "I need the weather.\n", "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>");
    check("x</think>\n\n<tool_call>{}</tool_call>", {}, "x", "\n\n<tool_call>{}</tool_call>");
}

TEST(ReasoningParser, EdgeCases) {
    check("</think>", {}, "", "");
    check("<think></think>", {}, "", "");
    check("\n<think>r</think>c", {}, "r", "c");
    check("r</think>c</think>d", {}, "r", "c</think>d");
    check("<thinking>x</think>y", {}, "<thinking>x", "y");
    check("a<b</think>c", {}, "a<b", "c");
    check("\xE4\xBD\xA0\xE5\xA5\xBD</think>\xE5\x86\x8D\xE8\xA7\x81", {}, "\xE4\xBD\xA0\xE5\xA5\xBD",
          "\xE5\x86\x8D\xE8\xA7\x81");
}

TEST(ReasoningParser, PromptClosesReasoning) {
    // Generation prompts of the Qwen3/3.5 templates (tokenizer_config.json chat_template).
    EXPECT_TRUE(prompt_closes_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    EXPECT_FALSE(prompt_closes_reasoning("<|im_start|>assistant\n<think>\n"));
    EXPECT_FALSE(prompt_closes_reasoning("<|im_start|>assistant\n"));
}

}  // namespace
}  // namespace pagoda::chat

namespace pagoda::chat {
namespace {

TEST(ReasoningParser, HoldsBackOnlyPossibleTags) {
    ReasoningParser p;
    ReasoningDelta d;
    p.feed("<think>\nabc</th", d);
    EXPECT_EQ(d.reasoning, "\nabc");  // "</th" may still become "</think>"
    p.feed("ink>\n\nHi", d);
    EXPECT_EQ(d.reasoning, "\nabc");
    EXPECT_EQ(d.content, "\n\nHi");
    EXPECT_TRUE(p.in_content());
}

}  // namespace
}  // namespace pagoda::chat
