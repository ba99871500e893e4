// Jinja lexer. Mirrors jinja2/lexer.py: the root state finds `{{`, `{%`, `{#`; the text before a tag is stripped
// by `-` (all whitespace) or, for block and comment tags under lstrip_blocks, by the spaces and tabs that start
// its line; a block or comment end eats one "\n" under trim_blocks; `-%}` eats all whitespace after it.
#include "chat/jinja/lexer.h"

#include <algorithm>
#include <cstring>

#include "chat/jinja/value.h"
#include "common/utf8.h"

namespace pagoda::jinja {
namespace {

bool is_ascii_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Python str.rstrip(): removes trailing Unicode whitespace.
std::string_view python_rstrip(std::string_view s) {
    size_t end = s.size();
    while (end > 0) {
        size_t start = end - 1;
        while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80)
            --start;
        size_t p = start;
        char32_t c = utf8_decode(s, p);
        if (!python_is_space(c)) break;
        end = start;
    }
    return s.substr(0, end);
}

// Number of bytes of Unicode whitespace at s[pos...].
size_t python_space_run(std::string_view s, size_t pos) {
    size_t p = pos;
    while (p < s.size()) {
        size_t q = p;
        char32_t c = utf8_decode(s, q);
        if (!python_is_space(c)) break;
        p = q;
    }
    return p - pos;
}

class Lexer {
  public:
    Lexer(std::string_view source, const LexOptions& options) : options_(options) {
        // Jinja2 normalises every newline to "\n" and drops one trailing newline (keep_trailing_newline=False).
        src_.reserve(source.size());
        for (size_t i = 0; i < source.size(); ++i) {
            if (source[i] == '\r') {
                src_ += '\n';
                if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
            } else {
                src_ += source[i];
            }
        }
        if (!src_.empty() && src_.back() == '\n') src_.pop_back();
        line_starts_.push_back(0);
        for (size_t i = 0; i < src_.size(); ++i)
            if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }

    std::vector<Token> run() {
        size_t pos = 0;
        bool line_starting = true;
        const size_t n = src_.size();
        while (pos < n) {
            size_t tag = find_tag(pos);
            if (tag == std::string_view::npos) {
                emit_data(src_.substr(pos), pos);
                break;
            }
            char kind = src_[tag + 1];
            char modifier = tag + 2 < n && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
            size_t raw_end = kind == '%' ? match_raw_begin(tag + 2 + (modifier ? 1 : 0)) : 0;
            std::string text = strip_before(src_.substr(pos, tag - pos), modifier, kind != '{', line_starting);
            emit_data(text, pos);
            if (raw_end) {
                pos = lex_raw(raw_end, line_starting);
                continue;
            }
            size_t after = tag + 2 + (modifier ? 1 : 0);
            if (kind == '#') {
                pos = skip_comment(tag, after, line_starting);
            } else {
                pos = lex_tag(tag, after, kind == '{', line_starting);
            }
        }
        tokens_.push_back(make(TokenType::kEof, "", src_.size()));
        return std::move(tokens_);
    }

  private:
    [[noreturn]] void fail(size_t pos, const std::string& message) {
        auto [line, col] = position(pos);
        throw TemplateError(std::to_string(line) + ":" + std::to_string(col) + ": " + message, line);
    }

    std::pair<int, int> position(size_t pos) const {
        auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos);
        size_t line = static_cast<size_t>(it - line_starts_.begin());
        size_t col = pos - line_starts_[line - 1] + 1;
        return {static_cast<int>(line), static_cast<int>(col)};
    }

    Token make(TokenType type, std::string text, size_t pos) const {
        Token t{type, std::move(text)};
        auto [line, col] = position(pos);
        t.line = line;
        t.column = col;
        return t;
    }

    void emit_data(std::string_view text, size_t pos) {
        if (!text.empty()) tokens_.push_back(make(TokenType::kData, std::string(text), pos));
    }

    size_t find_tag(size_t pos) const {
        while (true) {
            size_t p = src_.find('{', pos);
            if (p == std::string::npos || p + 1 >= src_.size()) return std::string::npos;
            char c = src_[p + 1];
            if (c == '{' || c == '%' || c == '#') return p;
            pos = p + 1;
        }
    }

    std::string strip_before(std::string_view text, char modifier, bool is_block_or_comment, bool line_starting) {
        if (modifier == '-') return std::string(python_rstrip(text));
        if (modifier != '+' && options_.lstrip_blocks && is_block_or_comment) {
            size_t nl = text.rfind('\n');
            size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
            if (l_pos > 0 || line_starting) {
                bool only_blank = true;
                for (size_t i = l_pos; i < text.size(); ++i)
                    if (text[i] != ' ' && text[i] != '\t') only_blank = false;
                if (only_blank) return std::string(text.substr(0, l_pos));
            }
        }
        return std::string(text);
    }

