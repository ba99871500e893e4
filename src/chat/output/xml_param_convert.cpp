// Schema-driven conversion of qwen3_coder parameter text to JSON values, following vLLM's
// Qwen3CoderToolParser._convert_param_value (Python int()/float()/json.loads/ast.literal_eval).
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include "chat/output/tool_parser_impl.h"
#include "common/json.h"

namespace pagoda::chat {
namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return out;
}

std::string_view strip(std::string_view s) {
    auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
    while (!s.empty() && space(s.front()))
        s.remove_prefix(1);
    while (!s.empty() && space(s.back()))
        s.remove_suffix(1);
    return s;
}

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

// Digits with single underscores between them (PEP 515), underscores removed; false if malformed.
bool take_digits(std::string_view s, size_t& i, std::string& out) {
    const size_t start = i;
    while (i < s.size()) {
        if (is_digit(s[i])) {
            out.push_back(s[i++]);
        } else if (s[i] == '_' && i > start && is_digit(s[i - 1]) && i + 1 < s.size() && is_digit(s[i + 1])) {
            ++i;
        } else {
            break;
        }
    }
    return i > start;
}

// Python int(text): optional sign, decimal digits; false when Python would raise (or on int64 overflow).
bool parse_py_int(std::string_view text, int64_t& value) {
    const std::string_view s = strip(text);
    size_t i = 0;
    std::string digits;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) digits.push_back(s[i++]);
    if (!take_digits(s, i, digits) || i != s.size()) return false;
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(digits.c_str(), &end, 10);
    if (errno == ERANGE) return false;
    value = v;
    return true;
}

// Python float(text) for finite decimal literals; false for anything else (inf/nan included,
// which vLLM's int() check turns back into the string anyway).
bool parse_py_float(std::string_view text, double& value) {
    const std::string_view s = strip(text);
    size_t i = 0;
    std::string lit;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) lit.push_back(s[i++]);
    const bool int_part = take_digits(s, i, lit);
    bool frac_part = false;
    if (i < s.size() && s[i] == '.') {
        lit.push_back(s[i++]);
        frac_part = take_digits(s, i, lit);
    }
    if (!int_part && !frac_part) return false;
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        lit.push_back(s[i++]);
        if (i < s.size() && (s[i] == '+' || s[i] == '-')) lit.push_back(s[i++]);
        if (!take_digits(s, i, lit)) return false;
    }
    if (i != s.size()) return false;
    value = std::strtod(lit.c_str(), nullptr);
    return std::isfinite(value);
}

bool has_json_only_literals(const Json& v) {
    switch (v.type()) {
        case Json::Type::kNull:
        case Json::Type::kBool:
            return true;
        case Json::Type::kFloat:
            return !std::isfinite(v.as_double());
        case Json::Type::kArray:
            for (const Json& item : v.as_array()) {
                if (has_json_only_literals(item)) return true;
            }
            return false;
        case Json::Type::kObject:
            for (const auto& member : v.as_object()) {
                if (has_json_only_literals(member.second)) return true;
            }
            return false;
        default:
            return false;
    }
}

// ast.literal_eval for the literals a model writes: Python's True/False/None and the JSON subset
// Python shares (numbers, double-quoted strings, lists, dicts). JSON's true/false/null/NaN are not
// Python literals, so they fail as they do in Python. Single quotes and tuples are not handled.
bool literal_eval(std::string_view text, Json& out) {
    const std::string_view s = strip(text);
    if (s == "True" || s == "False") {
        out = Json(s == "True");
        return true;
    }
    if (s == "None") {
        out = Json();
        return true;
    }
    auto parsed = Json::parse(s, 64);
    if (!parsed.ok() || has_json_only_literals(*parsed)) return false;
    out = std::move(parsed).value();
    return true;
}

bool starts_with(std::string_view s, std::string_view p) {
    return s.substr(0, p.size()) == p;
}

// The schema's `properties` for `function`, or nullptr (vLLM: _get_arguments_config).
const Json* parameter_config(const Json* tools, std::string_view function) {
    if (tools == nullptr || !tools->is_array()) return nullptr;
    for (const Json& tool : tools->as_array()) {
        const Json* type = tool.find("type");
        const Json* fn = tool.find("function");
        if (type == nullptr || !type->is_string() || type->as_string() != "function" || fn == nullptr) continue;
        const Json* name = fn->find("name");
        if (name == nullptr || !name->is_string() || name->as_string() != function) continue;
        const Json* params = fn->find("parameters");
        if (params == nullptr || !params->is_object()) return nullptr;
        const Json* props = params->find("properties");
        return props != nullptr ? props : params;
    }
    return nullptr;
}

// Python's str() of a JSON schema "type" that is not a string (e.g. ["integer", "null"]) never
// matches a known type name, so it ends in the literal_eval branch; "" stands for that here.
std::string schema_type(const Json& prop) {
    const Json* type = prop.is_object() ? prop.find("type") : nullptr;
    if (type == nullptr) return "string";
    if (!type->is_string()) return "";
    return lower(strip(type->as_string()));
}

}  // namespace

Json convert_xml_parameter(const Json* tools, std::string_view function, std::string_view param,
                           std::string_view value) {
    if (lower(value) == "null") return Json();
    const Json* config = parameter_config(tools, function);
    const Json* prop = config != nullptr && config->is_object() ? config->find(param) : nullptr;
    if (prop == nullptr) return Json(value);
    const std::string type = schema_type(*prop);
    if (type == "string" || type == "str" || type == "text" || type == "varchar" || type == "char" || type == "enum") {
        return Json(value);
    }
    if (starts_with(type, "int") || starts_with(type, "uint") || starts_with(type, "long") ||
        starts_with(type, "short") || starts_with(type, "unsigned")) {
        int64_t v = 0;
        return parse_py_int(value, v) ? Json(v) : Json(value);
    }
    if (starts_with(type, "num") || starts_with(type, "float")) {
        double v = 0;
        if (!parse_py_float(value, v)) return Json(value);
        // vLLM turns integral floats into ints (3.0 -> 3).
        if (v == std::floor(v) && std::fabs(v) < 9.2e18) return Json(static_cast<int64_t>(v));
        return Json(v);
    }
    if (type == "boolean" || type == "bool" || type == "binary") return Json(lower(value) == "true");
    if (type == "object" || type == "array" || type == "arr" || starts_with(type, "dict") ||
        starts_with(type, "list")) {
        auto parsed = Json::parse(value, 128);
        if (parsed.ok()) return std::move(parsed).value();
    }
    Json literal;
    if (literal_eval(value, literal)) return literal;
    return Json(value);
}

}  // namespace pagoda::chat
