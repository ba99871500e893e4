// A small JSON document model: parse with line:column errors, insertion-ordered objects,
// integers kept apart from floats (config files and chat messages rely on both).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace pagoda {

class Json {
  public:
    enum class Type { kNull, kBool, kInt, kFloat, kString, kArray, kObject };
    using Array = std::vector<Json>;
    using Member = std::pair<std::string, Json>;
    using Object = std::vector<Member>;  // insertion order, as Python dicts and HF files keep it

    Json() = default;  // null
    Json(std::nullptr_t) {}
    Json(bool b) : type_(Type::kBool), bool_(b) {}
    Json(int v) : type_(Type::kInt), int_(v) {}
    Json(int64_t v) : type_(Type::kInt), int_(v) {}
    Json(uint64_t v) : type_(Type::kInt), int_(static_cast<int64_t>(v)) {}  // sizes and counts
    Json(double v) : type_(Type::kFloat), float_(v) {}
    Json(const char* s) : type_(Type::kString), string_(s) {}
    Json(std::string s) : type_(Type::kString), string_(std::move(s)) {}
    Json(std::string_view s) : type_(Type::kString), string_(s) {}
    static Json array(Array items = {});
    static Json object(Object members = {});

    // Parses one JSON document (RFC 8259; also accepts NaN/Infinity as Python writes them).
    // Nesting deeper than `max_depth` is an error, never a stack overflow.
    static Result<Json> parse(std::string_view text, int max_depth = 512);

    Type type() const { return type_; }
    bool is_null() const { return type_ == Type::kNull; }
    bool is_bool() const { return type_ == Type::kBool; }
    bool is_int() const { return type_ == Type::kInt; }
    bool is_float() const { return type_ == Type::kFloat; }
    bool is_number() const { return type_ == Type::kInt || type_ == Type::kFloat; }
    bool is_string() const { return type_ == Type::kString; }
    bool is_array() const { return type_ == Type::kArray; }
    bool is_object() const { return type_ == Type::kObject; }

    // Accessors CHECK the type; use the is_*() tests or the get_* helpers for untrusted input.
    bool as_bool() const;
    int64_t as_int() const;
    double as_double() const;  // int or float
    const std::string& as_string() const;
    const Array& as_array() const;
    Array& as_array();
    const Object& as_object() const;
    Object& as_object();

    // Object lookup: nullptr when this is not an object or has no such key.
    const Json* find(std::string_view key) const;
    Json* find(std::string_view key);
    bool contains(std::string_view key) const { return find(key) != nullptr; }
    // Sets (replacing) a member; this must be an object (or null, which becomes an object).
    void set(std::string key, Json value);
    void push_back(Json value);  // this must be an array (or null, which becomes an array)
    size_t size() const;         // elements of an array or members of an object, else 0

    // Compact serialisation ("," and ":" separators); non-ASCII kept as UTF-8.
    std::string dump() const;
    // Pretty serialisation with `indent` spaces.
    std::string dump_pretty(int indent = 2) const;

    friend bool operator==(const Json& a, const Json& b);

    static const char* type_name(Type t);

  private:
    Type type_ = Type::kNull;
    bool bool_ = false;
    int64_t int_ = 0;
    double float_ = 0.0;
    std::string string_;
    std::shared_ptr<Array> array_;    // shared_ptr keeps Json copyable and the header small;
    std::shared_ptr<Object> object_;  // copies are deep (see copy constructor).

  public:
    Json(const Json& other);
    Json& operator=(const Json& other);
    Json(Json&&) noexcept = default;
    Json& operator=(Json&&) noexcept = default;
};

// Typed lookups for config-style objects: a missing key gives `fallback`; a key of the
// wrong type is an error naming the key and the type found.
Result<int64_t> json_get_int(const Json& obj, std::string_view key, int64_t fallback);
Result<double> json_get_double(const Json& obj, std::string_view key, double fallback);
Result<bool> json_get_bool(const Json& obj, std::string_view key, bool fallback);
Result<std::string> json_get_string(const Json& obj, std::string_view key, std::string fallback);

// Appends `s` as a JSON string literal, escaped as Python's json module escapes (\" \\ \n \r \t \b \f, other controls
// \u00XX): the one escaper of the code base. Non-ASCII is kept as UTF-8, or with `ensure_ascii` written as \uXXXX
// (surrogate pairs above U+FFFF, an invalid byte as \ufffd).
void json_escape_to(std::string& out, std::string_view s, bool ensure_ascii = false);

// Appends a double as Python's repr(float) writes it: "1.0", "0.1", "1e+16", "1e-05", "-0.0", "nan", "inf".
void append_python_float(std::string& out, double v);

// How json_dump_to writes a value. The defaults are Json::dump's compact form; Python's json.dumps is
// {.item_separator = ", ", .key_separator = ": ", .python_floats = true}. NaN and infinities are written as Python
// writes them (NaN, Infinity, -Infinity).
struct JsonFormat {
    int indent = -1;  // >= 0: one member per line, indented this much per level
    std::string_view item_separator = ",";
    std::string_view key_separator = ":";
    bool python_floats = false;  // floats as Python's repr(), else the shortest form that reads back the same
    bool ensure_ascii = false;   // see json_escape_to
};
void json_dump_to(std::string& out, const Json& value, const JsonFormat& format);

}  // namespace pagoda