    // Matches `\s*raw\s*(-%}\s*|%})` at `pos`; returns the position after it, or 0.
    size_t match_raw_begin(size_t pos) const {
        size_t p = pos;
        while (p < src_.size() && is_ascii_space(src_[p]))
            ++p;
        if (src_.compare(p, 3, "raw") != 0) return 0;
        p += 3;
        while (p < src_.size() && is_ascii_space(src_[p]))
            ++p;
        if (src_.compare(p, 3, "-%}") == 0) return p + 3 + python_space_run(src_, p + 3);
        if (src_.compare(p, 2, "%}") == 0) return p + 2;
        return 0;
    }

    // After `{% raw %}`: everything up to `{% endraw %}` is data.
    size_t lex_raw(size_t pos, bool& line_starting) {
        size_t search = pos;
        while (true) {
            size_t p = src_.find("{%", search);
            if (p == std::string::npos) fail(pos, "missing end of raw directive");
            size_t q = p + 2;
            char modifier = 0;
            if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) modifier = src_[q++];
            while (q < src_.size() && is_ascii_space(src_[q]))
                ++q;
            if (src_.compare(q, 6, "endraw") != 0) {
                search = p + 2;
                continue;
            }
            q += 6;
            while (q < src_.size() && is_ascii_space(src_[q]))
                ++q;
            size_t end = block_end_at(q);
            if (!end) {
                search = p + 2;
                continue;
            }
            emit_data(strip_before(src_.substr(pos, p - pos), modifier, true, line_starting), pos);
            line_starting = src_[end - 1] == '\n';
            return end;
        }
    }

    // Matches a block end (`+%}`, `-%}\s*`, `%}\n?`) at `p`; returns the position after it, or 0.
    size_t block_end_at(size_t p) const {
        if (src_.compare(p, 3, "+%}") == 0) return p + 3;
        if (src_.compare(p, 3, "-%}") == 0) return p + 3 + python_space_run(src_, p + 3);
        if (src_.compare(p, 2, "%}") == 0) {
            p += 2;
            if (options_.trim_blocks && p < src_.size() && src_[p] == '\n') ++p;
            return p;
        }
        return 0;
    }

    size_t skip_comment(size_t tag, size_t pos, bool& line_starting) {
        size_t p = src_.find("#}", pos);
        if (p == std::string::npos) fail(tag, "missing end of comment tag");
        size_t end;
        if (p > pos && src_[p - 1] == '-') {
            end = p + 2 + python_space_run(src_, p + 2);
        } else if (p > pos && src_[p - 1] == '+') {
            end = p + 2;
        } else {
            end = p + 2;
            if (options_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
        }
        line_starting = src_[end - 1] == '\n';
        return end;
    }

    size_t lex_tag(size_t tag, size_t pos, bool is_var, bool& line_starting) {
        tokens_.push_back(make(is_var ? TokenType::kVarBegin : TokenType::kBlockBegin, "", tag));
        std::vector<char> balance;
        const size_t n = src_.size();
        while (true) {
            if (pos >= n)
                fail(tag, is_var ? "unexpected end of template, expected '}}'"
                                 : "unexpected end of template, expected '%}'");
            if (balance.empty()) {
                size_t end = 0;
                if (is_var) {
                    if (src_.compare(pos, 3, "-}}") == 0)
                        end = pos + 3 + python_space_run(src_, pos + 3);
                    else if (src_.compare(pos, 2, "}}") == 0)
                        end = pos + 2;
                } else {
                    end = block_end_at(pos);
                }
                if (end) {
                    tokens_.push_back(make(is_var ? TokenType::kVarEnd : TokenType::kBlockEnd, "", pos));
                    line_starting = src_[end - 1] == '\n';
                    return end;
                }
            }
            char c = src_[pos];
            if (is_ascii_space(c)) {
                ++pos;
                continue;
            }
            if (c >= '0' && c <= '9') {
                pos = lex_number(pos);
                continue;
            }
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
                size_t start = pos;
                while (pos < n && (std::isalnum(static_cast<unsigned char>(src_[pos])) || src_[pos] == '_'))
                    ++pos;
                tokens_.push_back(make(TokenType::kName, src_.substr(start, pos - start), start));
                continue;
            }
            if (c == '\'' || c == '"') {
                pos = lex_string(pos);
                continue;
            }
            static const char* const kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "/", "*", "%", "~", "[",
                                               "]",  "(",  ")",  "{",  "}",  "<",  ">", "=", ".", ":", "|", ",", ";"};
            bool matched = false;
            for (const char* op : kOps) {
                size_t len = std::strlen(op);
                if (src_.compare(pos, len, op) == 0) {
                    if (op[0] == '(' || op[0] == '[' || op[0] == '{') {
                        balance.push_back(op[0] == '(' ? ')' : op[0] == '[' ? ']' : '}');
                    } else if (op[0] == ')' || op[0] == ']' || op[0] == '}') {
                        if (balance.empty()) fail(pos, std::string("unexpected '") + op[0] + "'");
                        if (balance.back() != op[0])
                            fail(pos, std::string("unexpected '") + op[0] + "', expected '" + balance.back() + "'");
                        balance.pop_back();
                    }
                    tokens_.push_back(make(TokenType::kOp, op, pos));
                    pos += len;
                    matched = true;
                    break;
                }
            }
            if (!matched)
                fail(pos, std::string("unexpected character '") +
                              (c >= 0x20 && c < 0x7F ? std::string(1, c)
                                                     : "\\x" + std::to_string(static_cast<unsigned char>(c))) +
                              "'");
        }
    }

    // Digits with optional '_' separators; a float has a fraction and/or an exponent.
    size_t scan_digits(size_t pos) const {
        size_t p = pos;
        while (p < src_.size() && std::isdigit(static_cast<unsigned char>(src_[p]))) {
            ++p;
            if (p + 1 < src_.size() && src_[p] == '_' && std::isdigit(static_cast<unsigned char>(src_[p + 1]))) ++p;
        }
        return p;
    }

    size_t lex_number(size_t start) {
        size_t p = scan_digits(start);
        bool is_float = false;
        if (p + 1 < src_.size() && src_[p] == '.' && std::isdigit(static_cast<unsigned char>(src_[p + 1]))) {
            p = scan_digits(p + 1);
            is_float = true;
        }
        if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
            size_t q = p + 1;
            if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
            if (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) {
                p = scan_digits(q);
                is_float = true;
            }
        }
        std::string spelling;
        for (size_t i = start; i < p; ++i)
            if (src_[i] != '_') spelling += src_[i];
        Token t = make(is_float ? TokenType::kFloat : TokenType::kInt, spelling, start);
        if (is_float) {
            t.float_value = std::strtod(spelling.c_str(), nullptr);
        } else {
            errno = 0;
            char* endp = nullptr;
            unsigned long long v = std::strtoull(spelling.c_str(), &endp, 10);
            if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX))
                fail(start, "integer literal too large");
            t.int_value = static_cast<int64_t>(v);
        }
        tokens_.push_back(std::move(t));
        return p;
    }

    static int hex_value(char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    }

    // A quoted string; escapes as Python's "unicode-escape" codec decodes them (which Jinja2 uses).
    size_t lex_string(size_t start) {
        char quote = src_[start];
        size_t p = start + 1;
        std::string out;
        while (true) {
            if (p >= src_.size()) fail(start, "unterminated string");
            char c = src_[p];
            if (c == quote) break;
            if (c != '\\') {
                out += c;
                ++p;
                continue;
            }
            if (p + 1 >= src_.size()) fail(start, "unterminated string");
            char e = src_[p + 1];
            p += 2;
            switch (e) {
                case '\n':
                    break;
                case '\\':
                    out += '\\';
                    break;
                case '\'':
                    out += '\'';
                    break;
                case '"':
                    out += '"';
                    break;
                case 'a':
                    out += '\a';
                    break;
                case 'b':
                    out += '\b';
                    break;
                case 'f':
                    out += '\f';
                    break;
                case 'n':
                    out += '\n';
                    break;
                case 'r':
                    out += '\r';
                    break;
                case 't':
                    out += '\t';
                    break;
                case 'v':
                    out += '\v';
                    break;
                case 'x':
                case 'u':
                case 'U': {
                    int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                    uint32_t v = 0;
                    for (int i = 0; i < digits; ++i) {
                        int h = p < src_.size() ? hex_value(src_[p]) : -1;
                        if (h < 0) fail(start, std::string("truncated \\") + e + " escape in string");
                        v = v * 16 + static_cast<uint32_t>(h);
                        ++p;
                    }
                    if (v > 0x10FFFF) fail(start, "illegal Unicode character in string");
                    utf8_append(out, static_cast<char32_t>(v));
                    break;
                }
                default:
                    if (e >= '0' && e <= '7') {
                        uint32_t v = static_cast<uint32_t>(e - '0');
                        for (int i = 0; i < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++i)
                            v = v * 8 + static_cast<uint32_t>(src_[p++] - '0');
                        utf8_append(out, static_cast<char32_t>(v));
                    } else {
                        out += '\\';
                        out += e;
                    }
            }
        }
        tokens_.push_back(make(TokenType::kString, std::move(out), start));
        return p + 1;
    }

    LexOptions options_;
    std::string src_;
    std::vector<size_t> line_starts_;
    std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexOptions& options) {
    return Lexer(source, options).run();
}

}  // namespace pagoda::jinja
