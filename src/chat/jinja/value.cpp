// Value model: construction from JSON, Python truthiness, str()/repr(), ordering and json.dumps.
#include "chat/jinja/value.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "common/json.h"
#include "common/utf8.h"

namespace pagoda::jinja {

const Value* ValueDict::find(const Value& key) const {
    for (const auto& [k, v] : items)
        if (k == key) return &v;
    return nullptr;
}

const Value* ValueDict::find(std::string_view key) const {
    for (const auto& [k, v] : items)
        if (k.is_string() && k.str() == key) return &v;
    return nullptr;
}

void ValueDict::set(Value key, Value value) {
    for (auto& [k, v] : items) {
        if (k == key) {
            v = std::move(value);
            return;
        }
    }
    items.emplace_back(std::move(key), std::move(value));
}

const Value* CallArgs::kw(std::string_view name) const {
    for (const auto& [k, v] : keyword)
        if (k == name) return &v;
    return nullptr;
}

Value Value::undefined(std::string hint) {
    Value v;
    v.s_ = std::move(hint);
    return v;
}
Value Value::none() {
    Value v;
    v.kind_ = Kind::kNone;
    return v;
}
Value::Value(bool b) : kind_(Kind::kBool), b_(b) {}
Value::Value(int64_t v) : kind_(Kind::kInt), i_(v) {}
Value::Value(double d) : kind_(Kind::kFloat), f_(d) {}
Value::Value(std::string s, bool markup) : kind_(Kind::kString), flag_(markup), s_(std::move(s)) {}

namespace {
void absorb(int& depth, bool& has_ns, const Value& child) {
    depth = std::max(depth, child.depth() + 1);
    has_ns = has_ns || child.holds_namespace();
}
void check_depth(int depth) {
    if (depth > Value::kMaxDepth)
        throw TemplateError("value nested deeper than the limit of " + std::to_string(Value::kMaxDepth));
}
}  // namespace

Value Value::list(ValueList items, bool tuple) {
    Value v;
    v.kind_ = Kind::kList;
    v.flag_ = tuple;
    int depth = 1;
    for (const auto& item : items)
        absorb(depth, v.has_ns_, item);
    check_depth(depth);
    v.depth_ = static_cast<uint16_t>(depth);
    v.obj_ = std::make_shared<ValueList>(std::move(items));
    return v;
}
Value Value::dict(ValueDict d) {
    Value v;
    v.kind_ = Kind::kDict;
    int depth = 1;
    for (const auto& [k, item] : d.items) {
        absorb(depth, v.has_ns_, k);
        absorb(depth, v.has_ns_, item);
    }
    check_depth(depth);
    v.depth_ = static_cast<uint16_t>(depth);
    v.obj_ = std::make_shared<ValueDict>(std::move(d));
    return v;
}
Value Value::ns(ValueDict d) {
    for (const auto& [k, item] : d.items)
        if (item.holds_namespace()) throw TemplateError("a namespace cannot hold another namespace");
    Value v = dict(std::move(d));
    v.kind_ = Kind::kNamespace;
    v.has_ns_ = true;
    v.depth_ = 1;
    return v;
}
Value Value::function(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn, const Value* bound_self) {
    Value v;
    v.kind_ = Kind::kFunction;
    int depth = 1;
    if (bound_self) absorb(depth, v.has_ns_, *bound_self);
    check_depth(depth);
    v.depth_ = static_cast<uint16_t>(depth);
    v.obj_ = std::make_shared<Function>(Function{std::move(name), std::move(fn)});
    return v;
}

Value Value::from_json(const Json& json) {
    switch (json.type()) {
        case Json::Type::kNull:
            return none();
        case Json::Type::kBool:
            return Value(json.as_bool());
        case Json::Type::kInt:
            return Value(json.as_int());
        case Json::Type::kFloat:
            return Value(json.as_double());
        case Json::Type::kString:
            return Value(json.as_string());
        case Json::Type::kArray: {
            ValueList items;
            items.reserve(json.size());
            for (const auto& item : json.as_array())
                items.push_back(from_json(item));
            return list(std::move(items));
        }
        case Json::Type::kObject: {
            ValueDict d;
            d.items.reserve(json.size());
            // A repeated key keeps its first position and its last value, as a Python dict built from JSON does.
            for (const auto& [k, item] : json.as_object())
                d.set(Value(k), from_json(item));
            return dict(std::move(d));
        }
    }
    return none();
}

Value Value::loop(std::shared_ptr<LoopState> state) {
    Value v;
    v.kind_ = Kind::kLoop;
    v.depth_ = 1;
    v.obj_ = std::move(state);
    return v;
}

const void* Value::identity() const {
    return obj_.get();
}

bool Value::truthy() const {
    switch (kind_) {
        case Kind::kUndefined:
        case Kind::kNone:
            return false;
        case Kind::kBool:
            return b_;
        case Kind::kInt:
            return i_ != 0;
        case Kind::kFloat:
            return f_ != 0.0;
        case Kind::kString:
            return !s_.empty();
        case Kind::kList:
            return !items().empty();
        case Kind::kDict:
            return !dict().items.empty();
        case Kind::kLoop:
        case Kind::kNamespace:
        case Kind::kFunction:
            return true;
    }
    return false;
}

const char* Value::type_name() const {
    switch (kind_) {
        case Kind::kUndefined:
            return "Undefined";
        case Kind::kNone:
            return "NoneType";
        case Kind::kBool:
            return "bool";
        case Kind::kInt:
            return "int";
        case Kind::kFloat:
            return "float";
        case Kind::kString:
            return "str";
        case Kind::kList:
            return flag_ ? "tuple" : "list";
        case Kind::kDict:
            return "dict";
        case Kind::kNamespace:
            return "Namespace";
        case Kind::kFunction:
            return "function";
        case Kind::kLoop:
            return "LoopContext";
    }
    return "object";
}

std::string python_float_repr(double d) {
    std::string out;
    append_python_float(out, d);
    return out;
}

bool python_is_space(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

namespace {

// Python's str.isprintable() for a code point above ASCII: not in categories Cc, Cf, Cs, Co, Cn, Zl, Zp, Zs.
bool is_printable_non_ascii(char32_t c) {
    switch (u_charType(static_cast<UChar32>(c))) {
        case U_CONTROL_CHAR:
        case U_FORMAT_CHAR:
        case U_SURROGATE:
        case U_PRIVATE_USE_CHAR:
        case U_UNASSIGNED:
        case U_LINE_SEPARATOR:
        case U_PARAGRAPH_SEPARATOR:
        case U_SPACE_SEPARATOR:
            return false;
        default:
            return true;
    }
}

void append_hex(std::string& out, const char* prefix, unsigned v, int width) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "%s%0*x", prefix, width, v);
    out += buf;
}

void append_string_repr(std::string& out, const std::string& s) {
    char quote = '\'';
    if (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) quote = '"';
    out += quote;
    size_t pos = 0;
    while (pos < s.size()) {
        size_t start = pos;
        char32_t c = utf8_decode(s, pos);
        if (c == static_cast<char32_t>(quote) || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7F) {
            append_hex(out, "\\x", c, 2);
        } else if (c < 0x80) {
            out += static_cast<char>(c);
        } else if (is_printable_non_ascii(c)) {
            out.append(s, start, pos - start);
        } else if (c < 0x100) {
            append_hex(out, "\\x", c, 2);
        } else if (c < 0x10000) {
            append_hex(out, "\\u", c, 4);
        } else {
            append_hex(out, "\\U", c, 8);
        }
    }
    out += quote;
}

}  // namespace

