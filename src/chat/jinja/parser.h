// Jinja parser: tokens -> statement list, following jinja2/parser.py's grammar and precedence.
#pragma once

#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/lexer.h"

namespace pagoda::jinja {

// Throws TemplateError("line:col: ...") on a syntax error or when nesting exceeds `max_depth`.
Body parse_template(const std::vector<Token>& tokens, int max_depth);

}  // namespace pagoda::jinja
