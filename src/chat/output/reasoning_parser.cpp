// Streaming <think>…</think> splitter (see reasoning_parser.h).
#include "chat/output/reasoning_parser.h"

#include <algorithm>

#include "chat/output/text_scan.h"

namespace pagoda::chat {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kToolCallOpen = "<tool_call>";

}  // namespace

ReasoningParser::ReasoningParser(ReasoningOptions options)
    : state_(options.thinking_enabled ? State::kStart : State::kContent) {}

void ReasoningParser::feed(std::string_view chunk, ReasoningDelta& out) {
    if (state_ == State::kContent) {
        out.content.append(chunk);
        return;
    }
    pending_.append(chunk);
    std::string_view buf = pending_;
    if (state_ == State::kStart) {
        size_t ws = 0;
        while (ws < buf.size() && is_json_space(buf[ws]))
            ++ws;
        const std::string_view rest = buf.substr(ws);
        if (rest.size() < kThinkOpen.size() && kThinkOpen.substr(0, rest.size()) == rest) {
            return;  // still whitespace or a prefix of "<think>": keep waiting
        }
        state_ = State::kReasoning;
        if (rest.substr(0, kThinkOpen.size()) == kThinkOpen) buf = rest.substr(kThinkOpen.size());
    }
    // kReasoning
    const size_t close = buf.find(kThinkClose);
    const size_t call = buf.find(kToolCallOpen);
    if (close != std::string_view::npos || call != std::string_view::npos) {
        state_ = State::kContent;
        if (close < call) {
            out.reasoning.append(buf.substr(0, close));
            out.content.append(buf.substr(close + kThinkClose.size()));
        } else {
            out.reasoning.append(buf.substr(0, call));
            out.content.append(buf.substr(call));
        }
        pending_.clear();
        return;
    }
    const size_t hold = std::max(partial_tag_suffix(buf, kThinkClose), partial_tag_suffix(buf, kToolCallOpen));
    out.reasoning.append(buf.substr(0, buf.size() - hold));
    pending_ = std::string(buf.substr(buf.size() - hold));
}

void ReasoningParser::finish(ReasoningDelta& out) {
    // Whatever is held is not a tag: with thinking on and no end tag, it is reasoning.
    if (state_ != State::kContent) out.reasoning.append(pending_);
    pending_.clear();
}

ReasoningSplit split_reasoning(std::string_view output, ReasoningOptions options) {
    ReasoningParser parser(options);
    ReasoningDelta delta;
    parser.feed(output, delta);
    parser.finish(delta);
    return {std::move(delta.reasoning), std::move(delta.content)};
}

bool prompt_closes_reasoning(std::string_view prompt) {
    size_t end = prompt.size();
    while (end > 0 && is_json_space(prompt[end - 1]))
        --end;
    const std::string_view body = prompt.substr(0, end);
    return body.size() >= kThinkClose.size() && body.substr(body.size() - kThinkClose.size()) == kThinkClose;
}

}  // namespace pagoda::chat
