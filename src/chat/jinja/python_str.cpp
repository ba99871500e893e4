// Python's str semantics for the built-ins: ICU's Unicode properties and case mappings (what Python's str methods
// use), strip/split/splitlines/replace, slice indices, HTML escaping, int()/float() parsing, padding and title case.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <initializer_list>
#include <memory>

#include <unicode/ucasemap.h>
#include <unicode/uchar.h>

#include "chat/jinja/builtins.h"
#include "common/utf8.h"

namespace pagoda::jinja {

// ---- Unicode helpers: ICU's character properties and (root-locale, i.e. locale-independent) case mappings,
// which are the Unicode data Python's str methods use ----

std::u32string decode(const std::string& s) {
    std::u32string out;
    out.reserve(s.size());
    size_t pos = 0;
    while (pos < s.size())
        out += utf8_decode(s, pos);
    return out;
}
std::string encode(const std::u32string& s) {
    std::string out;
    out.reserve(s.size());
    for (char32_t c : s)
        utf8_append(out, c);
    return out;
}

static char32_t to_lower(char32_t c) {
    return static_cast<char32_t>(u_tolower(static_cast<UChar32>(c)));
}
static char32_t to_upper(char32_t c) {
    return static_cast<char32_t>(u_toupper(static_cast<UChar32>(c)));
}
static char32_t to_title(char32_t c) {
    return static_cast<char32_t>(u_totitle(static_cast<UChar32>(c)));
}
bool is_upper(char32_t c) {
    return u_isUUppercase(static_cast<UChar32>(c));
}
bool is_lower(char32_t c) {
    return u_isULowercase(static_cast<UChar32>(c));
}
static bool is_cased(char32_t c) {
    return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASED);
}
bool is_alpha(char32_t c) {
    return u_isalpha(static_cast<UChar32>(c));
}
bool is_decimal(char32_t c) {
    return u_isdigit(static_cast<UChar32>(c));
}
bool is_digit(char32_t c) {
    int t = u_getIntPropertyValue(static_cast<UChar32>(c), UCHAR_NUMERIC_TYPE);
    return t == U_NT_DECIMAL || t == U_NT_DIGIT;
}
bool is_numeric(char32_t c) {
    return u_getIntPropertyValue(static_cast<UChar32>(c), UCHAR_NUMERIC_TYPE) != U_NT_NONE;
}
bool is_word(char32_t c) {
    return is_alpha(c) || is_numeric(c) || c == '_';
}  // Python's re \w

// Full case mapping of a whole string (ß -> SS, final sigma), as str.upper()/str.lower() do.
static std::string full_case(const std::string& s, bool upper) {
    struct Closer {
        void operator()(UCaseMap* m) const { ucasemap_close(m); }
    };
    thread_local std::unique_ptr<UCaseMap, Closer> map = [] {
        UErrorCode status = U_ZERO_ERROR;
        return std::unique_ptr<UCaseMap, Closer>(ucasemap_open("", 0, &status));
    }();
    if (map && s.size() < (1u << 30)) {
        std::string out(s.size() + 16, '\0');
        for (int attempt = 0; attempt < 2; ++attempt) {
            UErrorCode status = U_ZERO_ERROR;
            int32_t n = upper ? ucasemap_utf8ToUpper(map.get(), out.data(), static_cast<int32_t>(out.size()), s.data(),
                                                     static_cast<int32_t>(s.size()), &status)
                              : ucasemap_utf8ToLower(map.get(), out.data(), static_cast<int32_t>(out.size()), s.data(),
                                                     static_cast<int32_t>(s.size()), &status);
            if (status == U_BUFFER_OVERFLOW_ERROR) {
                out.assign(static_cast<size_t>(n) + 16, '\0');
                continue;
            }
            if (U_SUCCESS(status)) {
                out.resize(static_cast<size_t>(n));
                return out;
            }
            break;
        }
    }
    std::u32string u = decode(s);  // fallback: simple per-code-point mapping
    for (auto& c : u)
        c = upper ? to_upper(c) : to_lower(c);
    return encode(u);
}

std::string str_lower(const std::string& s) {
    return full_case(s, false);
}
std::string str_upper(const std::string& s) {
    return full_case(s, true);
}

