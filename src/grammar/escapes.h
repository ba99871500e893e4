// Backslash escapes of one codepoint, shared by the regex and GBNF parsers: \n \t \r \f \v \a \0, \xHH, \uHHHH,
// \UHHHHHHHH, and a backslash before any other non-alphanumeric character standing for that character.
#pragma once

#include <string_view>

#include "common/status.h"

namespace pagoda::grammar {

enum class EscapeContext { kRegex, kRegexClass, kGbnf };

// `i` is on the character after the backslash; it is advanced past the escape.
Result<char32_t> parse_escape(std::string_view text, size_t& i, EscapeContext context);

}  // namespace pagoda::grammar
