// Tool-call parsers for Qwen output (vLLM's `hermes` and `qwen3_coder`), streaming and not.
// They read the content part only (after the reasoning parser) and split it into plain text and
// OpenAI-style tool calls: {id "call_<24 hex>", name, arguments as a JSON string}.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda {
class Json;
}

namespace pagoda::chat {

enum class ToolParserKind {
    kHermes,      // <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>  (Qwen2.5, Qwen3)
    kQwen3Coder,  // <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>
};

// "hermes" | "qwen3_coder" (also "qwen3_xml"); "auto" is resolved with detect_tool_parser().
std::optional<ToolParserKind> tool_parser_from_name(std::string_view name);
const char* tool_parser_name(ToolParserKind kind);
// `auto`: the XML format when the chat template teaches "<function=", else hermes.
ToolParserKind detect_tool_parser(std::string_view chat_template);

struct ToolParserOptions {
    // The request's `tools` array (OpenAI format) or nullptr. qwen3_coder converts each parameter
    // value by the type its JSON schema declares; the pointee must outlive the parser.
    const Json* tools = nullptr;
    // Seed for call ids; 0 draws one from std::random_device. Tests pass a fixed seed.
    uint64_t id_seed = 0;
};

// One OpenAI `delta.tool_calls[i]` entry. The first delta of a call carries id and name (and
// arguments ""), later ones only argument fragments; concatenated they form the arguments.
struct ToolCallDelta {
    int index = 0;
    std::string id;    // non-empty only in the first delta of a call
    std::string name;  // non-empty only in the first delta of a call
    std::string arguments;
};

// What one feed()/finish() produced; they append (the caller clears between chunks).
struct ToolDelta {
    std::string content;
    std::vector<ToolCallDelta> tool_calls;
    void clear() {
        content.clear();
        tool_calls.clear();
    }
};

struct ToolCall {
    std::string id;
    std::string name;
    std::string arguments;  // a JSON text (an object for well-formed calls)
};

// Streaming parser: holds back only what could still be a tag. Malformed calls are never fatal:
// a call that breaks before its name was sent is passed on as content text; one that breaks after
// keeps what was streamed and is counted in malformed_calls().
class ToolParser {
  public:
    virtual ~ToolParser() = default;
    virtual void feed(std::string_view chunk, ToolDelta& out) = 0;
    virtual void finish(ToolDelta& out) = 0;
    // Calls started so far (the next call's index).
    virtual int calls_started() const = 0;
    // Calls that were streamed (at least their name) but turned out malformed.
    virtual int malformed_calls() const = 0;
};

std::unique_ptr<ToolParser> make_tool_parser(ToolParserKind kind, ToolParserOptions options = {});

struct ToolParseResult {
    std::string content;  // text outside the calls; empty means none (null in the API)
    std::vector<ToolCall> calls;
};

// Non-streaming: the streaming result gathered into whole calls. As vLLM does, when any call is
// malformed the whole output is returned as content with no calls.
ToolParseResult parse_tool_calls(ToolParserKind kind, std::string_view content, ToolParserOptions options = {});

// Folds streamed deltas into whole calls (what a client SDK does); used by the non-streaming path
// and by tests. `calls` grows as new indices appear.
void accumulate_tool_deltas(const std::vector<ToolCallDelta>& deltas, std::vector<ToolCall>& calls);

}  // namespace pagoda::chat
