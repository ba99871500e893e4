// The per-request output pipeline the server runs on detokenized text (after stop strings):
// reasoning split first, then tool calls parsed from the content part only.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/output/reasoning_parser.h"
#include "chat/output/tool_parser.h"

namespace pagoda::chat {

struct OutputParserOptions {
    std::optional<ReasoningOptions> reasoning;  // unset: no reasoning parser (all text is content)
    std::optional<ToolParserKind> tool_parser;  // unset: no tool parsing (tool_choice none, no tools)
    ToolParserOptions tool_options;
};

// One streamed step, in OpenAI delta terms. feed()/finish() append; the caller clears.
struct ChatDelta {
    std::string reasoning;  // delta.reasoning_content (and delta.reasoning)
    std::string content;    // delta.content
    std::vector<ToolCallDelta> tool_calls;
    bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
    void clear() {
        reasoning.clear();
        content.clear();
        tool_calls.clear();
    }
};

class ChatOutputParser {
  public:
    explicit ChatOutputParser(OutputParserOptions options);
    ~ChatOutputParser();
    ChatOutputParser(ChatOutputParser&&) noexcept;
    ChatOutputParser& operator=(ChatOutputParser&&) noexcept;

    void feed(std::string_view chunk, ChatDelta& out);
    void finish(ChatDelta& out);
    // Calls started so far: finish_reason is "tool_calls" when this is > 0.
    int tool_calls_started() const;

  private:
    void route_content(std::string_view content, ChatDelta& out, bool at_end);

    std::optional<ReasoningParser> reasoning_;
    std::unique_ptr<ToolParser> tools_;
    ReasoningDelta reasoning_delta_;  // scratch, reused between chunks
    ToolDelta tool_delta_;
};

struct ParsedChatOutput {
    std::string reasoning;  // empty: null
    std::string content;    // empty: null
    std::vector<ToolCall> tool_calls;
};

// Non-streaming: reasoning split, then parse_tool_calls() on the content (with vLLM's fallback to
// plain content when a call is malformed).
ParsedChatOutput parse_chat_output(std::string_view text, const OutputParserOptions& options);

}  // namespace pagoda::chat
