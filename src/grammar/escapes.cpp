#include "grammar/escapes.h"

#include <cctype>
#include <string>

#include "common/utf8.h"

namespace pagoda::grammar {

namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

Result<char32_t> parse_escape(std::string_view text, size_t& i, EscapeContext context) {
    if (i >= text.size()) return Status::error("trailing backslash");
    const char c = text[i++];
    int digits = 0;
    switch (c) {
        case 'n':
            return U'\n';
        case 't':
            return U'\t';
        case 'r':
            return U'\r';
        case 'f':
            return U'\f';
        case 'v':
            return U'\v';
        case 'a':
            return U'\a';
        case '0':
            return U'\0';
        case 'x':
            digits = 2;
            break;
        case 'u':
            digits = 4;
            break;
        case 'U':
            digits = 8;
            break;
        case 'b':
            if (context == EscapeContext::kRegexClass) return U'\b';
            [[fallthrough]];
        default: {
            const unsigned char uc = static_cast<unsigned char>(c);
            if (std::isalnum(uc)) return Status::error(std::string("unknown escape '\\") + c + "'");
            --i;
            return utf8_decode(text, i);
        }
    }
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
        const int h = i < text.size() ? hex_value(text[i]) : -1;
        if (h < 0) return Status::error(std::string("'\\") + c + "' needs " + std::to_string(digits) + " hex digits");
        v = v * 16 + static_cast<uint32_t>(h);
        ++i;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return Status::error("escape names no Unicode scalar value");
    return static_cast<char32_t>(v);
}

}  // namespace pagoda::grammar
