// Regular expressions in the syntax Python's `re` users write, as a grammar expression: alternation, groups
// ((...), (?:...), (?P<name>...)), quantifiers (* + ? {m} {m,} {m,n} {,n}, lazy forms accepted), classes with
// ranges and negation, '.', escapes (\d \w \s and their negations, \n \t \x.. \u....). The whole output must match
// (re.fullmatch), so ^ at the start and $ at the end are accepted and mean nothing more. What a grammar cannot
// express (backreferences, lookaround, word boundaries, inline flags) is an error naming it. \d, \w and \s are
// their ASCII forms.
#pragma once

#include <string_view>

#include "common/status.h"
#include "grammar/expr.h"

namespace pagoda::grammar {

Result<Expr> parse_regex(std::string_view pattern);

// A grammar whose root matches exactly the strings `pattern` fully matches.
Result<GrammarSource> regex_grammar(std::string_view pattern);

}  // namespace pagoda::grammar
