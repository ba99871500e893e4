// Built-ins: Jinja2's filters and tests, the Python str/dict/list methods templates call, attribute and item
// lookup as the sandboxed environment does it, and the globals transformers provides.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <initializer_list>

#include <unicode/ucasemap.h>
#include <unicode/uchar.h>

#include <memory>

#include "chat/jinja/interpreter.h"
#include "common/utf8.h"

namespace pagoda::jinja {

std::string python_percent_format(Interpreter& in, const Value& fmt, const Value& args);

namespace {

[[noreturn]] void type_error(const std::string& message) {
    throw TemplateError(message);
}

// Binds positional and keyword arguments to parameter names; extra or unknown ones are an error.
std::vector<const Value*> bind(const CallArgs& args, std::initializer_list<const char*> names, const std::string& fn) {
    std::vector<const Value*> out(names.size(), nullptr);
    if (args.positional.size() > names.size())
        type_error(fn + "() takes at most " + std::to_string(names.size()) + " argument(s)");
    for (size_t i = 0; i < args.positional.size(); ++i)
        out[i] = &args.positional[i];
    for (const auto& [k, v] : args.keyword) {
        size_t i = 0;
        bool found = false;
        for (const char* n : names) {
            if (k == n) {
                if (out[i]) type_error(fn + "() got multiple values for argument '" + k + "'");
                out[i] = &v;
                found = true;
            }
            ++i;
        }
        if (!found) type_error(fn + "() got an unexpected keyword argument '" + k + "'");
    }
    return out;
}

bool arg_bool(const Value* v, bool fallback) {
    return v ? v->truthy() : fallback;
}
int64_t arg_int(const Value* v, int64_t fallback, const char* what) {
    if (!v || v->is_none()) return fallback;
    if (v->is_undefined()) raise_undefined(*v);
    if (!v->is_int() && !v->is_bool()) type_error(std::string(what) + " must be an integer, not " + v->type_name());
    return v->as_int();
}
std::string arg_str(const Value* v, const std::string& fallback) {
    return v ? v->to_str() : fallback;
}

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

char32_t to_lower(char32_t c) {
    return static_cast<char32_t>(u_tolower(static_cast<UChar32>(c)));
}
char32_t to_upper(char32_t c) {
    return static_cast<char32_t>(u_toupper(static_cast<UChar32>(c)));
}
char32_t to_title(char32_t c) {
    return static_cast<char32_t>(u_totitle(static_cast<UChar32>(c)));
}
bool is_upper(char32_t c) {
    return u_isUUppercase(static_cast<UChar32>(c));
}
bool is_lower(char32_t c) {
    return u_isULowercase(static_cast<UChar32>(c));
}
bool is_cased(char32_t c) {
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
std::string full_case(const std::string& s, bool upper) {
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

std::u32string strip_u(const std::u32string& s, const Value* chars, bool left, bool right) {
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

bool is_line_break(char32_t c) {
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

}  // namespace

// ---- attribute and item lookup ----

namespace {

Value loop_attr(const Value& loop, const std::string& name) {
    const LoopState& st = loop.loop_state();
    const auto i = static_cast<int64_t>(st.index);
    const auto n = static_cast<int64_t>(st.items->size());
    if (name == "index") return Value(i + 1);
    if (name == "index0") return Value(i);
    if (name == "revindex") return Value(n - i);
    if (name == "revindex0") return Value(n - i - 1);
    if (name == "first") return Value(i == 0);
    if (name == "last") return Value(i + 1 == n);
    if (name == "length") return Value(n);
    if (name == "depth") return Value(int64_t{1});
    if (name == "depth0") return Value(int64_t{0});
    if (name == "previtem")
        return i > 0 ? (*st.items)[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item");
    if (name == "nextitem")
        return i + 1 < n ? (*st.items)[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item");
    if (name == "cycle")
        return Value::function("loop.cycle", [i](Interpreter&, CallArgs& args) {
            if (args.positional.empty()) throw TemplateError("no items for cycling given");
            return args.positional[static_cast<size_t>(i) % args.positional.size()];
        });
    return Value::undefined("'LoopContext' object has no attribute '" + name + "'");
}

}  // namespace

Value make_method(const Value& self, const std::string& name);

Value Interpreter::get_attr(const Value& obj, const std::string& name) {
    if (obj.is_undefined()) raise_undefined(obj);
    if (!name.empty() && name[0] == '_') return Value::undefined("access to attribute '" + name + "' is unsafe");
    if (obj.is_loop()) return loop_attr(obj, name);
    Value method = make_method(obj, name);
    if (!method.is_undefined()) return method;
    if (obj.is_dict()) {
        if (const Value* v = obj.dict().find(name)) return *v;
        return Value::undefined("'dict object' has no attribute '" + name + "'");
    }
    if (obj.is_namespace()) {
        if (const Value* v = obj.ns_attrs().find(name)) return *v;
        return Value::undefined("'Namespace' object has no attribute '" + name + "'");
    }
    return Value::undefined(std::string("'") + obj.type_name() + " object' has no attribute '" + name + "'");
}

Value Interpreter::get_item(const Value& obj, const Value& key) {
    if (obj.is_undefined()) raise_undefined(obj);
    if (key.is_undefined() && !obj.is_dict()) raise_undefined(key);
    if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
        int64_t i = key.as_int();
        if (obj.is_list()) {
            int64_t n = static_cast<int64_t>(obj.items().size());
            if (i < 0) i += n;
            if (i >= 0 && i < n) return obj.items()[static_cast<size_t>(i)];
            return Value::undefined("'list object' has no element " + std::to_string(key.as_int()));
        }
        std::u32string u = decode(obj.str());
        int64_t n = static_cast<int64_t>(u.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return Value(encode(u.substr(static_cast<size_t>(i), 1)));
        return Value::undefined("'str object' has no element " + std::to_string(key.as_int()));
    }
    if (obj.is_dict()) {
        if (const Value* v = obj.dict().find(key)) return *v;
    }
    if (key.is_string()) {
        if (obj.is_namespace()) return get_attr(obj, key.str());
        if (!key.str().empty() && key.str()[0] == '_') return Value::undefined("access to attribute is unsafe");
        Value method = make_method(obj, key.str());
        if (!method.is_undefined()) return method;
        return Value::undefined(std::string("'") + obj.type_name() + " object' has no attribute '" + key.str() + "'");
    }
    return Value::undefined(std::string("'") + obj.type_name() + " object' has no element " + key.repr());
}

// ---- methods of str, dict and list ----

namespace {

using MethodFn = Value (*)(Interpreter&, const Value& self, CallArgs& args);

Value bound(const Value& self, const std::string& name, MethodFn fn) {
    return Value::function(
        name, [self, fn](Interpreter& in, CallArgs& args) { return fn(in, self, args); }, &self);
}

int64_t find_cp(const std::string& s, const std::string& sub, bool reverse) {
    size_t p = reverse ? s.rfind(sub) : s.find(sub);
    if (p == std::string::npos) return -1;
    return static_cast<int64_t>(utf8_length(s.substr(0, p)));
}

bool starts_or_ends(const Value& self, CallArgs& args, bool ends) {
    auto a = bind(args, {"prefix", "start", "end"}, ends ? "endswith" : "startswith");
    if (!a[0]) type_error("startswith() takes at least 1 argument");
    std::string s = self.str();
    if ((a[1] && !a[1]->is_none()) || (a[2] && !a[2]->is_none())) {
        std::u32string u = decode(s);
        auto idx = slice_indices(u.size(), a[1] ? *a[1] : Value::none(), a[2] ? *a[2] : Value::none(), Value::none());
        std::u32string part;
        for (size_t i : idx)
            part += u[i];
        s = encode(part);
    }
    std::vector<Value> candidates;
    if (a[0]->is_tuple())
        candidates = a[0]->items();
    else
        candidates.push_back(*a[0]);
    for (const auto& c : candidates) {
        if (!c.is_string()) type_error("startswith first arg must be str or a tuple of str");
        const std::string& p = c.str();
        if (p.size() > s.size()) continue;
        if (ends ? s.compare(s.size() - p.size(), p.size(), p) == 0 : s.compare(0, p.size(), p) == 0) return true;
    }
    return false;
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

bool case_ignorable(char32_t c) {
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

std::string str_format(Interpreter& in, const std::string& fmt, CallArgs& args) {
    std::string out;
    size_t auto_index = 0;
    for (size_t i = 0; i < fmt.size(); ++i) {
        char c = fmt[i];
        if (c == '{') {
            if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
                out += '{';
                ++i;
                continue;
            }
            size_t close = fmt.find('}', i);
            if (close == std::string::npos) type_error("Single '{' encountered in format string");
            std::string field = fmt.substr(i + 1, close - i - 1);
            std::string conv;
            size_t bang = field.find('!');
            if (bang != std::string::npos) {
                conv = field.substr(bang + 1);
                field = field.substr(0, bang);
            }
            if (field.find(':') != std::string::npos)
                type_error("format specifications are not supported in str.format");
            Value v;
            if (field.empty()) {
                if (auto_index >= args.positional.size()) type_error("Replacement index out of range");
                v = args.positional[auto_index++];
            } else if (std::all_of(field.begin(), field.end(),
                                   [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); })) {
                size_t k = std::stoul(field);
                if (k >= args.positional.size()) type_error("Replacement index out of range");
                v = args.positional[k];
            } else {
                const Value* kv = args.kw(field);
                if (!kv) type_error("KeyError: '" + field + "'");
                v = *kv;
            }
            out += conv == "r" ? v.repr() : v.to_str();
            in.check_string_size(out.size());
            i = close;
        } else if (c == '}') {
            if (i + 1 < fmt.size() && fmt[i + 1] == '}')
                ++i;
            else
                type_error("Single '}' encountered in format string");
            out += '}';
        } else {
            out += c;
        }
    }
    return out;
}

Value string_method(const Value& self, const std::string& name) {
    static const std::vector<std::pair<const char*, MethodFn>> kMethods = {
        {"upper",
         [](Interpreter&, const Value& s, CallArgs& a) {
             bind(a, {}, "upper");
             return Value(str_upper(s.str()));
         }},
        {"lower",
         [](Interpreter&, const Value& s, CallArgs& a) {
             bind(a, {}, "lower");
             return Value(str_lower(s.str()));
         }},
        {"title",
         [](Interpreter&, const Value& s, CallArgs& a) {
             bind(a, {}, "title");
             return Value(py_title(s.str()));
         }},
        {"capitalize",
         [](Interpreter&, const Value& s, CallArgs& a) {
             bind(a, {}, "capitalize");
             return Value(capitalize(s.str()));
         }},
        {"swapcase",
         [](Interpreter&, const Value& s, CallArgs& a) {
             bind(a, {}, "swapcase");
             std::u32string u = decode(s.str());
             std::string out;
             for (size_t i = 0; i < u.size(); ++i) {
                 if (is_upper(u[i]))
                     out += lower_at(u, i);
                 else if (is_lower(u[i]))
                     out += map_char(u[i], 1);
                 else
                     utf8_append(out, u[i]);
             }
             return Value(std::move(out));
         }},
        {"strip",
         [](Interpreter&, const Value& s, CallArgs& a) {
             auto b = bind(a, {"chars"}, "strip");
             return Value(strip(s.str(), b[0], true, true));
         }},
        {"lstrip",
         [](Interpreter&, const Value& s, CallArgs& a) {
             auto b = bind(a, {"chars"}, "lstrip");
             return Value(strip(s.str(), b[0], true, false));
         }},
        {"rstrip",
         [](Interpreter&, const Value& s, CallArgs& a) {
             auto b = bind(a, {"chars"}, "rstrip");
             return Value(strip(s.str(), b[0], false, true));
         }},
        {"split",
         [](Interpreter&, const Value& s, CallArgs& a) {
             auto b = bind(a, {"sep", "maxsplit"}, "split");
             return split(s.str(), b[0], arg_int(b[1], -1, "maxsplit"), false);
         }},
        {"rsplit",
         [](Interpreter&, const Value& s, CallArgs& a) {
             auto b = bind(a, {"sep", "maxsplit"}, "rsplit");
             return split(s.str(), b[0], arg_int(b[1], -1, "maxsplit"), true);
         }},
        {"splitlines",
         [](Interpreter&, const Value& s, CallArgs& a) {
             auto b = bind(a, {"keepends"}, "splitlines");
             ValueList out;
             for (auto& line : splitlines(s.str(), arg_bool(b[0], false)))
                 out.emplace_back(std::move(line));
             return Value::list(std::move(out));
         }},
        {"startswith", [](Interpreter&, const Value& s, CallArgs& a) { return Value(starts_or_ends(s, a, false)); }},
        {"endswith", [](Interpreter&, const Value& s, CallArgs& a) { return Value(starts_or_ends(s, a, true)); }},
        {"replace",
         [](Interpreter& in, const Value& s, CallArgs& a) {
             auto b = bind(a, {"old", "new", "count"}, "replace");
             if (!b[0] || !b[1] || !b[0]->is_string() || !b[1]->is_string())
                 type_error("replace() arguments must be str");
             return Value(replace(in, s.str(), b[0]->str(), b[1]->str(), arg_int(b[2], -1, "count")));
         }},
        {"find",
         [](Interpreter&, const Value& s, CallArgs& a) {
             auto b = bind(a, {"sub"}, "find");
             if (!b[0] || !b[0]->is_string()) type_error("find() argument must be str");
             return Value(find_cp(s.str(), b[0]->str(), false));
         }},
        {"rfind",
         [](Interpreter&, const Value& s, CallArgs& a) {
             auto b = bind(a, {"sub"}, "rfind");
             if (!b[0] || !b[0]->is_string()) type_error("rfind() argument must be str");
             return Value(find_cp(s.str(), b[0]->str(), true));
         }},
        {"index",
         [](Interpreter&, const Value& s, CallArgs& a) {
             auto b = bind(a, {"sub"}, "index");
             if (!b[0] || !b[0]->is_string()) type_error("index() argument must be str");
             int64_t i = find_cp(s.str(), b[0]->str(), false);
             if (i < 0) type_error("substring not found");
             return Value(i);
         }},
        {"rindex",
         [](Interpreter&, const Value& s, CallArgs& a) {
             auto b = bind(a, {"sub"}, "rindex");
             if (!b[0] || !b[0]->is_string()) type_error("rindex() argument must be str");
             int64_t i = find_cp(s.str(), b[0]->str(), true);
             if (i < 0) type_error("substring not found");
             return Value(i);
         }},
        {"count",
         [](Interpreter&, const Value& s, CallArgs& a) {
             auto b = bind(a, {"sub"}, "count");
             if (!b[0] || !b[0]->is_string()) type_error("count() argument must be str");
             const std::string& sub = b[0]->str();
             if (sub.empty()) return Value(static_cast<int64_t>(utf8_length(s.str()) + 1));
             int64_t n = 0;
             for (size_t p = s.str().find(sub); p != std::string::npos; p = s.str().find(sub, p + sub.size()))
                 ++n;
             return Value(n);
         }},
        {"join",
         [](Interpreter& in, const Value& s, CallArgs& a) {
             auto b = bind(a, {"iterable"}, "join");
             if (!b[0]) type_error("join() takes exactly one argument");
             std::string out;
             bool first = true;
             for (const auto& item : iterate(*b[0])) {
                 if (!item.is_string())
                     type_error(std::string("sequence item: expected str instance, ") + item.type_name() + " found");
                 if (!first) out += s.str();
                 first = false;
                 out += item.str();
                 in.check_string_size(out.size());
             }
             return Value(std::move(out));
         }},
        {"isdigit",
         [](Interpreter&, const Value& s, CallArgs&) {
             std::u32string u = decode(s.str());
             return Value(!u.empty() && std::all_of(u.begin(), u.end(), is_digit));
         }},
        {"isnumeric",
         [](Interpreter&, const Value& s, CallArgs&) {
             std::u32string u = decode(s.str());
             return Value(!u.empty() && std::all_of(u.begin(), u.end(), is_numeric));
         }},
        {"isdecimal",
         [](Interpreter&, const Value& s, CallArgs&) {
             std::u32string u = decode(s.str());
             return Value(!u.empty() && std::all_of(u.begin(), u.end(), is_decimal));
         }},
        {"isalpha",
         [](Interpreter&, const Value& s, CallArgs&) {
             std::u32string u = decode(s.str());
             return Value(!u.empty() && std::all_of(u.begin(), u.end(), is_alpha));
         }},
        {"isalnum",
         [](Interpreter&, const Value& s, CallArgs&) {
             std::u32string u = decode(s.str());
             return Value(!u.empty() &&
                          std::all_of(u.begin(), u.end(), [](char32_t c) { return is_alpha(c) || is_numeric(c); }));
         }},
        {"isspace",
         [](Interpreter&, const Value& s, CallArgs&) {
             std::u32string u = decode(s.str());
             return Value(!u.empty() && std::all_of(u.begin(), u.end(), python_is_space));
         }},
        {"isupper",
         [](Interpreter&, const Value& s, CallArgs&) {
             std::u32string u = decode(s.str());
             bool cased = false;
             for (char32_t c : u) {
                 if (is_lower(c)) return Value(false);
                 cased = cased || is_upper(c);
             }
             return Value(cased);
         }},
        {"islower",
         [](Interpreter&, const Value& s, CallArgs&) {
             std::u32string u = decode(s.str());
             bool cased = false;
             for (char32_t c : u) {
                 if (is_upper(c)) return Value(false);
                 cased = cased || is_lower(c);
             }
             return Value(cased);
         }},
        {"center",
         [](Interpreter& in, const Value& s, CallArgs& a) {
             auto b = bind(a, {"width", "fillchar"}, "center");
             return Value(pad(in, s.str(), b[0], b[1], 0));
         }},
        {"ljust",
         [](Interpreter& in, const Value& s, CallArgs& a) {
             auto b = bind(a, {"width", "fillchar"}, "ljust");
             return Value(pad(in, s.str(), b[0], b[1], -1));
         }},
        {"rjust",
         [](Interpreter& in, const Value& s, CallArgs& a) {
             auto b = bind(a, {"width", "fillchar"}, "rjust");
             return Value(pad(in, s.str(), b[0], b[1], 1));
         }},
        {"zfill",
         [](Interpreter& in, const Value& s, CallArgs& a) {
             auto b = bind(a, {"width"}, "zfill");
             int64_t w = arg_int(b[0], 0, "width");
             const std::string& str = s.str();
             int64_t len = static_cast<int64_t>(utf8_length(str));
             if (w <= len) return Value(str);
             in.check_string_size(static_cast<size_t>(w));
             size_t sign = !str.empty() && (str[0] == '+' || str[0] == '-') ? 1 : 0;
             return Value(str.substr(0, sign) + std::string(static_cast<size_t>(w - len), '0') + str.substr(sign));
         }},
        {"removeprefix",
         [](Interpreter&, const Value& s, CallArgs& a) {
             auto b = bind(a, {"prefix"}, "removeprefix");
             std::string p = arg_str(b[0], "");
             return Value(s.str().compare(0, p.size(), p) == 0 ? s.str().substr(p.size()) : s.str());
         }},
        {"removesuffix",
         [](Interpreter&, const Value& s, CallArgs& a) {
             auto b = bind(a, {"suffix"}, "removesuffix");
             std::string p = arg_str(b[0], "");
             const std::string& str = s.str();
             bool ends = !p.empty() && p.size() <= str.size() && str.compare(str.size() - p.size(), p.size(), p) == 0;
             return Value(ends ? str.substr(0, str.size() - p.size()) : str);
         }},
        {"partition",
         [](Interpreter&, const Value& s, CallArgs& a) {
             auto b = bind(a, {"sep"}, "partition");
             std::string sep = arg_str(b[0], "");
             if (sep.empty()) type_error("empty separator");
             size_t p = s.str().find(sep);
             if (p == std::string::npos) return Value::list({s, Value(""), Value("")}, true);
             return Value::list({Value(s.str().substr(0, p)), Value(sep), Value(s.str().substr(p + sep.size()))}, true);
         }},
        {"rpartition",
         [](Interpreter&, const Value& s, CallArgs& a) {
             auto b = bind(a, {"sep"}, "rpartition");
             std::string sep = arg_str(b[0], "");
             if (sep.empty()) type_error("empty separator");
             size_t p = s.str().rfind(sep);
             if (p == std::string::npos) return Value::list({Value(""), Value(""), s}, true);
             return Value::list({Value(s.str().substr(0, p)), Value(sep), Value(s.str().substr(p + sep.size()))}, true);
         }},
        {"format", [](Interpreter& in, const Value& s, CallArgs& a) { return Value(str_format(in, s.str(), a)); }},
    };
    for (const auto& [n, fn] : kMethods)
        if (name == n) return bound(self, name, fn);
    return Value::undefined();
}

Value dict_method(const Value& self, const std::string& name) {
    if (name == "items")
        return bound(self, name, [](Interpreter&, const Value& d, CallArgs& a) {
            bind(a, {}, "items");
            ValueList out;
            for (const auto& [k, v] : d.dict().items)
                out.push_back(Value::list({k, v}, true));
            return Value::list(std::move(out));
        });
    if (name == "keys")
        return bound(self, name, [](Interpreter&, const Value& d, CallArgs& a) {
            bind(a, {}, "keys");
            return Value::list(iterate(d));
        });
    if (name == "values")
        return bound(self, name, [](Interpreter&, const Value& d, CallArgs& a) {
            bind(a, {}, "values");
            ValueList out;
            for (const auto& [k, v] : d.dict().items)
                out.push_back(v);
            return Value::list(std::move(out));
        });
    if (name == "get")
        return bound(self, name, [](Interpreter&, const Value& d, CallArgs& a) {
            auto b = bind(a, {"key", "default"}, "get");
            if (!b[0]) type_error("get expected at least 1 argument");
            if (const Value* v = d.dict().find(*b[0])) return *v;
            return b[1] ? *b[1] : Value::none();
        });
    if (name == "copy")
        return bound(self, name, [](Interpreter&, const Value& d, CallArgs&) { return Value::dict(d.dict()); });
    if (name == "pop" || name == "popitem" || name == "update" || name == "clear" || name == "setdefault")
        return Value::undefined("access to attribute '" + name + "' of 'dict' object is unsafe");
    return Value::undefined();
}

Value list_method(const Value& self, const std::string& name) {
    if (name == "index")
        return bound(self, name, [](Interpreter&, const Value& l, CallArgs& a) {
            auto b = bind(a, {"value"}, "index");
            if (!b[0]) type_error("index expected 1 argument");
            for (size_t i = 0; i < l.items().size(); ++i)
                if (l.items()[i] == *b[0]) return Value(static_cast<int64_t>(i));
            type_error(b[0]->repr() + " is not in list");
        });
    if (name == "count")
        return bound(self, name, [](Interpreter&, const Value& l, CallArgs& a) {
            auto b = bind(a, {"value"}, "count");
            if (!b[0]) type_error("count expected 1 argument");
            int64_t n = 0;
            for (const auto& x : l.items())
                n += x == *b[0] ? 1 : 0;
            return Value(n);
        });
    if (name == "copy" && !self.is_tuple())
        return bound(self, name, [](Interpreter&, const Value& l, CallArgs&) { return Value::list(l.items()); });
    if (name == "append" || name == "extend" || name == "insert" || name == "pop" || name == "remove" ||
        name == "clear" || name == "sort" || name == "reverse")
        return Value::undefined("access to attribute '" + name + "' of 'list' object is unsafe");
    return Value::undefined();
}

}  // namespace

Value make_method(const Value& self, const std::string& name) {
    if (self.is_string()) return string_method(self, name);
    if (self.is_dict()) return dict_method(self, name);
    if (self.is_list()) return list_method(self, name);
    return Value::undefined();
}

// ---- printf-style formatting (str % args) ----

std::string python_percent_format(Interpreter& in, const Value& fmt_value, const Value& args) {
    const std::string& fmt = fmt_value.str();
    std::vector<Value> positional;
    const Value* mapping = nullptr;
    if (args.is_tuple())
        positional = args.items();
    else if (args.is_dict())
        mapping = &args;
    else
        positional.push_back(args);
    size_t next_arg = 0;
    bool used_mapping = false;
    std::string out;
    for (size_t i = 0; i < fmt.size(); ++i) {
        if (fmt[i] != '%') {
            out += fmt[i];
            continue;
        }
        if (++i >= fmt.size()) type_error("incomplete format");
        Value arg;
        bool have_arg = false;
        if (fmt[i] == '(') {
            size_t close = fmt.find(')', i);
            if (close == std::string::npos) type_error("incomplete format key");
            if (!mapping) type_error("format requires a mapping");
            const Value* v = mapping->dict().find(fmt.substr(i + 1, close - i - 1));
            if (!v) type_error("KeyError: '" + fmt.substr(i + 1, close - i - 1) + "'");
            arg = *v;
            have_arg = true;
            used_mapping = true;
            i = close + 1;
        }
        std::string flags;
        while (i < fmt.size() && std::string("-+ #0").find(fmt[i]) != std::string::npos)
            flags += fmt[i++];
        auto take = [&]() -> Value {
            if (mapping && !positional.empty() && next_arg == 0 && !args.is_tuple()) {
                ++next_arg;
                return args;
            }
            if (next_arg >= positional.size()) type_error("not enough arguments for format string");
            return positional[next_arg++];
        };
        int width = -1, precision = -1;
        if (i < fmt.size() && fmt[i] == '*') {
            width = static_cast<int>(take().as_int());
            ++i;
        } else {
            while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i])))
                width = std::max(width, 0) * 10 + (fmt[i++] - '0');
        }
        if (i < fmt.size() && fmt[i] == '.') {
            ++i;
            precision = 0;
            while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i])))
                precision = precision * 10 + (fmt[i++] - '0');
        }
        if (width > 1 << 20 || precision > 1 << 20) type_error("format width too large");
        if (i >= fmt.size()) type_error("incomplete format");
        char conv = fmt[i];
        if (conv == '%') {
            out += '%';
            continue;
        }
        if (!have_arg) arg = mapping ? *mapping : take();
        if (mapping && !have_arg) used_mapping = true;
        std::string body;
        if (conv == 's' || conv == 'r' || conv == 'a') {
            body = conv == 's' ? arg.to_str() : arg.repr();
            if (precision >= 0) body = encode(decode(body).substr(0, static_cast<size_t>(precision)));
        } else if (conv == 'd' || conv == 'i' || conv == 'u' || conv == 'x' || conv == 'X' || conv == 'o' ||
                   conv == 'c') {
            if (!arg.is_number())
                type_error(std::string("%") + conv + " format: a real number is required, not " + arg.type_name());
            int64_t v = arg.is_float() ? static_cast<int64_t>(std::trunc(arg.as_float())) : arg.as_int();
            if (conv == 'c') {
                utf8_append(body, static_cast<char32_t>(v));
            } else {
                std::string spec = "%" + std::string(flags.find('+') != std::string::npos ? "+" : "") +
                                   std::string(flags.find(' ') != std::string::npos ? " " : "") +
                                   std::string(flags.find('#') != std::string::npos ? "#" : "") + "ll" +
                                   (conv == 'i' || conv == 'u' ? 'd' : conv);
                char buf[64];
                std::snprintf(buf, sizeof(buf), spec.c_str(), static_cast<long long>(v));
                body = buf;
            }
        } else if (std::string("eEfFgG").find(conv) != std::string::npos) {
            if (!arg.is_number()) type_error(std::string("must be real number, not ") + arg.type_name());
            std::string spec = "%" + std::string(flags.find('+') != std::string::npos ? "+" : "") +
                               std::string(flags.find(' ') != std::string::npos ? " " : "") + "." +
                               std::to_string(precision < 0 ? 6 : precision) + conv;
            char buf[512];
            std::snprintf(buf, sizeof(buf), spec.c_str(), arg.as_float());
            body = buf;
        } else {
            type_error(std::string("unsupported format character '") + conv + "'");
        }
        int64_t len = static_cast<int64_t>(utf8_length(body));
        if (width > len) {
            size_t padn = static_cast<size_t>(width - len);
            if (flags.find('-') != std::string::npos)
                body += std::string(padn, ' ');
            else if (flags.find('0') != std::string::npos && conv != 's' && conv != 'r') {
                size_t sign = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
                body.insert(sign, std::string(padn, '0'));
            } else
                body.insert(0, std::string(padn, ' '));
        }
        out += body;
        in.check_string_size(out.size());
    }
    if (!mapping && next_arg < positional.size()) type_error("not all arguments converted during string formatting");
    (void)used_mapping;
    return out;
}

