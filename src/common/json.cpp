#include "common/json.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <string>
#include <unordered_map>

#include "common/check.h"
#include "common/utf8.h"

namespace pagoda {

Json Json::array(Array items) {
    Json j;
    j.type_ = Type::kArray;
    j.array_ = std::make_shared<Array>(std::move(items));
    return j;
}

Json Json::object(Object members) {
    Json j;
    j.type_ = Type::kObject;
    j.object_ = std::make_shared<Object>(std::move(members));
    return j;
}

Json::Json(const Json& other)
    : type_(other.type_), bool_(other.bool_), int_(other.int_), float_(other.float_), string_(other.string_) {
    if (other.array_) array_ = std::make_shared<Array>(*other.array_);
    if (other.object_) object_ = std::make_shared<Object>(*other.object_);
}

Json& Json::operator=(const Json& other) {
    if (this != &other) {
        Json copy(other);
        *this = std::move(copy);
    }
    return *this;
}

const char* Json::type_name(Type t) {
    switch (t) {
        case Type::kNull:
            return "null";
        case Type::kBool:
            return "boolean";
        case Type::kInt:
            return "integer";
        case Type::kFloat:
            return "number";
        case Type::kString:
            return "string";
        case Type::kArray:
            return "array";
        case Type::kObject:
            return "object";
    }
    return "?";
}

bool Json::as_bool() const {
    PAGODA_CHECK(is_bool());
    return bool_;
}
int64_t Json::as_int() const {
    PAGODA_CHECK(is_int());
    return int_;
}
double Json::as_double() const {
    PAGODA_CHECK(is_number());
    return is_int() ? static_cast<double>(int_) : float_;
}
const std::string& Json::as_string() const {
    PAGODA_CHECK(is_string());
    return string_;
}
const Json::Array& Json::as_array() const {
    PAGODA_CHECK(is_array());
    return *array_;
}
Json::Array& Json::as_array() {
    PAGODA_CHECK(is_array());
    return *array_;
}
const Json::Object& Json::as_object() const {
    PAGODA_CHECK(is_object());
    return *object_;
}
Json::Object& Json::as_object() {
    PAGODA_CHECK(is_object());
    return *object_;
}

const Json* Json::find(std::string_view key) const {
    if (!is_object()) return nullptr;
    for (const auto& [k, v] : *object_)
        if (k == key) return &v;
    return nullptr;
}

Json* Json::find(std::string_view key) {
    if (!is_object()) return nullptr;
    for (auto& [k, v] : *object_)
        if (k == key) return &v;
    return nullptr;
}

void Json::set(std::string key, Json value) {
    if (is_null()) *this = object();
    PAGODA_CHECK(is_object());
    if (Json* existing = find(key)) {
        *existing = std::move(value);
        return;
    }
    object_->emplace_back(std::move(key), std::move(value));
}

void Json::push_back(Json value) {
    if (is_null()) *this = array();
    PAGODA_CHECK(is_array());
    array_->push_back(std::move(value));
}

size_t Json::size() const {
    if (is_array()) return array_->size();
    if (is_object()) return object_->size();
    return 0;
}

bool operator==(const Json& a, const Json& b) {
    if (a.is_number() && b.is_number() && a.type_ != b.type_) return a.as_double() == b.as_double();
    if (a.type_ != b.type_) return false;
    switch (a.type_) {
        case Json::Type::kNull:
            return true;
        case Json::Type::kBool:
            return a.bool_ == b.bool_;
        case Json::Type::kInt:
            return a.int_ == b.int_;
        case Json::Type::kFloat:
            return a.float_ == b.float_;
        case Json::Type::kString:
            return a.string_ == b.string_;
        case Json::Type::kArray:
            return *a.array_ == *b.array_;
        case Json::Type::kObject:
            return *a.object_ == *b.object_;
    }
    return false;
}

// ---------------------------------------------------------------------------------------------
// Parser

namespace {

class Parser {
  public:
    Parser(std::string_view text, int max_depth) : text_(text), max_depth_(max_depth) {}

    Result<Json> parse_document() {
        skip_ws();
        Json value;
        if (!parse_value(value, 0)) return error();
        skip_ws();
        if (pos_ != text_.size()) {
            fail("unexpected text after the JSON value");
            return error();
        }
        return value;
    }