static std::u32string strip_u(const std::u32string& s, const Value* chars, bool left, bool right) {
    auto strip_it = [&](char32_t c) {
        if (!chars || chars->is_none()) return python_is_space(c);
        if (!chars->is_string()) type_error("strip arg must be None or str");
        std::u32string set = decode(chars->str());
        return set.find(c) != std::u32string::npos;
    };
    size_t b = 0, e = s.size();
    if (left)
        while (b < e && strip_it(s[b]))
            ++b;
    if (right)
        while (e > b && strip_it(s[e - 1]))
            --e;
    return s.substr(b, e - b);
}
std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
    return encode(strip_u(decode(s), chars, left, right));
}

static bool is_line_break(char32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
           c == 0x2028 || c == 0x2029;
}
std::vector<std::string> splitlines(const std::string& s, bool keepends) {
    std::u32string u = decode(s);
    std::vector<std::string> out;
    size_t start = 0, i = 0;
    while (i < u.size()) {
        if (is_line_break(u[i])) {
            size_t eol = i;
            if (u[i] == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ++i;
            ++i;
            out.push_back(encode(u.substr(start, (keepends ? i : eol) - start)));
            start = i;
        } else {
            ++i;
        }
    }
    if (start < u.size()) out.push_back(encode(u.substr(start)));
    return out;
}

Value split(const std::string& s, const Value* sep, int64_t maxsplit, bool from_right) {
    ValueList parts;
    if (!sep || sep->is_none()) {
        std::u32string u = decode(s);
        std::vector<std::pair<size_t, size_t>> words;
        size_t i = 0;
        while (i < u.size()) {
            while (i < u.size() && python_is_space(u[i]))
                ++i;
            if (i >= u.size()) break;
            size_t b = i;
            while (i < u.size() && !python_is_space(u[i]))
                ++i;
            words.emplace_back(b, i);
        }
        if (maxsplit < 0 || static_cast<size_t>(maxsplit) >= words.size()) {
            for (auto [b, e] : words)
                parts.emplace_back(encode(u.substr(b, e - b)));
        } else if (!from_right) {
            for (int64_t k = 0; k < maxsplit; ++k)
                parts.emplace_back(encode(u.substr(words[k].first, words[k].second - words[k].first)));
            std::u32string rest = u.substr(words[static_cast<size_t>(maxsplit)].first);
            parts.emplace_back(encode(strip_u(rest, nullptr, false, true)));
        } else {
            size_t keep = words.size() - static_cast<size_t>(maxsplit);
            std::u32string head = u.substr(0, words[keep - 1].second);
            parts.emplace_back(encode(strip_u(head, nullptr, true, false)));
            for (size_t k = keep; k < words.size(); ++k)
                parts.emplace_back(encode(u.substr(words[k].first, words[k].second - words[k].first)));
        }
        return Value::list(std::move(parts));
    }
    if (!sep->is_string()) type_error(std::string("must be str or None, not ") + sep->type_name());
    const std::string& d = sep->str();
    if (d.empty()) type_error("empty separator");
    if (!from_right) {
        size_t start = 0;
        int64_t n = 0;
        while (maxsplit < 0 || n < maxsplit) {
            size_t p = s.find(d, start);
            if (p == std::string::npos) break;
            parts.emplace_back(s.substr(start, p - start));
            start = p + d.size();
            ++n;
        }
        parts.emplace_back(s.substr(start));
    } else {
        std::vector<std::string> rev;
        size_t end = s.size();
        int64_t n = 0;
        while (maxsplit < 0 || n < maxsplit) {
            if (end < d.size()) break;
            size_t p = s.rfind(d, end - d.size());
            if (p == std::string::npos) break;
            rev.push_back(s.substr(p + d.size(), end - p - d.size()));
            end = p;
            ++n;
        }
        rev.push_back(s.substr(0, end));
        for (auto it = rev.rbegin(); it != rev.rend(); ++it)
            parts.emplace_back(*it);
    }
    return Value::list(std::move(parts));
}

std::string replace(Interpreter& in, const std::string& s, const std::string& old, const std::string& rep,
                    int64_t count) {
    std::string out;
    if (old.empty()) {
        std::u32string u = decode(s);
        int64_t n = 0;
        for (size_t i = 0; i <= u.size(); ++i) {
            if (count < 0 || n < count) {
                out += rep;
                ++n;
            }
            if (i < u.size()) utf8_append(out, u[i]);
            in.check_string_size(out.size());
        }
        return out;
    }
    size_t start = 0;
    int64_t n = 0;
    while (count < 0 || n < count) {
        size_t p = s.find(old, start);
        if (p == std::string::npos) break;
        out.append(s, start, p - start);
        out += rep;
        in.check_string_size(out.size());
        start = p + old.size();
        ++n;
    }
    out.append(s, start, std::string::npos);
    return out;
}

// Python slice index normalisation (PySlice_AdjustIndices).
std::vector<size_t> slice_indices(size_t length, const Value& start_v, const Value& stop_v, const Value& step_v) {
    auto as_index = [](const Value& v) -> int64_t {
        if (v.is_undefined()) raise_undefined(v);
        if (!v.is_int() && !v.is_bool()) type_error("slice indices must be integers or None");
        return v.as_int();
    };
    int64_t len = static_cast<int64_t>(length);
    int64_t step = step_v.is_none() ? 1 : as_index(step_v);
    if (step == 0) type_error("slice step cannot be zero");
    int64_t start, stop;
    if (start_v.is_none()) {
        start = step < 0 ? len - 1 : 0;
    } else {
        start = as_index(start_v);
        if (start < 0)
            start = std::max<int64_t>(start + len, step < 0 ? -1 : 0);
        else if (start >= len)
            start = step < 0 ? len - 1 : len;
    }
    if (stop_v.is_none()) {
        stop = step < 0 ? -1 : len;
    } else {
        stop = as_index(stop_v);
        if (stop < 0)
            stop = std::max<int64_t>(stop + len, step < 0 ? -1 : 0);
        else if (stop >= len)
            stop = step < 0 ? len - 1 : len;
    }
    std::vector<size_t> out;
    if (step > 0)
        for (int64_t i = start; i < stop; i += step)
            out.push_back(static_cast<size_t>(i));
    else
        for (int64_t i = start; i > stop; i += step)
            out.push_back(static_cast<size_t>(i));
    return out;
}

std::string html_escape(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&#34;";
                break;
            case '\'':
                out += "&#39;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

// Python int(str, base) for base 10 and 2..36 (and 0: prefix-driven).
bool parse_python_int(const std::string& text, int64_t base, int64_t& out) {
    std::string s = strip(text, nullptr, true, true);
    size_t i = 0;
    bool neg = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (base == 0 || base == 16 || base == 8 || base == 2) {
        if (i + 1 < s.size() && s[i] == '0') {
            char p = static_cast<char>(std::tolower(static_cast<unsigned char>(s[i + 1])));
            int64_t pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
            if (pb && (base == 0 || base == pb)) {
                base = pb;
                i += 2;
                if (i < s.size() && s[i] == '_') ++i;
            }
        }
        if (base == 0) base = 10;
    }
    if (base < 2 || base > 36 || i >= s.size()) return false;
    __int128 v = 0;
    bool prev_digit = false;
    for (; i < s.size(); ++i) {
        char c = s[i];
        if (c == '_') {
            if (!prev_digit || i + 1 >= s.size()) return false;
            prev_digit = false;
            continue;
        }
        int d = std::isdigit(static_cast<unsigned char>(c))   ? c - '0'
                : std::isalpha(static_cast<unsigned char>(c)) ? std::tolower(static_cast<unsigned char>(c)) - 'a' + 10
                                                              : 99;
        if (d >= base) return false;
        v = v * base + d;
        if (v > (__int128(1) << 63)) throw TemplateError("integer too large");
        prev_digit = true;
    }
    if (!prev_digit) return false;
    v = neg ? -v : v;
    if (v > INT64_MAX) throw TemplateError("integer too large");
    out = static_cast<int64_t>(v);
    return true;
}

bool parse_python_float(const std::string& text, double& out) {
    std::string s = strip(text, nullptr, true, true);
    std::string clean;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '_') {
            if (i == 0 || i + 1 >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i - 1])) ||
                !std::isdigit(static_cast<unsigned char>(s[i + 1])))
                return false;
            continue;
        }
        clean += s[i];
    }
    if (clean.empty()) return false;
    std::string lower = str_lower(clean);
    std::string body = lower[0] == '+' || lower[0] == '-' ? lower.substr(1) : lower;
    if (body == "inf" || body == "infinity" || body == "nan") {
        out = body == "nan" ? NAN : INFINITY;
        if (lower[0] == '-') out = -out;
        return true;
    }
    for (char c : body)
        if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' || c == '-'))
            return false;
    char* end = nullptr;
    out = std::strtod(clean.c_str(), &end);
    return end && *end == '\0';
}

