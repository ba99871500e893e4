// Reasoning + tool-call pipeline (see output_parser.h).
#include "chat/output/output_parser.h"

namespace pagoda::chat {

ChatOutputParser::ChatOutputParser(OutputParserOptions options) {
    if (options.reasoning) reasoning_.emplace(*options.reasoning);
    if (options.tool_parser) tools_ = make_tool_parser(*options.tool_parser, options.tool_options);
}

ChatOutputParser::~ChatOutputParser() = default;
ChatOutputParser::ChatOutputParser(ChatOutputParser&&) noexcept = default;
ChatOutputParser& ChatOutputParser::operator=(ChatOutputParser&&) noexcept = default;

void ChatOutputParser::route_content(std::string_view content, ChatDelta& out, bool at_end) {
    if (!tools_) {
        out.content.append(content);
        return;
    }
    tool_delta_.clear();
    tools_->feed(content, tool_delta_);
    if (at_end) tools_->finish(tool_delta_);
    out.content += tool_delta_.content;
    for (ToolCallDelta& d : tool_delta_.tool_calls)
        out.tool_calls.push_back(std::move(d));
}

void ChatOutputParser::feed(std::string_view chunk, ChatDelta& out) {
    if (!reasoning_) {
        route_content(chunk, out, false);
        return;
    }
    reasoning_delta_.reasoning.clear();
    reasoning_delta_.content.clear();
    reasoning_->feed(chunk, reasoning_delta_);
    out.reasoning += reasoning_delta_.reasoning;
    route_content(reasoning_delta_.content, out, false);
}

void ChatOutputParser::finish(ChatDelta& out) {
    if (reasoning_) {
        reasoning_delta_.reasoning.clear();
        reasoning_delta_.content.clear();
        reasoning_->finish(reasoning_delta_);
        out.reasoning += reasoning_delta_.reasoning;
        route_content(reasoning_delta_.content, out, true);
    } else {
        route_content({}, out, true);
    }
}

int ChatOutputParser::tool_calls_started() const {
    return tools_ ? tools_->calls_started() : 0;
}

ParsedChatOutput parse_chat_output(std::string_view text, const OutputParserOptions& options) {
    ParsedChatOutput result;
    std::string content;
    if (options.reasoning) {
        ReasoningSplit split = split_reasoning(text, *options.reasoning);
        result.reasoning = std::move(split.reasoning);
        content = std::move(split.content);
    } else {
        content = std::string(text);
    }
    if (!options.tool_parser) {
        result.content = std::move(content);
        return result;
    }
    ToolParseResult tools = parse_tool_calls(*options.tool_parser, content, options.tool_options);
    result.content = std::move(tools.content);
    result.tool_calls = std::move(tools.calls);
    return result;
}

}  // namespace pagoda::chat