  private:
    bool fail(std::string message) {
        if (message_.empty()) message_ = std::move(message);
        return false;
    }

    Status error() const {
        // Report the position as line:column (1-based, columns in bytes).
        size_t line = 1, col = 1;
        for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
            if (text_[i] == '\n') {
                ++line;
                col = 1;
            } else {
                ++col;
            }
        }
        return Status::error("invalid JSON at line " + std::to_string(line) + ", column " + std::to_string(col) + ": " +
                             message_);
    }

    void skip_ws() {
        while (pos_ < text_.size()) {
            const char c = text_[pos_];
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
            ++pos_;
        }
    }

    bool consume_literal(std::string_view lit) {
        if (text_.substr(pos_, lit.size()) != lit) return false;
        pos_ += lit.size();
        return true;
    }

    bool parse_value(Json& out, int depth) {
        if (depth > max_depth_) return fail("nesting deeper than " + std::to_string(max_depth_) + " levels");
        if (pos_ >= text_.size()) return fail("unexpected end of input");
        const char c = text_[pos_];
        switch (c) {
            case '{':
                return parse_object(out, depth);
            case '[':
                return parse_array(out, depth);
            case '"': {
                std::string s;
                if (!parse_string(s)) return false;
                out = Json(std::move(s));
                return true;
            }
            case 't':
                if (consume_literal("true")) return out = Json(true), true;
                break;
            case 'f':
                if (consume_literal("false")) return out = Json(false), true;
                break;
            case 'n':
                if (consume_literal("null")) return out = Json(), true;
                break;
            case 'N':
                if (consume_literal("NaN")) return out = Json(std::nan("")), true;
                break;
            case 'I':
                if (consume_literal("Infinity")) return out = Json(HUGE_VAL), true;
                break;
            default:
                if (c == '-' || (c >= '0' && c <= '9')) return parse_number(out);
        }
        return fail(std::string("unexpected character '") + (c >= 0x20 && c < 0x7f ? std::string(1, c) : "?") + "'");
    }

    bool parse_number(Json& out) {
        const size_t start = pos_;
        if (text_[pos_] == '-') {
            ++pos_;
            if (consume_literal("Infinity")) return out = Json(-HUGE_VAL), true;
        }
        if (pos_ >= text_.size() || !(text_[pos_] >= '0' && text_[pos_] <= '9')) return fail("invalid number");
        if (text_[pos_] == '0' && pos_ + 1 < text_.size() && text_[pos_ + 1] >= '0' && text_[pos_ + 1] <= '9')
            return fail("invalid number (leading zero)");
        bool is_float = false;
        while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9')
            ++pos_;
        if (pos_ < text_.size() && text_[pos_] == '.') {
            is_float = true;
            ++pos_;
            if (pos_ >= text_.size() || !(text_[pos_] >= '0' && text_[pos_] <= '9')) return fail("invalid number");
            while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9')
                ++pos_;
        }
        if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
            is_float = true;
            ++pos_;
            if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
            if (pos_ >= text_.size() || !(text_[pos_] >= '0' && text_[pos_] <= '9')) return fail("invalid number");
            while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9')
                ++pos_;
        }
        const char* first = text_.data() + start;
        const char* last = text_.data() + pos_;
        if (!is_float) {
            int64_t v = 0;
            auto [p, ec] = std::from_chars(first, last, v);
            if (ec == std::errc() && p == last) return out = Json(v), true;
            // Integers beyond int64 fall through to double, as most JSON readers do.
        }
        double d = 0;
        auto [p, ec] = std::from_chars(first, last, d);
        if (ec == std::errc::result_out_of_range) {
            d = (*first == '-') ? -HUGE_VAL : HUGE_VAL;
        } else if (ec != std::errc() || p != last) {
            return fail("invalid number");
        }
        out = Json(d);
        return true;
    }

    bool parse_hex4(uint32_t& v) {
        if (pos_ + 4 > text_.size()) return fail("truncated \\u escape");
        v = 0;
        for (int i = 0; i < 4; ++i) {
            const char c = text_[pos_++];
            v <<= 4;
            if (c >= '0' && c <= '9')
                v |= c - '0';
            else if (c >= 'a' && c <= 'f')
                v |= c - 'a' + 10;
            else if (c >= 'A' && c <= 'F')
                v |= c - 'A' + 10;
            else
                return fail("invalid \\u escape");
        }
        return true;
    }