void Value::append_repr(std::string& out) const {
    switch (kind_) {
        case Kind::kString:
            append_string_repr(out, s_);
            return;
        case Kind::kList: {
            out += flag_ ? '(' : '[';
            const ValueList& list = items();
            for (size_t i = 0; i < list.size(); ++i) {
                if (i) out += ", ";
                list[i].append_repr(out);
            }
            if (flag_ && list.size() == 1) out += ',';
            out += flag_ ? ')' : ']';
            return;
        }
        case Kind::kDict: {
            out += '{';
            bool first = true;
            for (const auto& [k, v] : dict().items) {
                if (!first) out += ", ";
                first = false;
                k.append_repr(out);
                out += ": ";
                v.append_repr(out);
            }
            out += '}';
            return;
        }
        case Kind::kNamespace: {
            out += "<Namespace ";
            Value::dict(dict()).append_repr(out);
            out += '>';
            return;
        }
        case Kind::kLoop: {
            const LoopState& st = loop_state();
            out += "<LoopContext " + std::to_string(st.index + 1) + "/" + std::to_string(st.items->size()) + ">";
            return;
        }
        default:
            append_str(out);
    }
}

void Value::append_str(std::string& out) const {
    switch (kind_) {
        case Kind::kUndefined:
            return;
        case Kind::kNone:
            out += "None";
            return;
        case Kind::kBool:
            out += b_ ? "True" : "False";
            return;
        case Kind::kInt:
            out += std::to_string(i_);
            return;
        case Kind::kFloat:
            out += python_float_repr(f_);
            return;
        case Kind::kString:
            out += s_;
            return;
        case Kind::kFunction:
            out += "<function " + function().name + ">";
            return;
        default:
            append_repr(out);
    }
}

