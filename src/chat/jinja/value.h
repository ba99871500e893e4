// Runtime values of the Jinja interpreter, modelled on the Python objects Jinja2 templates see:
// Undefined, None, bool, int, float, str (with a Markup flag), list/tuple, dict, namespace, callables.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pagoda {
class Json;
}

namespace pagoda::jinja {

// Thrown inside the interpreter for template errors; caught at the Template boundary and turned into a Status.
struct TemplateError : std::runtime_error {
    TemplateError(const std::string& message, int line_ = 0) : std::runtime_error(message), line(line_) {}
    int line;
};
// raise_exception(msg) from a template: its message is reported verbatim.
struct RaisedError : TemplateError {
    using TemplateError::TemplateError;
};

class Value;
using ValueList = std::vector<Value>;

struct ValueDict {
    std::vector<std::pair<Value, Value>> items;  // insertion order, unique keys
    const Value* find(const Value& key) const;
    const Value* find(std::string_view key) const;
    const Value* find(const std::string& key) const { return find(std::string_view(key)); }
    const Value* find(const char* key) const { return find(std::string_view(key)); }
    void set(Value key, Value value);
};

struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keyword;
    const Value* kw(std::string_view name) const;
};

class Interpreter;
// Jinja2's LoopContext: one object per for-loop, advanced each iteration.
struct LoopState {
    std::shared_ptr<const ValueList> items;
    size_t index = 0;  // 0-based
};

struct Function {
    std::string name;
    std::function<Value(Interpreter&, CallArgs&)> fn;
};

class Value {
  public:
    enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kFunction, kLoop };

    Value() = default;  // undefined
    static Value undefined(std::string hint = {});
    static Value none();
    Value(bool b);
    Value(int v) : Value(static_cast<int64_t>(v)) {}
    Value(int64_t v);
    Value(double d);
    Value(std::string s, bool markup = false);
    Value(const char* s) : Value(std::string(s)) {}
    static Value list(ValueList items, bool tuple = false);
    static Value dict(ValueDict d);
    static Value ns(ValueDict d);
    // `bound_self`: the object a bound method holds (its nesting depth carries over).
    static Value function(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn,
                          const Value* bound_self = nullptr);
    static Value from_json(const Json& json);
    static Value loop(std::shared_ptr<LoopState> state);

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::kUndefined; }
    bool is_none() const { return kind_ == Kind::kNone; }
    bool is_bool() const { return kind_ == Kind::kBool; }
    bool is_int() const { return kind_ == Kind::kInt; }
    bool is_float() const { return kind_ == Kind::kFloat; }
    bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
    bool is_string() const { return kind_ == Kind::kString; }
    bool is_list() const { return kind_ == Kind::kList; }
    bool is_tuple() const { return kind_ == Kind::kList && flag_; }
    bool is_dict() const { return kind_ == Kind::kDict; }
    bool is_namespace() const { return kind_ == Kind::kNamespace; }
    bool is_function() const { return kind_ == Kind::kFunction; }
    bool is_loop() const { return kind_ == Kind::kLoop; }
    bool is_markup() const { return kind_ == Kind::kString && flag_; }

    bool as_bool() const { return b_; }
    int64_t as_int() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }  // bool is an int, as in Python
    double as_float() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(as_int()); }
    const std::string& str() const { return s_; }  // string value, or the undefined hint
    const ValueList& items() const { return *static_cast<const ValueList*>(obj_.get()); }
    std::shared_ptr<const ValueList> shared_items() const { return {obj_, &items()}; }
    const ValueDict& dict() const { return *static_cast<const ValueDict*>(obj_.get()); }
    ValueDict& ns_attrs() const { return *static_cast<ValueDict*>(obj_.get()); }  // namespaces are shared, mutable
    const Function& function() const { return *static_cast<const Function*>(obj_.get()); }
    LoopState& loop_state() const { return *static_cast<LoopState*>(obj_.get()); }
    const void* identity() const;  // for `is sameas` on shared objects
    // Containers are built bottom-up, so their nesting depth is known and capped (kMaxDepth) when they are made:
    // recursion over values (repr, tojson, ==, destruction) stays shallow. Namespaces may not hold namespaces,
    // which keeps the object graph acyclic.
    int depth() const { return depth_; }
    bool holds_namespace() const { return has_ns_; }
    static constexpr int kMaxDepth = 1000;

    bool truthy() const;
    // Python str() and repr() of the value.
    std::string to_str() const;
    std::string repr() const;
    void append_str(std::string& out) const;
    void append_repr(std::string& out) const;
    const char* type_name() const;

    friend bool operator==(const Value& a, const Value& b);

  private:
    Kind kind_ = Kind::kUndefined;
    bool flag_ = false;  // tuple for lists, Markup for strings
    bool has_ns_ = false;
    uint16_t depth_ = 0;
    union {
        bool b_;
        int64_t i_ = 0;
        double f_;
    };
    std::string s_;
    std::shared_ptr<void> obj_;  // ValueList, ValueDict, Function or LoopState, by kind_
};

// Python's float repr: shortest round-trip digits, '1.0', '1e-05', '1e+16', 'inf', 'nan'.
std::string python_float_repr(double d);
// Python's str.isspace for one code point.
bool python_is_space(char32_t cp);
// Python ordering (<) for numbers, strings and sequences; TypeError otherwise.
int compare_values(const Value& a, const Value& b);

struct JsonDumpOptions {
    bool pretty = false;  // indent given (json.dumps(indent=...) with a number or string)
    std::string indent;   // one level of indentation
    std::string item_separator;
    std::string key_separator;
    bool sort_keys = false;
    bool ensure_ascii = false;
};
// json.dumps of a value (TypeError for undefined, namespaces and callables).
std::string json_dumps(const Value& v, const JsonDumpOptions& options);

}  // namespace pagoda::jinja