Value to_list(const Value& v) {
    return Value::list(iterate(v));
}

// Lower-cases strings for case-insensitive sort/unique/min/max, as Jinja2's ignore_case does.
Value ignore_case(const Value& v) {
    return v.is_string() ? Value(str_lower(v.str())) : v;
}

std::string pad(Interpreter& in, const std::string& s, const Value* width, const Value* fill, int mode) {
    int64_t w = arg_int(width, 0, "width");
    std::string f = fill ? fill->to_str() : " ";
    if (utf8_length(f) != 1) type_error("The fill character must be exactly one character long");
    int64_t len = static_cast<int64_t>(utf8_length(s));
    if (w <= len) return s;
    int64_t marg = w - len;
    in.check_string_size(s.size() + static_cast<size_t>(marg) * f.size());
    int64_t left = mode == 0 ? marg / 2 + (marg & w & 1) : mode < 0 ? 0 : marg;
    int64_t right = marg - left;
    std::string out;
    for (int64_t i = 0; i < left; ++i)
        out += f;
    out += s;
    for (int64_t i = 0; i < right; ++i)
        out += f;
    return out;
}

// Full case mapping of one code point (mode 0 lower, 1 upper, 2 title): 'ß' -> "SS", 'ﬁ' -> "Fi".
std::string map_char(char32_t c, int mode) {
    struct Closer {
        void operator()(UCaseMap* m) const { ucasemap_close(m); }
    };
    thread_local std::unique_ptr<UCaseMap, Closer> map = [] {
        UErrorCode status = U_ZERO_ERROR;
        return std::unique_ptr<UCaseMap, Closer>(
            ucasemap_open("", U_TITLECASE_NO_BREAK_ADJUSTMENT | U_TITLECASE_NO_LOWERCASE, &status));
    }();
    std::string in;
    utf8_append(in, c);
    if (map) {
        char buf[64];
        UErrorCode status = U_ZERO_ERROR;
        const auto len = static_cast<int32_t>(in.size());
        int32_t n = mode == 0   ? ucasemap_utf8ToLower(map.get(), buf, sizeof(buf), in.data(), len, &status)
                    : mode == 1 ? ucasemap_utf8ToUpper(map.get(), buf, sizeof(buf), in.data(), len, &status)
                                : ucasemap_utf8ToTitle(map.get(), buf, sizeof(buf), in.data(), len, &status);
        if (U_SUCCESS(status)) return std::string(buf, static_cast<size_t>(n));
    }
    std::string out;
    utf8_append(out, mode == 0 ? to_lower(c) : mode == 1 ? to_upper(c) : to_title(c));
    return out;
}

