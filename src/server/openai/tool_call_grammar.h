// Forced tool calls under a grammar: with tool_choice "required" or a named function, the output is generated in the
// chat template's call format, so it always holds a call the tool parser reads (instead of being checked only after
// generation). Two formats: hermes (Qwen2.5, Qwen3): <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>, the
// arguments following the function's parameters schema; and the XML of qwen3_coder (Qwen3.5, Qwen3-Coder), whose
// parameter values are written as that parser reads them back.
#pragma once

#include "common/json.h"
#include "common/status.h"
#include "grammar/expr.h"

namespace pagoda::server::openai {

// One call of one of `tools` (OpenAI tool objects), or several separated by "\n" when `parallel`.
Result<grammar::GrammarSource> hermes_tool_call_grammar(const Json& tools, bool parallel);

// The same in the XML format: <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n...</function>\n
// </tool_call>, the schema's properties in order (required ones always, the others optional). A value is what
// the qwen3_coder parser converts back to a valid argument (chat/output/xml_param_convert.cpp): for a property of
// type string (or without a type) raw text (its enum or const, its pattern or format, its length bounds; never
// "null" nor a '<'), for the other types the compact JSON of the property's schema.
Result<grammar::GrammarSource> xml_tool_call_grammar(const Json& tools, bool parallel);

}  // namespace pagoda::server::openai