    bool parse_string(std::string& out) {
        ++pos_;  // opening quote
        for (;;) {
            // Copy runs of plain bytes at once; strings are most of a tokenizer.json.
            const size_t run_start = pos_;
            while (pos_ < text_.size()) {
                const auto c = static_cast<unsigned char>(text_[pos_]);
                if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
                ++pos_;
            }
            out.append(text_.data() + run_start, pos_ - run_start);
            if (pos_ >= text_.size()) return fail("unterminated string");
            const auto c = static_cast<unsigned char>(text_[pos_]);
            if (c == '"') {
                ++pos_;
                return true;
            }
            if (c < 0x20) return fail("control character in string");
            if (c >= 0x80) {
                const int len = utf8_sequence_length(c);
                if (len == 0 || pos_ + len > text_.size() ||
                    utf8_find_invalid(text_.substr(pos_, len)) != std::string_view::npos)
                    return fail("invalid UTF-8 in string");
                out.append(text_.data() + pos_, len);
                pos_ += len;
                continue;
            }
            // Backslash escape.
            ++pos_;
            if (pos_ >= text_.size()) return fail("unterminated string");
            const char e = text_[pos_++];
            switch (e) {
                case '"':
                    out.push_back('"');
                    break;
                case '\\':
                    out.push_back('\\');
                    break;
                case '/':
                    out.push_back('/');
                    break;
                case 'b':
                    out.push_back('\b');
                    break;
                case 'f':
                    out.push_back('\f');
                    break;
                case 'n':
                    out.push_back('\n');
                    break;
                case 'r':
                    out.push_back('\r');
                    break;
                case 't':
                    out.push_back('\t');
                    break;
                case 'u': {
                    uint32_t cp;
                    if (!parse_hex4(cp)) return false;
                    if (cp >= 0xD800 && cp <= 0xDBFF && text_.substr(pos_, 2) == "\\u") {
                        const size_t save = pos_;
                        pos_ += 2;
                        uint32_t lo;
                        if (!parse_hex4(lo)) return false;
                        if (lo >= 0xDC00 && lo <= 0xDFFF) {
                            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        } else {
                            pos_ = save;  // lone high surrogate; the next escape stands alone
                        }
                    }
                    utf8_append(out, cp);  // lone surrogates become U+FFFD
                    break;
                }
                default:
                    return fail("invalid escape in string");
            }
        }
    }

    bool parse_array(Json& out, int depth) {
        ++pos_;
        Json::Array items;
        skip_ws();
        if (pos_ < text_.size() && text_[pos_] == ']') {
            ++pos_;
            out = Json::array(std::move(items));
            return true;
        }
        for (;;) {
            skip_ws();
            Json item;
            if (!parse_value(item, depth + 1)) return false;
            items.push_back(std::move(item));
            skip_ws();
            if (pos_ >= text_.size()) return fail("unterminated array");
            if (text_[pos_] == ',') {
                ++pos_;
                continue;
            }
            if (text_[pos_] == ']') {
                ++pos_;
                out = Json::array(std::move(items));
                return true;
            }
            return fail("expected ',' or ']' in array");
        }
    }

