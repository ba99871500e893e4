// Fuzzes the chat output parsers (reasoning, hermes and qwen3_coder tool calls, stop strings):
// any bytes, in a chunking the input chooses, must never crash, and streaming must agree with
// itself: the same text in one chunk and in the fuzzed chunks gives the same reasoning, content
// and calls; the stop-string matcher gives the same output in both chunkings.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "chat/output/output_parser.h"
#include "chat/output/stop_strings.h"
#include "common/json.h"

namespace {

using namespace pagoda::chat;

struct Gathered {
    std::string reasoning, content;
    std::vector<ToolCall> calls;
};

Gathered run(const OutputParserOptions& opt, const std::vector<std::string_view>& chunks) {
    ChatOutputParser p(opt);
    ChatDelta d;
    Gathered g;
    for (auto c : chunks)
        p.feed(c, d);
    p.finish(d);
    g.reasoning = d.reasoning;
    g.content = d.content;
    accumulate_tool_deltas(d.tool_calls, g.calls);
    return g;
}

bool same(const Gathered& a, const Gathered& b) {
    if (a.reasoning != b.reasoning || a.content != b.content || a.calls.size() != b.calls.size()) return false;
    for (size_t i = 0; i < a.calls.size(); ++i) {
        if (a.calls[i].id != b.calls[i].id || a.calls[i].name != b.calls[i].name ||
            a.calls[i].arguments != b.calls[i].arguments) {
            return false;
        }
    }
    return true;
}

const pagoda::Json& tools() {
    static const pagoda::Json t = *pagoda::Json::parse(
        R"([{"type": "function", "function": {"name": "f", "parameters": {"properties": {
        "i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"}, "o": {"type": "object"},
        "a": {"type": "array"}, "s": {"type": "string"}, "u": {"type": ["integer", "null"]}}}}}])");
    return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    const uint8_t flags = data[0];
    const uint8_t chunk_seed = data[1];
    std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);

    std::vector<std::string_view> chunks;
    uint32_t state = chunk_seed * 2654435761u + 1;
    for (size_t pos = 0; pos < text.size();) {
        state = state * 1103515245u + 12345u;
        const size_t len = (state >> 16) % 9;
        chunks.push_back(text.substr(pos, len));
        pos += len;
    }

    OutputParserOptions opt;
    if (flags & 1) opt.reasoning = ReasoningOptions{.thinking_enabled = (flags & 2) != 0};
    if (flags & 4) opt.tool_parser = (flags & 8) ? ToolParserKind::kQwen3Coder : ToolParserKind::kHermes;
    opt.tool_options.tools = &tools();
    opt.tool_options.id_seed = 42;
    if (!same(run(opt, {text}), run(opt, chunks))) std::abort();
    (void)parse_chat_output(text, opt);

    std::vector<std::string> stops = {"</s>", "ab", "abc", "\n\n"};
    std::string one, many;
    StopStringMatcher a(stops, (flags & 16) != 0), b(stops, (flags & 16) != 0);
    if (!a.feed(text, one)) a.finish(one);
    for (auto c : chunks) {
        if (b.feed(c, many)) break;
    }
    if (!b.stopped()) b.finish(many);
    if (one != many || a.matched_index() != b.matched_index()) std::abort();
    return 0;
}