// ---- filters ----

namespace {

// Jinja2's make_attrgetter: "a.b" or "0" paths, looked up with getitem semantics.
Value get_path(Interpreter& in, const Value& item, const Value& attribute) {
    if (attribute.is_int()) return in.get_item(item, attribute);
    Value cur = item;
    std::string path = attribute.to_str();
    size_t start = 0;
    while (true) {
        size_t dot = path.find('.', start);
        std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        bool numeric = !part.empty() && std::all_of(part.begin(), part.end(),
                                                    [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
        cur = numeric ? in.get_item(cur, Value(static_cast<int64_t>(std::stoll(part)))) : in.get_item(cur, Value(part));
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    return cur;
}

ValueList select_or_reject(Interpreter& in, const Value& seq, CallArgs& args, bool by_attr, bool select,
                           const ScopePtr& scope) {
    size_t off = 0;
    Value attribute;
    if (by_attr) {
        if (args.positional.empty()) type_error("selectattr() missing attribute");
        attribute = args.positional[0];
        off = 1;
    }
    bool has_test = args.positional.size() > off;
    std::string test = has_test ? args.positional[off].to_str() : "";
    CallArgs test_args;
    for (size_t i = off + 1; i < args.positional.size(); ++i)
        test_args.positional.push_back(args.positional[i]);
    test_args.keyword = args.keyword;
    ValueList out;
    for (const auto& item : iterate(seq)) {
        Value v = by_attr ? get_path(in, item, attribute) : item;
        CallArgs ta = test_args;
        bool r = has_test ? in.apply_test(test, v, ta, scope) : v.truthy();
        if (r == select) out.push_back(item);
    }
    return out;
}

Value sum_values(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return Value(a.as_float() + b.as_float());
        return Value(a.as_int() + b.as_int());
    }
    if (a.is_list() && b.is_list()) {
        ValueList items = a.items();
        items.insert(items.end(), b.items().begin(), b.items().end());
        return Value::list(std::move(items), a.is_tuple());
    }
    type_error(std::string("unsupported operand type(s) for +: '") + a.type_name() + "' and '" + b.type_name() + "'");
}

Value indent_filter(Interpreter& in, const Value& v, CallArgs& args) {
    auto b = bind(args, {"width", "first", "blank"}, "indent");
    std::string indention =
        b[0] && b[0]->is_string()
            ? b[0]->str()
            : std::string(static_cast<size_t>(std::max<int64_t>(0, arg_int(b[0], 4, "width"))), ' ');
    std::string s = v.to_str() + "\n";  // Jinja2's quirk, so splitlines sees a last line
    std::vector<std::string> lines = splitlines(s, false);
    std::string rv;
    if (arg_bool(b[2], false)) {
        for (size_t i = 0; i < lines.size(); ++i) {
            if (i) rv += "\n" + indention;
            rv += lines[i];
            in.check_string_size(rv.size());
        }
    } else {
        rv = lines.empty() ? "" : lines[0];
        for (size_t i = 1; i < lines.size(); ++i) {
            rv += "\n";
            if (!lines[i].empty()) rv += indention;
            rv += lines[i];
            in.check_string_size(rv.size());
        }
    }
    if (arg_bool(b[1], false)) rv = indention + rv;
    return Value(rv);
}

Value round_filter(const Value& v, CallArgs& args) {
    auto b = bind(args, {"precision", "method"}, "round");
    int64_t precision = arg_int(b[0], 0, "precision");
    std::string method = arg_str(b[1], "common");
    if (method != "common" && method != "ceil" && method != "floor")
        type_error("method must be 'common', 'ceil' or 'floor'");
    if (!v.is_number()) type_error(std::string("type ") + v.type_name() + " doesn't define __round__ method");
    if (method == "common") {
        if (!v.is_float()) return Value(v.as_int());  // round(int, n) stays an int
        double x = v.as_float();
        if (!std::isfinite(x)) return Value(x);
        if (precision < -308 || precision > 308) return Value(x);
        char buf[512];
        std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(std::max<int64_t>(0, precision)), x);
        if (precision >= 0) return Value(std::strtod(buf, nullptr));
        double scale = std::pow(10.0, static_cast<double>(-precision));
        return Value(std::nearbyint(x / scale) * scale);
    }
    double scale = std::pow(10.0, static_cast<double>(precision));
    double x = v.as_float() * scale;
    return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value int_filter(const Value& v, CallArgs& args) {
    auto b = bind(args, {"default", "base"}, "int");
    Value fallback = b[0] ? *b[0] : Value(int64_t{0});
    int64_t base = arg_int(b[1], 10, "base");
    if (v.is_undefined()) raise_undefined(v);
    if (v.is_string()) {
        int64_t out;
        if (parse_python_int(v.str(), base, out)) return Value(out);
        double d;
        if (parse_python_float(v.str(), d) && std::isfinite(d) && std::fabs(d) < 9.2e18)
            return Value(static_cast<int64_t>(std::trunc(d)));
        return fallback;
    }
    if (v.is_float()) {
        double d = v.as_float();
        if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
        return Value(static_cast<int64_t>(std::trunc(d)));
    }
    if (v.is_number()) return Value(v.as_int());
    return fallback;
}

Value float_filter(const Value& v, CallArgs& args) {
    auto b = bind(args, {"default"}, "float");
    Value fallback = b[0] ? *b[0] : Value(0.0);
    if (v.is_undefined()) raise_undefined(v);
    if (v.is_number()) return Value(v.as_float());
    if (v.is_string()) {
        double d;
        if (parse_python_float(v.str(), d)) return Value(d);
    }
    return fallback;
}

Value tojson_filter(const Value& v, CallArgs& args) {
    // transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
    auto b = bind(args, {"ensure_ascii", "indent", "separators", "sort_keys"}, "tojson");
    JsonDumpOptions o;
    o.ensure_ascii = arg_bool(b[0], false);
    if (b[1] && !b[1]->is_none()) {
        o.pretty = true;
        if (b[1]->is_string())
            o.indent = b[1]->str();
        else
            o.indent =
                std::string(static_cast<size_t>(std::clamp<int64_t>(arg_int(b[1], 0, "indent"), 0, 1 << 16)), ' ');
    }
    o.item_separator = o.pretty ? "," : ", ";
    o.key_separator = ": ";
    if (b[2] && !b[2]->is_none()) {
        std::vector<Value> seps = iterate(*b[2]);
        if (seps.size() != 2) type_error("separators must be a (item_separator, key_separator) pair");
        o.item_separator = seps[0].to_str();
        o.key_separator = seps[1].to_str();
    }
    o.sort_keys = arg_bool(b[3], false);
    return Value(json_dumps(v, o));
}

Value sort_filter(Interpreter& in, const Value& v, CallArgs& args) {
    auto b = bind(args, {"reverse", "case_sensitive", "attribute"}, "sort");
    bool reverse = arg_bool(b[0], false);
    bool case_sensitive = arg_bool(b[1], false);
    std::vector<Value> items = iterate(v);
    std::vector<std::pair<Value, Value>> keyed;
    for (auto& item : items) {
        Value key = b[2] && !b[2]->is_none() ? get_path(in, item, *b[2]) : item;
        keyed.emplace_back(case_sensitive ? key : ignore_case(key), item);
    }
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
        return reverse ? compare_values(y.first, x.first) < 0 : compare_values(x.first, y.first) < 0;
    });
    ValueList out;
    for (auto& [k, item] : keyed)
        out.push_back(item);
    return Value::list(std::move(out));
}

Value min_max(Interpreter& in, const Value& v, CallArgs& args, bool want_max) {
    auto b = bind(args, {"case_sensitive", "attribute"}, want_max ? "max" : "min");
    bool case_sensitive = arg_bool(b[0], false);
    const Value* best = nullptr;
    Value best_key;
    std::vector<Value> items = iterate(v);
    for (const auto& item : items) {
        Value key = b[1] && !b[1]->is_none() ? get_path(in, item, *b[1]) : item;
        if (!case_sensitive) key = ignore_case(key);
        if (!best || (want_max ? compare_values(key, best_key) > 0 : compare_values(key, best_key) < 0)) {
            best = &item;
            best_key = key;
        }
    }
    if (!best) return Value::undefined("No aggregated item, sequence was empty.");
    return *best;
}

}  // namespace

