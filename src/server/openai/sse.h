// Server-sent events for streamed completions: `data: {chunk}\n\n` lines and the final `data: [DONE]\n\n`.
// Chunks are built from a prefix computed once per request (id, object, created, model) plus escaped text, so a
// token costs a few appends and no JSON tree.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat/output/tool_parser.h"

namespace pagoda::server::openai {

struct UsageCounts {
    int64_t prompt_tokens = 0;
    int64_t completion_tokens = 0;
    int64_t cached_tokens = 0;
};

// Appends the OpenAI usage object {"prompt_tokens","total_tokens","completion_tokens","prompt_tokens_details"}.
void append_usage_json(std::string& out, const UsageCounts& usage);

class SseChunks {
  public:
    enum class Kind { kChat, kCompletion };
    SseChunks(Kind kind, std::string_view id, int64_t created, std::string_view model);

    // Chat: one choice's delta. Empty strings are left out, except that the first delta of a choice carries
    // "role":"assistant" and "content":"" as OpenAI sends it. `logprobs_json` is a ready JSON value or empty (null).
    // `usage` (may be null) is attached for continuous_usage_stats.
    std::string chat_delta(int index, bool first, std::string_view reasoning, std::string_view content,
                           const std::vector<chat::ToolCallDelta>& tool_calls, std::string_view finish_reason,
                           std::string_view logprobs_json = {}, const UsageCounts* usage = nullptr) const;
    // Completions: one choice's text.
    std::string completion_text(int index, std::string_view text, std::string_view finish_reason,
                                std::string_view logprobs_json = {}, const UsageCounts* usage = nullptr) const;
    // The final usage chunk (stream_options.include_usage): empty choices.
    std::string usage_chunk(const UsageCounts& usage) const;
    // An error inside an already started stream.
    static std::string error_event(std::string_view error_body_json);
    static std::string_view done() { return "data: [DONE]\n\n"; }

  private:
    std::string prefix_;  // data: {"id":...,"object":...,"created":...,"model":...,"choices":[
};

}  // namespace pagoda::server::openai
