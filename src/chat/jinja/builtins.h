// Internal to chat/jinja: what the built-ins' files share. builtins.cpp binds call arguments and installs the
// globals; python_str.cpp gives Python's str semantics (Unicode properties, case mapping, strip/split, slices, number
// parsing); python_format.cpp str.format and %; methods.cpp attribute and item lookup and the str/dict/list methods;
// filters.cpp and tests.cpp Jinja2's filters and tests, each a name -> function table.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja/interpreter.h"

namespace pagoda::jinja {

[[noreturn]] void type_error(const std::string& message);

// Binds positional and keyword arguments to parameter names; extra or unknown ones are an error.
std::vector<const Value*> bind(const CallArgs& args, std::initializer_list<const char*> names, const std::string& fn);
bool arg_bool(const Value* v, bool fallback);
int64_t arg_int(const Value* v, int64_t fallback, const char* what);
std::string arg_str(const Value* v, const std::string& fallback);

// ---- Python str semantics (python_str.cpp) ----
std::u32string decode(const std::string& s);
std::string encode(const std::u32string& s);
bool is_upper(char32_t c);
bool is_lower(char32_t c);
bool is_alpha(char32_t c);
bool is_decimal(char32_t c);
bool is_digit(char32_t c);
bool is_numeric(char32_t c);
bool is_word(char32_t c);  // Python's re \w
std::string str_lower(const std::string& s);
std::string str_upper(const std::string& s);
std::string strip(const std::string& s, const Value* chars, bool left, bool right);
std::vector<std::string> splitlines(const std::string& s, bool keepends);
Value split(const std::string& s, const Value* sep, int64_t maxsplit, bool from_right);
std::string replace(Interpreter& in, const std::string& s, const std::string& old, const std::string& rep,
                    int64_t count);
// Python slice index normalisation (PySlice_AdjustIndices).
std::vector<size_t> slice_indices(size_t length, const Value& start_v, const Value& stop_v, const Value& step_v);
std::string html_escape(const std::string& s);
// Python int(str, base) for base 10 and 2..36 (and 0: prefix-driven).
bool parse_python_int(const std::string& text, int64_t base, int64_t& out);
bool parse_python_float(const std::string& text, double& out);
Value to_list(const Value& v);
// Lower-cases strings for case-insensitive sort/unique/min/max, as Jinja2's ignore_case does.
Value ignore_case(const Value& v);
// str.center (mode 0), ljust (-1), rjust (1).
std::string pad(Interpreter& in, const std::string& s, const Value* width, const Value* fill, int mode);
// Full case mapping of one code point (mode 0 lower, 1 upper, 2 title): 'ß' -> "SS", 'ﬁ' -> "Fi".
std::string map_char(char32_t c, int mode);
// Lower-cases u[i] as Python's lower_ucs4 does, including the final-sigma rule for U+03A3.
std::string lower_at(const std::u32string& u, size_t i);
std::string capitalize(const std::string& s);
std::string py_title(const std::string& s);

// ---- formatting (python_format.cpp) ----
std::string str_format(Interpreter& in, const std::string& fmt, CallArgs& args);          // str.format
std::string python_percent_format(Interpreter& in, const Value& fmt, const Value& args);  // str % args

// Whether a filter (filters.cpp) or a test (tests.cpp) of that name exists: Jinja2's `x is filter`, `x is test`.
bool is_filter_name(std::string_view name);
bool is_test_name(std::string_view name);

// ---- methods.cpp ----
// A bound method of a str, dict or list (undefined when there is none, or an unsafe one as the sandbox refuses).
Value make_method(const Value& self, const std::string& name);

}  // namespace pagoda::jinja
