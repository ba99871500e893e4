// Forced tool calls under a grammar: with tool_choice "required" or a named function, the output is generated in the
// chat template's call format, so it always holds a call the tool parser reads (instead of being checked only after
// generation). Built for the hermes format (Qwen2.5, Qwen3): <tool_call>\n{"name": ..., "arguments": ...}\n
// </tool_call>, the arguments following the function's parameters schema.
#pragma once

#include "common/json.h"
#include "common/status.h"
#include "grammar/expr.h"

namespace pagoda::server::openai {

// One call of one of `tools` (OpenAI tool objects), or several separated by "\n" when `parallel`.
Result<grammar::GrammarSource> hermes_tool_call_grammar(const Json& tools, bool parallel);

}  // namespace pagoda::server::openai
