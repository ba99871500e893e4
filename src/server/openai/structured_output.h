// Structured output on the OpenAI API: what a request asks for (response_format json_object / json_schema; vLLM's
// structured_outputs {json, regex, choice, grammar, json_object} and its older guided_json, guided_regex,
// guided_choice, guided_grammar), and the compiler that turns it into a grammar bound to the tokenizer's vocabulary,
// with a cache so that requests sharing a schema share its compiled grammar and mask cache.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "common/json.h"
#include "grammar/matcher.h"
#include "server/openai/protocol.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server::openai {

// Reads the structured-output fields of a chat or completions body into `out` (unset when none asks for it). More
// than one of them, or a malformed one, is a 400 naming the field. response_format "text" asks for nothing.
std::optional<ApiError> parse_structured_output(const Json& body, std::optional<StructuredOutputRequest>& out);

class GrammarCompiler {
  public:
    explicit GrammarCompiler(const Tokenizer& tokenizer);

    using Compiled = std::variant<std::shared_ptr<const grammar::CompiledGrammar>, ApiError>;

    // The compiled grammar for `request`, or a 400 saying what in the schema, regex or grammar cannot be used.
    Compiled compile(const StructuredOutputRequest& request);
    // A forced tool call over `tools` in the hermes format, or the qwen3_coder XML one when `xml`
    // (tool_call_grammar.h).
    Compiled compile_tool_calls(const Json& tools, bool parallel, bool xml);

  private:
    Compiled cached(const std::string& key, const std::string& param,
                    const std::function<Result<grammar::GrammarSource>()>& make_source);
    std::shared_ptr<const grammar::TokenVocabulary> vocabulary();

    const Tokenizer& tokenizer_;
    std::once_flag vocab_once_;
    std::shared_ptr<const grammar::TokenVocabulary> vocab_;
    // Compiled grammars by request key, most recently used first; bounded.
    std::mutex mu_;
    std::list<std::pair<std::string, std::shared_ptr<const grammar::CompiledGrammar>>> lru_;
    std::unordered_map<std::string, decltype(lru_)::iterator> by_key_;
};

}  // namespace pagoda::server::openai
