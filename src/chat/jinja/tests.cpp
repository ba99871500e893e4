// Jinja2's tests (`x is defined`, `x is divisibleby 3`, ...), a name -> function table (apply_test).
#include <cmath>
#include <string_view>
#include <unordered_map>

#include "chat/jinja/builtins.h"

namespace pagoda::jinja {

namespace {

// One test call: `v is name(args)`.
struct TestCall {
    Interpreter& in;
    const std::string& name;
    const Value& v;
    CallArgs& args;
    // The one argument of a test that takes one (`x is divisibleby 3`).
    const Value& one() const {
        if (args.positional.size() != 1) type_error("test '" + name + "' takes exactly one argument");
        return args.positional[0];
    }
};

bool test_iterable(const TestCall& c) {
    return c.v.is_undefined() || c.v.is_string() || c.v.is_list() || c.v.is_dict();
}

// `x is lower`, `x is upper`: str.islower(), str.isupper().
bool test_case(const TestCall& c) {
    CallArgs none;
    return make_method(Value(c.v.to_str()), c.name == "lower" ? "islower" : "isupper")
        .function()
        .fn(c.in, none)
        .truthy();
}

bool test_sameas(const TestCall& c) {
    const Value& o = c.one();
    if (c.v.identity() || o.identity()) return c.v.identity() == o.identity();
    if (c.v.kind() != o.kind()) return false;
    return c.v.is_none() || c.v.is_undefined() || (c.v.is_bool() && c.v.as_bool() == o.as_bool());
}

bool test_parity(const TestCall& c) {
    if (c.v.is_undefined()) raise_undefined(c.v);
    if (!c.v.is_number())
        type_error(std::string("unsupported operand type(s) for %: '") + c.v.type_name() + "' and 'int'");
    int64_t m = c.v.is_float() ? static_cast<int64_t>(std::fmod(c.v.as_float(), 2.0)) : c.v.as_int() % 2;
    return c.name == "even" ? m == 0 : m != 0;
}

bool test_divisibleby(const TestCall& c) {
    const Value& n = c.one();
    if (!c.v.is_number() || !n.is_number()) type_error("divisibleby needs numbers");
    if (n.as_float() == 0.0) type_error("integer division or modulo by zero");
    if (c.v.is_float() || n.is_float()) return std::fmod(c.v.as_float(), n.as_float()) == 0.0;
    return n.as_int() == -1 || c.v.as_int() % n.as_int() == 0;
}

bool test_eq(const TestCall& c) {
    return c.v == c.one();
}

bool test_ne(const TestCall& c) {
    return !(c.v == c.one());
}

bool test_lt(const TestCall& c) {
    return compare_values(c.v, c.one()) < 0;
}

bool test_le(const TestCall& c) {
    return compare_values(c.v, c.one()) <= 0;
}

bool test_gt(const TestCall& c) {
    return compare_values(c.v, c.one()) > 0;
}

bool test_ge(const TestCall& c) {
    return compare_values(c.v, c.one()) >= 0;
}

using TestFn = bool (*)(const TestCall& c);

const std::unordered_map<std::string_view, TestFn>& test_table() {
    static const std::unordered_map<std::string_view, TestFn> kTests = {
        {"defined", [](const TestCall& c) { return !c.v.is_undefined(); }},
        {"undefined", [](const TestCall& c) { return c.v.is_undefined(); }},
        {"none", [](const TestCall& c) { return c.v.is_none(); }},
        {"boolean", [](const TestCall& c) { return c.v.is_bool(); }},
        {"false", [](const TestCall& c) { return c.v.is_bool() && !c.v.as_bool(); }},
        {"true", [](const TestCall& c) { return c.v.is_bool() && c.v.as_bool(); }},
        {"integer", [](const TestCall& c) { return c.v.is_int(); }},
        {"float", [](const TestCall& c) { return c.v.is_float(); }},
        {"number", [](const TestCall& c) { return c.v.is_number(); }},
        {"string", [](const TestCall& c) { return c.v.is_string(); }},
        {"mapping", [](const TestCall& c) { return c.v.is_dict(); }},
        {"iterable", test_iterable},
        {"sequence", test_iterable},
        // Undefined defines __call__.
        {"callable", [](const TestCall& c) { return c.v.is_function() || c.v.is_undefined(); }},
        {"escaped", [](const TestCall& c) { return c.v.is_markup(); }},
        {"lower", test_case},
        {"upper", test_case},
        {"sameas", test_sameas},
        {"even", test_parity},
        {"odd", test_parity},
        {"divisibleby", test_divisibleby},
        {"eq", test_eq},
        {"equalto", test_eq},
        {"==", test_eq},
        {"ne", test_ne},
        {"!=", test_ne},
        {"lt", test_lt},
        {"lessthan", test_lt},
        {"<", test_lt},
        {"le", test_le},
        {"<=", test_le},
        {"gt", test_gt},
        {"greaterthan", test_gt},
        {">", test_gt},
        {"ge", test_ge},
        {">=", test_ge},
        {"in", [](const TestCall& c) { return value_in(c.v, c.one()); }},
        // `x is filter` / `x is test`: whether a filter or test of that name exists.
        {"filter", [](const TestCall& c) { return c.v.is_string() && is_filter_name(c.v.str()); }},
        {"test", [](const TestCall& c) { return c.v.is_string() && is_test_name(c.v.str()); }},
    };
    return kTests;
}

}  // namespace

bool Interpreter::apply_test(const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    const auto it = test_table().find(name);
    if (it == test_table().end()) throw TemplateError("no test named '" + name + "'");
    return it->second(TestCall{*this, name, v, args});
}

bool is_test_name(std::string_view name) {
    return test_table().count(name) > 0;
}

}  // namespace pagoda::jinja
