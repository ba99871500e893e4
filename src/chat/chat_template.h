// ChatTemplate: a model's Hugging Face chat template and the context transformers' apply_chat_template renders it
// with (messages, tools, add_generation_prompt, special tokens, extra kwargs such as enable_thinking).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace pagoda::chat {

class ChatTemplate {
  public:
    // Reads chat_template.jinja, else chat_template.json, else tokenizer_config.json's "chat_template" (a string,
    // or a list of {name, template}); special tokens come from tokenizer_config.json when present.
    static Result<ChatTemplate> from_model_dir(const std::string& dir);
    // One template text; `tokenizer_config` (may be null) supplies bos_token, eos_token, ...
    static Result<ChatTemplate> from_string(std::string_view source, const Json& tokenizer_config = Json());

    // Renders a conversation as transformers does: null-valued message keys are dropped, tool-call arguments given
    // as JSON strings are parsed to objects (as vLLM does), reasoning fields are aliased, then the template sees
    // messages, tools (null -> None), documents (None), add_generation_prompt, the special tokens and `kwargs`
    // (a JSON object, or null). Template errors and raise_exception() come back as a Status.
    Result<std::string> render(const Json& messages, const Json& tools, bool add_generation_prompt,
                               const Json& kwargs = Json()) const;

    // The template source that render() uses for the given tools (named templates: "tool_use" when tools are given).
    const std::string& source(bool with_tools = false) const;

    ChatTemplate(ChatTemplate&&) noexcept;
    ChatTemplate& operator=(ChatTemplate&&) noexcept;
    ~ChatTemplate();

    struct Impl;  // defined in chat_template.cpp

  private:
    explicit ChatTemplate(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// The messages as the template sees them (the preprocessing render() applies). Exposed for tests.
Result<Json> prepare_messages(const Json& messages);

}  // namespace pagoda::chat
