// Fuzzes the Jinja lexer, parser and interpreter: any template text either fails with a message or renders
// within the (low) limits, against a small fixed chat context. Never a crash, a hang or unbounded memory.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "chat/jinja/template.h"
#include "common/json.h"

namespace {

const pagoda::Json& context() {
    static const pagoda::Json ctx = [] {
        auto parsed = pagoda::Json::parse(R"({
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image"}]},
                {"role": "assistant", "content": "<think>r</think>ok", "reasoning_content": "r",
                 "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1, "b": [1.5, null]}}}]},
                {"role": "tool", "content": "{\"x\": true}"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
            "add_generation_prompt": true, "enable_thinking": false, "bos_token": "<s>", "eos_token": "</s>"})");
        if (!parsed.ok()) std::abort();
        return std::move(parsed).value();
    }();
    return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size > 1 << 16) return 0;
    std::string_view source(reinterpret_cast<const char*>(data), size);
    pagoda::jinja::Limits limits;
    limits.max_nesting_depth = 32;
    limits.max_macro_depth = 16;
    limits.max_steps = 20000;
    limits.max_output_bytes = 1 << 16;
    limits.max_container_items = 1 << 14;
    auto tmpl = pagoda::jinja::Template::parse(source, limits);
    if (!tmpl.ok()) {
        if (tmpl.message().empty()) std::abort();
        return 0;
    }
    auto out = tmpl->render(context());
    if (out.ok() && out->size() > limits.max_output_bytes) std::abort();
    return 0;
}