Value Interpreter::apply_filter(const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    auto no_args = [&]() { bind(args, {}, name); };
    if (name == "__slice__") {
        if (v.is_undefined()) raise_undefined(v);
        const Value& a = args.positional[0];
        const Value& b = args.positional[1];
        const Value& c = args.positional[2];
        if (v.is_string()) {
            std::u32string u = decode(v.str());
            std::u32string out;
            for (size_t i : slice_indices(u.size(), a, b, c))
                out += u[i];
            return Value(encode(out));
        }
        if (v.is_list()) {
            ValueList out;
            for (size_t i : slice_indices(v.items().size(), a, b, c))
                out.push_back(v.items()[i]);
            return Value::list(std::move(out), v.is_tuple());
        }
        return Value::undefined(std::string("'") + v.type_name() + " object' is not subscriptable");
    }
    if (name == "trim") {
        auto b = bind(args, {"chars"}, name);
        return Value(strip(v.to_str(), b[0], true, true));
    }
    if (name == "length" || name == "count") {
        no_args();
        switch (v.kind()) {
            case Value::Kind::kUndefined:
                return Value(int64_t{0});
            case Value::Kind::kString:
                return Value(static_cast<int64_t>(utf8_length(v.str())));
            case Value::Kind::kList:
                return Value(static_cast<int64_t>(v.items().size()));
            case Value::Kind::kDict:
                return Value(static_cast<int64_t>(v.dict().items.size()));
            default:
                type_error(std::string("object of type '") + v.type_name() + "' has no len()");
        }
    }
    if (name == "tojson") return tojson_filter(v, args);
    if (name == "safe") {
        no_args();
        return Value(v.to_str(), true);
    }
    if (name == "string") {
        no_args();
        return v.is_string() ? v : Value(v.to_str());
    }
    if (name == "escape" || name == "e" || name == "forceescape") {
        no_args();
        if (v.is_markup() && name != "forceescape") return v;
        return Value(html_escape(v.to_str()), true);
    }
    if (name == "items") {
        no_args();
        if (v.is_undefined()) return Value::list({});
        if (!v.is_dict()) type_error("Can only get item pairs from a mapping.");
        ValueList out;
        for (const auto& [k, val] : v.dict().items)
            out.push_back(Value::list({k, val}, true));
        return Value::list(std::move(out));
    }
    if (name == "default" || name == "d") {
        auto b = bind(args, {"default_value", "boolean"}, name);
        Value fallback = b[0] ? *b[0] : Value("");
        if (v.is_undefined() || (arg_bool(b[1], false) && !v.truthy())) return fallback;
        return v;
    }
    if (name == "upper") {
        no_args();
        return Value(str_upper(v.to_str()));
    }
    if (name == "lower") {
        no_args();
        return Value(str_lower(v.to_str()));
    }
    if (name == "capitalize") {
        no_args();
        return Value(capitalize(v.to_str()));
    }
    if (name == "title") {
        no_args();
        // Jinja2 splits on runs of [-\s({[<] and writes each piece as piece[0].upper() + piece[1:].lower().
        std::u32string u = decode(v.to_str());
        std::string out;
        size_t i = 0;
        while (i < u.size()) {
            size_t j = i;
            auto is_sep = [](char32_t c) {
                return c == '-' || python_is_space(c) || c == '(' || c == '{' || c == '[' || c == '<';
            };
            bool sep = is_sep(u[i]);
            while (j < u.size() && is_sep(u[j]) == sep)
                ++j;
            if (sep) {
                out += encode(u.substr(i, j - i));
            } else {
                out += str_upper(encode(u.substr(i, 1)));
                out += str_lower(encode(u.substr(i + 1, j - i - 1)));
            }
            i = j;
        }
        return Value(std::move(out));
    }
    if (name == "replace") {
        auto b = bind(args, {"old", "new", "count"}, name);
        if (!b[0] || !b[1]) type_error("replace() missing arguments");
        return Value(replace(*this, v.to_str(), b[0]->to_str(), b[1]->to_str(), arg_int(b[2], -1, "count")));
    }
    if (name == "join") {
        auto b = bind(args, {"d", "attribute"}, name);
        std::string sep = b[0] ? b[0]->to_str() : "";
        std::string out;
        bool first = true;
        for (const auto& item : iterate(v)) {
            if (!first) out += sep;
            first = false;
            Value x = b[1] && !b[1]->is_none() ? get_path(*this, item, *b[1]) : item;
            x.append_str(out);
            check_string_size(out.size());
        }
        return Value(std::move(out));
    }
    if (name == "list") {
        no_args();
        return to_list(v);
    }
    if (name == "first") {
        no_args();
        std::vector<Value> items = iterate(v);
        return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
    }
    if (name == "last") {
        no_args();
        if (v.is_undefined()) raise_undefined(v);
        std::vector<Value> items = iterate(v);
        return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
    }
    if (name == "reverse") {
        no_args();
        if (v.is_string()) {
            std::u32string u = decode(v.str());
            std::reverse(u.begin(), u.end());
            return Value(encode(u));
        }
        std::vector<Value> items = iterate(v);
        std::reverse(items.begin(), items.end());
        return Value::list(std::move(items));
    }
    if (name == "sort") return sort_filter(*this, v, args);
    if (name == "dictsort") {
        auto b = bind(args, {"case_sensitive", "by", "reverse"}, name);
        if (!v.is_dict()) type_error("dictsort filter expects a mapping");
        std::string by = arg_str(b[1], "key");
        if (by != "key" && by != "value") type_error("You can only sort by either \"key\" or \"value\"");
        bool cs = arg_bool(b[0], false), rev = arg_bool(b[2], false);
        std::vector<std::pair<Value, Value>> items = v.dict().items;
        std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
            Value kx = by == "key" ? x.first : x.second, ky = by == "key" ? y.first : y.second;
            if (!cs) {
                kx = ignore_case(kx);
                ky = ignore_case(ky);
            }
            return rev ? compare_values(ky, kx) < 0 : compare_values(kx, ky) < 0;
        });
        ValueList out;
        for (auto& [k, val] : items)
            out.push_back(Value::list({k, val}, true));
        return Value::list(std::move(out));
    }
    if (name == "unique") {
        auto b = bind(args, {"case_sensitive", "attribute"}, name);
        bool cs = arg_bool(b[0], false);
        ValueList out, seen;
        for (const auto& item : iterate(v)) {
            Value key = b[1] && !b[1]->is_none() ? get_path(*this, item, *b[1]) : item;
            if (!cs) key = ignore_case(key);
            if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
            seen.push_back(key);
            out.push_back(item);
        }
        return Value::list(std::move(out));
    }
    if (name == "min") return min_max(*this, v, args, false);
    if (name == "max") return min_max(*this, v, args, true);
    if (name == "sum") {
        auto b = bind(args, {"attribute", "start"}, name);
        Value total = b[1] ? *b[1] : Value(int64_t{0});
        for (const auto& item : iterate(v))
            total = sum_values(total, b[0] && !b[0]->is_none() ? get_path(*this, item, *b[0]) : item);
        return total;
    }
    if (name == "abs") {
        no_args();
        if (!v.is_number()) type_error(std::string("bad operand type for abs(): '") + v.type_name() + "'");
        if (v.is_float()) return Value(std::fabs(v.as_float()));
        if (v.as_int() == INT64_MIN) type_error("integer overflow");
        return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
    }
    if (name == "round") return round_filter(v, args);
    if (name == "int") return int_filter(v, args);
    if (name == "float") return float_filter(v, args);
    if (name == "indent") return indent_filter(*this, v, args);
    if (name == "center") {
        auto b = bind(args, {"width"}, name);
        Value w = b[0] ? *b[0] : Value(int64_t{80});
        return Value(pad(*this, v.to_str(), &w, nullptr, 0));
    }
    if (name == "wordcount") {
        no_args();
        std::u32string u = decode(v.to_str());
        int64_t n = 0;
        bool in_word = false;
        for (char32_t c : u) {
            bool w = is_word(c);
            if (w && !in_word) ++n;
            in_word = w;
        }
        return Value(n);
    }
    if (name == "truncate") {
        auto b = bind(args, {"length", "killwords", "end", "leeway"}, name);
        std::string s = v.to_str();
        int64_t length = arg_int(b[0], 255, "length");
        std::string end = arg_str(b[2], "...");
        int64_t leeway = arg_int(b[3], 5, "leeway");
        std::u32string u = decode(s);
        int64_t end_len = static_cast<int64_t>(utf8_length(end));
        if (length < end_len) type_error("expected length >= " + std::to_string(end_len));
        if (leeway < 0) type_error("expected leeway >= 0");
        if (static_cast<int64_t>(u.size()) <= length + leeway) return Value(s);
        std::string head = encode(u.substr(0, static_cast<size_t>(length - end_len)));
        if (arg_bool(b[1], false)) return Value(head + end);
        size_t sp = head.rfind(' ');
        return Value((sp == std::string::npos ? head : head.substr(0, sp)) + end);
    }
    if (name == "map") {
        ValueList out;
        std::vector<Value> items = iterate(v);
        if (!args.positional.empty()) {
            std::string filter = args.positional[0].to_str();
            CallArgs rest;
            rest.positional.assign(args.positional.begin() + 1, args.positional.end());
            rest.keyword = args.keyword;
            for (const auto& item : items) {
                CallArgs a = rest;
                out.push_back(apply_filter(filter, item, a, scope));
            }
        } else {
            auto b = bind(args, {"attribute", "default"}, name);
            if (!b[0]) type_error("map requires a filter name or attribute=");
            for (const auto& item : items) {
                Value x = get_path(*this, item, *b[0]);
                if (x.is_undefined() && b[1]) x = *b[1];
                out.push_back(x);
            }
        }
        return Value::list(std::move(out));
    }
    if (name == "select") return Value::list(select_or_reject(*this, v, args, false, true, scope));
    if (name == "reject") return Value::list(select_or_reject(*this, v, args, false, false, scope));
    if (name == "selectattr") return Value::list(select_or_reject(*this, v, args, true, true, scope));
    if (name == "rejectattr") return Value::list(select_or_reject(*this, v, args, true, false, scope));
    if (name == "attr") {
        auto b = bind(args, {"name"}, name);
        return get_attr(v, arg_str(b[0], ""));
    }
    if (name == "batch") {
        auto b = bind(args, {"linecount", "fill_with"}, name);
        int64_t n = arg_int(b[0], 1, "linecount");
        if (n <= 0) type_error("batch size must be positive");
        ValueList out, cur;
        for (const auto& item : iterate(v)) {
            cur.push_back(item);
            if (static_cast<int64_t>(cur.size()) == n) {
                out.push_back(Value::list(std::move(cur)));
                cur.clear();
            }
        }
        if (!cur.empty()) {
            if (b[1] && !b[1]->is_none())
                while (static_cast<int64_t>(cur.size()) < n)
                    cur.push_back(*b[1]);
            out.push_back(Value::list(std::move(cur)));
        }
        return Value::list(std::move(out));
    }
    if (name == "format") {
        if (!args.keyword.empty() && !args.positional.empty())
            type_error("can't handle positional and keyword arguments at the same time");
        Value fmt_args;
        if (!args.keyword.empty()) {
            ValueDict d;
            for (auto& [k, x] : args.keyword)
                d.set(Value(k), x);
            fmt_args = Value::dict(std::move(d));
        } else {
            fmt_args = Value::list(args.positional, true);
        }
        return Value(python_percent_format(*this, Value(v.to_str()), fmt_args));
    }
    if (name == "pprint") {
        no_args();
        return Value(v.repr());
    }
    if (name == "striptags") {
        no_args();
        std::string s = v.to_str(), out;
        bool in_tag = false;
        for (char c : s) {
            if (c == '<')
                in_tag = true;
            else if (c == '>' && in_tag)
                in_tag = false;
            else if (!in_tag)
                out += c;
        }
        return Value(split(out, nullptr, -1, false).items().empty() ? std::string() : [&] {
            std::string joined;
            for (const auto& w : split(out, nullptr, -1, false).items())
                joined += (joined.empty() ? "" : " ") + w.str();
            return joined;
        }());
    }
    throw TemplateError("no filter named '" + name + "'");
}