std::string Value::to_str() const {
    std::string out;
    append_str(out);
    return out;
}
std::string Value::repr() const {
    std::string out;
    append_repr(out);
    return out;
}

bool operator==(const Value& a, const Value& b) {
    using K = Value::Kind;
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
        return a.as_int() == b.as_int();
    }
    if (a.kind_ != b.kind_) return false;
    switch (a.kind_) {
        case K::kUndefined:
        case K::kNone:
            return true;
        case K::kString:
            return a.s_ == b.s_;
        case K::kList:
            if (a.flag_ != b.flag_) return false;
            return a.items() == b.items();
        case K::kDict: {
            if (a.dict().items.size() != b.dict().items.size()) return false;
            for (const auto& [k, v] : a.dict().items) {
                const Value* other = b.dict().find(k);
                if (!other || !(*other == v)) return false;
            }
            return true;
        }
        case K::kNamespace:
        case K::kLoop:
        case K::kFunction:
            return a.identity() == b.identity();
        default:
            return false;
    }
}

int compare_values(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) {
            double x = a.as_float(), y = b.as_float();
            return x < y ? -1 : (x > y ? 1 : 0);
        }
        int64_t x = a.as_int(), y = b.as_int();
        return x < y ? -1 : (x > y ? 1 : 0);
    }
    if (a.is_string() && b.is_string()) {
        int c = a.str().compare(b.str());  // UTF-8 byte order is code point order
        return c < 0 ? -1 : (c > 0 ? 1 : 0);
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
        const auto& x = a.items();
        const auto& y = b.items();
        for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (x[i] == y[i]) continue;
            return compare_values(x[i], y[i]);
        }
        return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
    }
    throw TemplateError(std::string("'<' not supported between instances of '") + a.type_name() + "' and '" +
                        b.type_name() + "'");
}

namespace {

std::string json_key(const Value& k) {
    if (k.is_string()) return k.str();
    if (k.is_bool()) return k.as_bool() ? "true" : "false";
    if (k.is_none()) return "null";
    if (k.is_int()) return std::to_string(k.as_int());
    if (k.is_float()) return python_float_repr(k.as_float());
    throw TemplateError(std::string("keys must be str, int, float, bool or None, not ") + k.type_name());
}

void dump_value(std::string& out, const Value& v, const JsonDumpOptions& o, int level) {
    auto newline = [&](int lvl) {
        out += '\n';
        for (int i = 0; i < lvl; ++i)
            out += o.indent;
    };
    if (level > 512) throw TemplateError("tojson: value nested too deeply");
    switch (v.kind()) {
        case Value::Kind::kNone:
            out += "null";
            return;
        case Value::Kind::kBool:
            out += v.as_bool() ? "true" : "false";
            return;
        case Value::Kind::kInt:
            out += std::to_string(v.as_int());
            return;
        case Value::Kind::kFloat: {
            double d = v.as_float();
            if (std::isnan(d))
                out += "NaN";
            else if (std::isinf(d))
                out += d < 0 ? "-Infinity" : "Infinity";
            else
                out += python_float_repr(d);
            return;
        }
        case Value::Kind::kString:
            json_escape_to(out, v.str(), o.ensure_ascii);
            return;
        case Value::Kind::kList: {
            const auto& items = v.items();
            if (items.empty()) {
                out += "[]";
                return;
            }
            out += '[';
            for (size_t i = 0; i < items.size(); ++i) {
                if (i) out += o.item_separator;
                if (o.pretty) newline(level + 1);
                dump_value(out, items[i], o, level + 1);
            }
            if (o.pretty) newline(level);
            out += ']';
            return;
        }
        case Value::Kind::kDict: {
            const auto& items = v.dict().items;
            if (items.empty()) {
                out += "{}";
                return;
            }
            std::vector<std::pair<std::string, const Value*>> members;
            members.reserve(items.size());
            for (const auto& [k, val] : items)
                members.emplace_back(json_key(k), &val);
            if (o.sort_keys)
                std::stable_sort(members.begin(), members.end(),
                                 [](const auto& a, const auto& b) { return a.first < b.first; });
            out += '{';
            for (size_t i = 0; i < members.size(); ++i) {
                if (i) out += o.item_separator;
                if (o.pretty) newline(level + 1);
                json_escape_to(out, members[i].first, o.ensure_ascii);
                out += o.key_separator;
                dump_value(out, *members[i].second, o, level + 1);
            }
            if (o.pretty) newline(level);
            out += '}';
            return;
        }
        default:
            throw TemplateError(std::string("Object of type ") + v.type_name() + " is not JSON serializable");
    }
}

}  // namespace

std::string json_dumps(const Value& v, const JsonDumpOptions& options) {
    std::string out;
    dump_value(out, v, options, 0);
    return out;
}

}  // namespace pagoda::jinja
