// JSON Schema -> grammar, and the grammar of any JSON object ({"type": "json_object"}).
//
// Output is compact JSON: no whitespace between tokens, "," and ":" as separators (json.dumps with
// separators=(",", ":")), properties in the schema's order. That is XGrammar's form with any_whitespace off; it
// keeps a model from spending its tokens on indentation and every output parses with any JSON parser.
//
// Supported: type (a name or a list), properties / required / additionalProperties (false, true or a schema; when
// absent: no other properties if `properties` is given, any otherwise), enum, const, anyOf, oneOf (as anyOf: that
// exactly one branch matches is not enforced), allOf of object schemas (merged), $ref into the document
// ("#", "#/$defs/..", "#/definitions/..", any JSON pointer; recursion allowed), nullable (OpenAPI), items,
// prefixItems, minItems, maxItems, minLength, maxLength, pattern, format (date, time, date-time, uuid, email, ipv4,
// hostname; other formats are annotations, as the specification allows), integer minimum / maximum /
// exclusiveMinimum / exclusiveMaximum, and minimum 0 / exclusiveMinimum on a number only when it is 0 and the
// bound keeps the sign. Annotations (title, description, default, examples, ...) are ignored. A keyword that would
// constrain the output in a way not listed is refused with an error naming it.
#pragma once

#include "common/json.h"
#include "common/status.h"
#include "grammar/expr.h"

namespace pagoda::grammar {

Result<GrammarSource> json_schema_grammar(const Json& schema);
GrammarSource json_object_grammar();

// One of `choices`, exactly (vLLM's guided_choice).
GrammarSource choice_grammar(const std::vector<std::string>& choices);

}  // namespace pagoda::grammar
