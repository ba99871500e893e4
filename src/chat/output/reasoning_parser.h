// Splits Qwen model output into reasoning_content and content around <think>…</think>, with
// the semantics of vLLM's `qwen3` reasoning parser, streaming (chunk by chunk) or all at once.
#pragma once

#include <string>
#include <string_view>

namespace pagoda::chat {

struct ReasoningOptions {
    // chat_template_kwargs.enable_thinking (default true, as in vLLM). When false the output is
    // all content, passed through verbatim.
    bool thinking_enabled = true;
};

// What one call produced; feed() and finish() append to these (the caller clears them).
struct ReasoningDelta {
    std::string reasoning;
    std::string content;
};

// Streaming splitter. The output may start with "<think>" (Qwen3 templates, where the model opens
// the block itself) or inside the block (Qwen3.5 templates put "<think>\n" in the prompt).
// Reasoning ends at the first "</think>" (dropped) or the first "<tool_call>" (kept, it starts the
// content: Qwen3.5 sometimes calls a tool without closing its thinking). With thinking enabled and
// neither tag, everything is reasoning (a truncated thought), as vLLM does. A tag split across
// chunks is held back until it is complete or ruled out, so no partial tag ever leaks.
// Deviation from vLLM: "<think>" is stripped only at the very start (after whitespace); vLLM's
// non-streaming path also discards text before a later "<think>", its streaming path does not.
class ReasoningParser {
  public:
    explicit ReasoningParser(ReasoningOptions options = {});

    void feed(std::string_view chunk, ReasoningDelta& out);
    // End of output: releases held-back bytes.
    void finish(ReasoningDelta& out);

    // True once reasoning has ended (content is flowing).
    bool in_content() const { return state_ == State::kContent; }

  private:
    enum class State { kStart, kReasoning, kContent };
    State state_;
    std::string pending_;  // held-back bytes: a possible tag prefix (or leading whitespace)
};

struct ReasoningSplit {
    std::string reasoning;  // empty: no reasoning_content (null in the API)
    std::string content;    // empty: no content (null in the API)
};

// Non-streaming: the same result as feeding `output` in any chunking and concatenating.
ReasoningSplit split_reasoning(std::string_view output, ReasoningOptions options = {});

// True when the rendered prompt already closed the thinking block ("…</think>" followed only by
// whitespace), as Qwen3/3.5 templates do for enable_thinking=false or a non-thinking default. The
// server should then parse with thinking_enabled=false (vLLM: prompt_is_reasoning_end).
bool prompt_closes_reasoning(std::string_view prompt);

}  // namespace pagoda::chat