    bool parse_object(Json& out, int depth) {
        ++pos_;
        Json::Object members;
        std::unordered_map<std::string, size_t> index;  // key -> member position, built past 32 members
        skip_ws();
        if (pos_ < text_.size() && text_[pos_] == '}') {
            ++pos_;
            out = Json::object(std::move(members));
            return true;
        }
        for (;;) {
            skip_ws();
            if (pos_ >= text_.size() || text_[pos_] != '"') return fail("expected a string key in object");
            std::string key;
            if (!parse_string(key)) return false;
            skip_ws();
            if (pos_ >= text_.size() || text_[pos_] != ':') return fail("expected ':' after object key");
            ++pos_;
            skip_ws();
            Json value;
            if (!parse_value(value, depth + 1)) return false;
            // A repeated key keeps the last value, as Python's json does. Large objects (a 150k-entry
            // vocab.json) index their keys so that this check stays linear.
            bool replaced = false;
            if (members.size() < 32) {
                for (auto& [k, v] : members) {
                    if (k == key) {
                        v = std::move(value);
                        replaced = true;
                        break;
                    }
                }
            } else {
                if (index.empty())
                    for (size_t i = 0; i < members.size(); ++i)
                        index.emplace(members[i].first, i);
                auto [it, inserted] = index.emplace(key, members.size());
                if (!inserted) {
                    members[it->second].second = std::move(value);
                    replaced = true;
                }
            }
            if (!replaced) members.emplace_back(std::move(key), std::move(value));
            skip_ws();
            if (pos_ >= text_.size()) return fail("unterminated object");
            if (text_[pos_] == ',') {
                ++pos_;
                continue;
            }
            if (text_[pos_] == '}') {
                ++pos_;
                out = Json::object(std::move(members));
                return true;
            }
            return fail("expected ',' or '}' in object");
        }
    }

    std::string_view text_;
    size_t pos_ = 0;
    int max_depth_;
    std::string message_;
};

// A finite double in the shortest form that reads back the same; kept recognisable as a float ("2.0").
void append_shortest_double(std::string& out, double v) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    std::string_view s(buf, end - buf);
    out += s;
    if (s.find_first_of(".eE") == std::string_view::npos) out += ".0";
}

void dump_to(std::string& out, const Json& j, const JsonFormat& f, int level) {
    auto newline = [&](int lvl) {
        if (f.indent < 0) return;
        out.push_back('\n');
        out.append(static_cast<size_t>(f.indent * lvl), ' ');
    };
    switch (j.type()) {
        case Json::Type::kNull:
            out += "null";
            break;
        case Json::Type::kBool:
            out += j.as_bool() ? "true" : "false";
            break;
        case Json::Type::kInt:
            out += std::to_string(j.as_int());
            break;
        case Json::Type::kFloat: {
            const double v = j.as_double();
            if (std::isnan(v)) {
                out += "NaN";  // as Python writes them (not RFC 8259, which has no such values)
            } else if (std::isinf(v)) {
                out += v < 0 ? "-Infinity" : "Infinity";
            } else if (f.python_floats) {
                append_python_float(out, v);
            } else {
                append_shortest_double(out, v);
            }
            break;
        }
        case Json::Type::kString:
            json_escape_to(out, j.as_string(), f.ensure_ascii);
            break;
        case Json::Type::kArray: {
            const auto& a = j.as_array();
            out.push_back('[');
            for (size_t i = 0; i < a.size(); ++i) {
                if (i) out += f.item_separator;
                newline(level + 1);
                dump_to(out, a[i], f, level + 1);
            }
            if (!a.empty()) newline(level);
            out.push_back(']');
            break;
        }
        case Json::Type::kObject: {
            const auto& o = j.as_object();
            out.push_back('{');
            for (size_t i = 0; i < o.size(); ++i) {
                if (i) out += f.item_separator;
                newline(level + 1);
                json_escape_to(out, o[i].first, f.ensure_ascii);
                out += f.key_separator;
                dump_to(out, o[i].second, f, level + 1);
            }
            if (!o.empty()) newline(level);
            out.push_back('}');
            break;
        }
    }
}

void append_hex4(std::string& out, uint32_t v) {
    static const char kHex[] = "0123456789abcdef";
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4)
        out.push_back(kHex[(v >> shift) & 0xF]);
}

}  // namespace

Result<Json> Json::parse(std::string_view text, int max_depth) {
    return Parser(text, max_depth).parse_document();
}

std::string Json::dump() const {
    std::string out;
    dump_to(out, *this, JsonFormat{}, 0);
    return out;
}

std::string Json::dump_pretty(int indent) const {
    std::string out;
    JsonFormat f;
    f.indent = indent;
    f.key_separator = ": ";
    dump_to(out, *this, f, 0);
    return out;
}

void json_dump_to(std::string& out, const Json& value, const JsonFormat& format) {
    dump_to(out, value, format, 0);
}

