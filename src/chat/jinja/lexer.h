// Jinja lexer: template text -> tokens, with Jinja2's whitespace rules (trim_blocks, lstrip_blocks, -/+ markers,
// newline normalisation, the dropped trailing newline) applied to the data tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::jinja {

enum class TokenType { kData, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
    TokenType type;
    std::string text;  // data text, name, unescaped string literal, operator, or number spelling
    int line = 1;
    int column = 1;
    int64_t int_value = 0;
    double float_value = 0.0;
};

struct LexOptions {
    bool trim_blocks = true;
    bool lstrip_blocks = true;
};

// Throws TemplateError("line:col: ...") on malformed input.
std::vector<Token> tokenize(std::string_view source, const LexOptions& options);

}  // namespace pagoda::jinja