static bool case_ignorable(char32_t c) {
    return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASE_IGNORABLE);
}

// Lower-cases u[i] as Python's lower_ucs4 does, including the final-sigma rule for U+03A3.
std::string lower_at(const std::u32string& u, size_t i) {
    if (u[i] != 0x3A3) return map_char(u[i], 0);
    size_t j = i;
    bool cased_before = false;
    while (j > 0) {
        char32_t c = u[--j];
        if (case_ignorable(c)) continue;
        cased_before = u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASED);
        break;
    }
    bool cased_after = false;
    for (j = i + 1; j < u.size(); ++j) {
        if (case_ignorable(u[j])) continue;
        cased_after = u_hasBinaryProperty(static_cast<UChar32>(u[j]), UCHAR_CASED);
        break;
    }
    return cased_before && !cased_after ? "\u03c2" : "\u03c3";
}

// Python 3.8+ str.capitalize(): the first character title-cased, the rest lower-cased.
std::string capitalize(const std::string& s) {
    std::u32string u = decode(s);
    std::string out;
    for (size_t i = 0; i < u.size(); ++i)
        out += i == 0 ? map_char(u[i], 2) : lower_at(u, i);
    return out;
}

// Python str.title(): a character after a cased one is lower-cased, any other is title-cased.
std::string py_title(const std::string& s) {
    std::u32string u = decode(s);
    std::string out;
    bool prev_cased = false;
    for (size_t i = 0; i < u.size(); ++i) {
        out += prev_cased ? lower_at(u, i) : map_char(u[i], 2);
        prev_cased = is_cased(u[i]);
    }
    return out;
}

}  // namespace pagoda::jinja
