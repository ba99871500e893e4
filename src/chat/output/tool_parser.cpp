// Tool-parser selection, call ids, and the non-streaming path (see tool_parser.h).
#include "chat/output/tool_parser.h"

#include <random>

#include "chat/output/tool_parser_impl.h"

namespace pagoda::chat {

std::optional<ToolParserKind> tool_parser_from_name(std::string_view name) {
    if (name == "hermes") return ToolParserKind::kHermes;
    if (name == "qwen3_coder" || name == "qwen3_xml") return ToolParserKind::kQwen3Coder;
    return std::nullopt;
}

const char* tool_parser_name(ToolParserKind kind) {
    return kind == ToolParserKind::kHermes ? "hermes" : "qwen3_coder";
}

ToolParserKind detect_tool_parser(std::string_view chat_template) {
    return chat_template.find("<function=") != std::string_view::npos ? ToolParserKind::kQwen3Coder
                                                                      : ToolParserKind::kHermes;
}

CallIdGenerator::CallIdGenerator(uint64_t seed) : state_(seed) {
    if (state_ == 0) {
        std::random_device rd;
        state_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    }
}

std::string CallIdGenerator::next() {
    auto draw = [this] {
        uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    };
    static const char kHex[] = "0123456789abcdef";
    std::string id = "call_";
    const uint64_t a = draw();
    const uint64_t b = draw();
    for (int i = 0; i < 16; ++i)
        id.push_back(kHex[(a >> (60 - 4 * i)) & 0xF]);
    for (int i = 0; i < 8; ++i)
        id.push_back(kHex[(b >> (60 - 4 * i)) & 0xF]);
    return id;
}

std::unique_ptr<ToolParser> make_tool_parser(ToolParserKind kind, ToolParserOptions options) {
    return kind == ToolParserKind::kHermes ? make_hermes_parser(options) : make_qwen3_coder_parser(options);
}

void accumulate_tool_deltas(const std::vector<ToolCallDelta>& deltas, std::vector<ToolCall>& calls) {
    for (const ToolCallDelta& d : deltas) {
        if (d.index < 0) continue;
        if (static_cast<size_t>(d.index) >= calls.size()) calls.resize(static_cast<size_t>(d.index) + 1);
        ToolCall& call = calls[static_cast<size_t>(d.index)];
        if (!d.id.empty()) call.id = d.id;
        call.name += d.name;
        call.arguments += d.arguments;
    }
}

ToolParseResult parse_tool_calls(ToolParserKind kind, std::string_view content, ToolParserOptions options) {
    auto parser = make_tool_parser(kind, options);
    ToolDelta delta;
    parser->feed(content, delta);
    parser->finish(delta);
    ToolParseResult result;
    if (parser->malformed_calls() > 0) {
        result.content = std::string(content);  // vLLM: any broken call returns the text as is
        return result;
    }
    result.content = std::move(delta.content);
    accumulate_tool_deltas(delta.tool_calls, result.calls);
    return result;
}

}  // namespace pagoda::chat
