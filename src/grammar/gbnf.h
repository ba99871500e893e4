// GBNF, the grammar text llama.cpp documents and XGrammar reads (vLLM's `guided_grammar` and
// structured_outputs.grammar): `name ::= alternatives` rules with "literals" (also 'single-quoted'), [classes]
// with ranges and ^negation, '.', rule references, (groups), | alternation, * + ? {m} {m,} {m,n} {,n}, and #
// comments. A rule ends where the next `name ::=` begins, so alternatives may continue on following lines. `root`
// is where matching starts.
#pragma once

#include <string_view>

#include "common/status.h"
#include "grammar/expr.h"

namespace pagoda::grammar {

Result<GrammarSource> parse_gbnf(std::string_view text);

}  // namespace pagoda::grammar