// ---- tests ----

bool Interpreter::apply_test(const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    auto one = [&]() -> const Value& {
        if (args.positional.size() != 1) type_error("test '" + name + "' takes exactly one argument");
        return args.positional[0];
    };
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "boolean") return v.is_bool();
    if (name == "false") return v.is_bool() && !v.as_bool();
    if (name == "true") return v.is_bool() && v.as_bool();
    if (name == "integer") return v.is_int();
    if (name == "float") return v.is_float();
    if (name == "number") return v.is_number();
    if (name == "string") return v.is_string();
    if (name == "mapping") return v.is_dict();
    if (name == "iterable") return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
    if (name == "sequence") return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
    if (name == "callable") return v.is_function() || v.is_undefined();  // Undefined defines __call__
    if (name == "escaped") return v.is_markup();
    if (name == "lower" || name == "upper") {
        CallArgs none;
        return make_method(Value(v.to_str()), name == "lower" ? "islower" : "isupper")
            .function()
            .fn(*this, none)
            .truthy();
    }
    if (name == "sameas") {
        const Value& o = one();
        if (v.identity() || o.identity()) return v.identity() == o.identity();
        if (v.kind() != o.kind()) return false;
        return v.is_none() || v.is_undefined() || (v.is_bool() && v.as_bool() == o.as_bool());
    }
    if (name == "even" || name == "odd") {
        if (v.is_undefined()) raise_undefined(v);
        if (!v.is_number())
            type_error(std::string("unsupported operand type(s) for %: '") + v.type_name() + "' and 'int'");
        int64_t m = v.is_float() ? static_cast<int64_t>(std::fmod(v.as_float(), 2.0)) : v.as_int() % 2;
        return name == "even" ? m == 0 : m != 0;
    }
    if (name == "divisibleby") {
        const Value& n = one();
        if (!v.is_number() || !n.is_number()) type_error("divisibleby needs numbers");
        if (n.as_float() == 0.0) type_error("integer division or modulo by zero");
        if (v.is_float() || n.is_float()) return std::fmod(v.as_float(), n.as_float()) == 0.0;
        return n.as_int() == -1 || v.as_int() % n.as_int() == 0;
    }
    if (name == "eq" || name == "equalto" || name == "==") return v == one();
    if (name == "ne" || name == "!=") return !(v == one());
    if (name == "lt" || name == "lessthan" || name == "<") return compare_values(v, one()) < 0;
    if (name == "le" || name == "<=") return compare_values(v, one()) <= 0;
    if (name == "gt" || name == "greaterthan" || name == ">") return compare_values(v, one()) > 0;
    if (name == "ge" || name == ">=") return compare_values(v, one()) >= 0;
    if (name == "in") return value_in(v, one());
    if (name == "filter" || name == "test") {
        static const char* const kFilters[] = {
            "trim",   "length",    "count",    "tojson", "safe",      "string",     "escape",     "e",
            "items",  "default",   "d",        "upper",  "lower",     "capitalize", "title",      "replace",
            "join",   "list",      "first",    "last",   "reverse",   "sort",       "dictsort",   "unique",
            "min",    "max",       "sum",      "abs",    "round",     "int",        "float",      "indent",
            "center", "wordcount", "truncate", "map",    "select",    "reject",     "selectattr", "rejectattr",
            "attr",   "batch",     "format",   "pprint", "striptags", "forceescape"};
        static const char* const kTests[] = {
            "defined", "undefined", "none",    "boolean",  "false",       "true",     "integer", "float",
            "number",  "string",    "mapping", "iterable", "sequence",    "callable", "escaped", "lower",
            "upper",   "sameas",    "even",    "odd",      "divisibleby", "eq",       "equalto", "ne",
            "lt",      "lessthan",  "le",      "gt",       "greaterthan", "ge",       "in",      "filter",
            "test",    "==",        "!=",      "<",        "<=",          ">",        ">="};
        if (!v.is_string()) return false;
        if (name == "filter") {
            for (const char* f : kFilters)
                if (v.str() == f) return true;
        } else {
            for (const char* t : kTests)
                if (v.str() == t) return true;
        }
        return false;
    }
    (void)scope;
    throw TemplateError("no test named '" + name + "'");
}

