// SSE chunk formatting (see sse.h).
#include "server/openai/sse.h"

#include "common/json.h"

namespace pagoda::server::openai {

void append_usage_json(std::string& out, const UsageCounts& u) {
    out += "{\"prompt_tokens\":";
    out += std::to_string(u.prompt_tokens);
    out += ",\"total_tokens\":";
    out += std::to_string(u.prompt_tokens + u.completion_tokens);
    out += ",\"completion_tokens\":";
    out += std::to_string(u.completion_tokens);
    out += ",\"prompt_tokens_details\":{\"cached_tokens\":";
    out += std::to_string(u.cached_tokens);
    out += "}}";
}

SseChunks::SseChunks(Kind kind, std::string_view id, int64_t created, std::string_view model) {
    prefix_ = "data: {\"id\":";
    json_escape_to(prefix_, id);
    prefix_ += kind == Kind::kChat ? ",\"object\":\"chat.completion.chunk\"" : ",\"object\":\"text_completion\"";
    prefix_ += ",\"created\":";
    prefix_ += std::to_string(created);
    prefix_ += ",\"model\":";
    json_escape_to(prefix_, model);
    prefix_ += ",\"choices\":[";
}

namespace {

void close_chunk(std::string& out, const UsageCounts* usage) {
    out += "]";
    if (usage) {
        out += ",\"usage\":";
        append_usage_json(out, *usage);
    }
    out += "}\n\n";
}

void append_finish(std::string& out, std::string_view finish_reason) {
    out += ",\"finish_reason\":";
    if (finish_reason.empty()) {
        out += "null";
    } else {
        json_escape_to(out, finish_reason);
    }
}

}  // namespace

std::string SseChunks::chat_delta(int index, bool first, std::string_view reasoning, std::string_view content,
                                  const std::vector<chat::ToolCallDelta>& tool_calls, std::string_view finish_reason,
                                  std::string_view logprobs_json, const UsageCounts* usage) const {
    std::string out;
    out.reserve(prefix_.size() + content.size() + reasoning.size() + 160);
    out += prefix_;
    out += "{\"index\":";
    out += std::to_string(index);
    out += ",\"delta\":{";
    bool comma = false;
    auto field = [&](const char* name) {
        if (comma) out += ',';
        comma = true;
        out += name;
    };
    if (first) {
        field("\"role\":\"assistant\"");
    }
    if (!reasoning.empty()) {
        // Both names: llama.cpp/LMDeploy clients read reasoning_content, newer vLLM/Ollama ones reasoning.
        field("\"reasoning_content\":");
        json_escape_to(out, reasoning);
        field("\"reasoning\":");
        json_escape_to(out, reasoning);
    }
    if (!content.empty() || (first && reasoning.empty() && tool_calls.empty())) {
        field("\"content\":");
        json_escape_to(out, content);
    }
    if (!tool_calls.empty()) {
        field("\"tool_calls\":[");
        for (size_t i = 0; i < tool_calls.size(); ++i) {
            const auto& tc = tool_calls[i];
            if (i) out += ',';
            out += "{\"index\":";
            out += std::to_string(tc.index);
            if (!tc.id.empty()) {
                out += ",\"id\":";
                json_escape_to(out, tc.id);
                out += ",\"type\":\"function\",\"function\":{\"name\":";
                json_escape_to(out, tc.name);
                out += ",\"arguments\":";
            } else {
                out += ",\"function\":{\"arguments\":";
            }
            json_escape_to(out, tc.arguments);
            out += "}}";
        }
        out += ']';
    }
    out += "},\"logprobs\":";
    out += logprobs_json.empty() ? std::string_view("null") : logprobs_json;
    append_finish(out, finish_reason);
    out += '}';
    close_chunk(out, usage);
    return out;
}

std::string SseChunks::completion_text(int index, std::string_view text, std::string_view finish_reason,
                                       std::string_view logprobs_json, const UsageCounts* usage) const {
    std::string out;
    out.reserve(prefix_.size() + text.size() + 96);
    out += prefix_;
    out += "{\"index\":";
    out += std::to_string(index);
    out += ",\"text\":";
    json_escape_to(out, text);
    out += ",\"logprobs\":";
    out += logprobs_json.empty() ? std::string_view("null") : logprobs_json;
    append_finish(out, finish_reason);
    out += '}';
    close_chunk(out, usage);
    return out;
}

std::string SseChunks::usage_chunk(const UsageCounts& usage) const {
    std::string out = prefix_;
    close_chunk(out, &usage);
    return out;
}

std::string SseChunks::error_event(std::string_view error_body_json) {
    std::string out = "data: ";
    out += error_body_json;
    out += "\n\n";
    return out;
}

}  // namespace pagoda::server::openai
