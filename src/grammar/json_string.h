// What goes between a JSON string's quotes when the decoded string must match a pattern: JSON Schema's `pattern`
// and `format` constrain the decoded value, while the grammar produces its JSON spelling, so every '"', '\' and
// control character the pattern allows is produced as its escape.
#pragma once

#include <string_view>

#include "common/status.h"
#include "grammar/expr.h"

namespace pagoda::grammar {

// `e` (over decoded text) rewritten to match the escaped spellings of the same strings.
Expr json_escaped(const Expr& e);

// The regex of a string `format`, or nullptr when the format only annotates (anything goes).
const char* format_regex(std::string_view format);

}  // namespace pagoda::grammar