// ---- globals ----

void Interpreter::install_globals(Scope& globals) {
    globals.set("raise_exception", Value::function("raise_exception", [](Interpreter&, CallArgs& args) -> Value {
                    auto b = bind(args, {"message"}, "raise_exception");
                    throw RaisedError(b[0] ? b[0]->to_str() : "");
                }));
    globals.set("strftime_now", Value::function("strftime_now", [](Interpreter&, CallArgs& args) -> Value {
                    auto b = bind(args, {"format"}, "strftime_now");
                    std::string fmt = arg_str(b[0], "");
                    if (fmt.size() > 1024) type_error("strftime format too long");
                    std::time_t now = std::time(nullptr);
                    std::tm tm{};
                    localtime_r(&now, &tm);
                    if (fmt.empty()) return Value("");
                    std::string buf(fmt.size() * 16 + 256, '\0');
                    size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
                    buf.resize(n);
                    return Value(buf);
                }));
    globals.set("range", Value::function("range", [](Interpreter& in, CallArgs& args) -> Value {
                    auto b = bind(args, {"start", "stop", "step"}, "range");
                    if (!b[0]) type_error("range expected at least 1 argument, got 0");
                    int64_t start = 0, stop, step = 1;
                    if (!b[1]) {
                        stop = arg_int(b[0], 0, "range()");
                    } else {
                        start = arg_int(b[0], 0, "range()");
                        stop = arg_int(b[1], 0, "range()");
                        step = arg_int(b[2], 1, "range()");
                    }
                    if (step == 0) type_error("range() arg 3 must not be zero");
                    __int128 count = step > 0 ? (stop > start ? (__int128(stop) - start + step - 1) / step : 0)
                                              : (start > stop ? (__int128(start) - stop - step - 1) / -step : 0);
                    // The sandbox caps ranges at 100000 items (jinja2.sandbox.MAX_RANGE).
                    if (count > 100000)
                        type_error("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
                    in.check_container_size(static_cast<size_t>(count));
                    ValueList out;
                    for (int64_t i = 0; i < static_cast<int64_t>(count); ++i)
                        out.emplace_back(start + i * step);
                    return Value::list(std::move(out));
                }));
    globals.set("namespace", Value::function("namespace", [](Interpreter&, CallArgs& args) -> Value {
                    ValueDict attrs;
                    for (const auto& p : args.positional) {
                        if (!p.is_dict()) type_error("namespace() positional argument must be a mapping");
                        for (const auto& [k, v] : p.dict().items)
                            attrs.set(k, v);
                    }
                    for (const auto& [k, v] : args.keyword)
                        attrs.set(Value(k), v);
                    for (const auto& [k, v] : attrs.items)
                        if (k.is_string() && !k.str().empty() && k.str()[0] == '_')
                            type_error("Chat templates cannot store underscore-prefixed attributes on a namespace");
                    return Value::ns(std::move(attrs));
                }));
    globals.set("dict", Value::function("dict", [](Interpreter&, CallArgs& args) -> Value {
                    ValueDict d;
                    if (args.positional.size() > 1) type_error("dict expected at most 1 argument");
                    if (!args.positional.empty()) {
                        const Value& p = args.positional[0];
                        if (p.is_dict()) {
                            d = p.dict();
                        } else {
                            for (const auto& pair : iterate(p)) {
                                std::vector<Value> kv = iterate(pair);
                                if (kv.size() != 2) type_error("dictionary update sequence element has wrong length");
                                d.set(kv[0], kv[1]);
                            }
                        }
                    }
                    for (const auto& [k, v] : args.keyword)
                        d.set(Value(k), v);
                    return Value::dict(std::move(d));
                }));
}

}  // namespace pagoda::jinja