void json_escape_to(std::string& out, std::string_view s, bool ensure_ascii) {
    out.push_back('"');
    size_t pos = 0;
    while (pos < s.size()) {
        const auto c = static_cast<unsigned char>(s[pos]);
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            default:
                if (c < 0x20) {
                    append_hex4(out, c);
                } else if (c >= 0x80 && ensure_ascii) {
                    const char32_t cp = utf8_decode(s, pos);  // an invalid byte: U+FFFD
                    if (cp >= 0x10000) {
                        append_hex4(out, 0xD800 + ((cp - 0x10000) >> 10));
                        append_hex4(out, 0xDC00 + ((cp - 0x10000) & 0x3FF));
                    } else {
                        append_hex4(out, cp);
                    }
                    continue;  // utf8_decode advanced pos
                } else {
                    out.push_back(static_cast<char>(c));
                }
        }
        ++pos;
    }
    out.push_back('"');
}

void append_python_float(std::string& out, double v) {
    if (std::isnan(v)) {
        out += "nan";
        return;
    }
    if (std::isinf(v)) {
        out += v < 0 ? "-inf" : "inf";
        return;
    }
    // Shortest round-trip digits in scientific form, then laid out by Python's repr rule: fixed notation when the
    // decimal exponent is in [-4, 16), else d.ddde+XX.
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    std::string_view s(buf, static_cast<size_t>(res.ptr - buf));
    if (!s.empty() && s[0] == '-') {
        out.push_back('-');
        s.remove_prefix(1);
    }
    const size_t e_pos = s.find('e');
    std::string digits;
    for (char c : s.substr(0, e_pos))
        if (c != '.') digits.push_back(c);
    int exponent = 0;
    std::from_chars(s.data() + e_pos + 1 + (s[e_pos + 1] == '+' ? 1 : 0), s.data() + s.size(), exponent);
    if (exponent >= -4 && exponent < 16) {
        if (exponent < 0) {
            out += "0.";
            out.append(static_cast<size_t>(-exponent - 1), '0');
            out += digits;
        } else if (const size_t int_len = static_cast<size_t>(exponent) + 1; digits.size() <= int_len) {
            out += digits;
            out.append(int_len - digits.size(), '0');
            out += ".0";
        } else {
            out.append(digits, 0, int_len);
            out.push_back('.');
            out.append(digits, int_len, std::string::npos);
        }
        return;
    }
    out.push_back(digits[0]);
    if (digits.size() > 1) {
        out.push_back('.');
        out.append(digits, 1, std::string::npos);
    }
    out.push_back('e');
    out.push_back(exponent < 0 ? '-' : '+');
    const int mag = exponent < 0 ? -exponent : exponent;
    if (mag < 10) out.push_back('0');
    out += std::to_string(mag);
}

namespace {

Status wrong_type(std::string_view key, const char* expected, const Json& found) {
    return Status::error("field \"" + std::string(key) + "\" must be " + expected + ", found " +
                         Json::type_name(found.type()));
}

}  // namespace

Result<int64_t> json_get_int(const Json& obj, std::string_view key, int64_t fallback) {
    const Json* v = obj.find(key);
    if (!v || v->is_null()) return fallback;
    if (v->is_int()) return v->as_int();
    // 4096.0 is an integer written by a float-happy exporter; accept exact integral floats.
    if (v->is_float() && std::floor(v->as_double()) == v->as_double() && std::fabs(v->as_double()) < 9.0e15)
        return static_cast<int64_t>(v->as_double());
    return wrong_type(key, "an integer", *v);
}

Result<double> json_get_double(const Json& obj, std::string_view key, double fallback) {
    const Json* v = obj.find(key);
    if (!v || v->is_null()) return fallback;
    if (v->is_number()) return v->as_double();
    return wrong_type(key, "a number", *v);
}

Result<bool> json_get_bool(const Json& obj, std::string_view key, bool fallback) {
    const Json* v = obj.find(key);
    if (!v || v->is_null()) return fallback;
    if (v->is_bool()) return v->as_bool();
    return wrong_type(key, "true or false", *v);
}

Result<std::string> json_get_string(const Json& obj, std::string_view key, std::string fallback) {
    const Json* v = obj.find(key);
    if (!v || v->is_null()) return fallback;
    if (v->is_string()) return v->as_string();
    return wrong_type(key, "a string", *v);
}

}  // namespace pagoda
