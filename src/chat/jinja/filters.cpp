// Jinja2's filters, a name -> function table (apply_filter); the `filter` test asks the same table.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <initializer_list>
#include <memory>
#include <string_view>
#include <unordered_map>

#include "chat/jinja/builtins.h"
#include "common/utf8.h"

namespace pagoda::jinja {

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

Value filter_indent(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
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

Value filter_round(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
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

Value filter_int(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
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

Value filter_float(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
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

Value filter_tojson(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
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

Value filter_sort(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
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

// The internal filter behind `x[a:b:c]` (not one a template can name).
Value filter_slice(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
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

Value filter_trim(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    auto b = bind(args, {"chars"}, name);
    return Value(strip(v.to_str(), b[0], true, true));
}

Value filter_length(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    bind(args, {}, name);
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

Value filter_safe(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    bind(args, {}, name);
    return Value(v.to_str(), true);
}

Value filter_string(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    bind(args, {}, name);
    return v.is_string() ? v : Value(v.to_str());
}

Value filter_escape(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    bind(args, {}, name);
    if (v.is_markup() && name != "forceescape") return v;
    return Value(html_escape(v.to_str()), true);
}

Value filter_items(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    bind(args, {}, name);
    if (v.is_undefined()) return Value::list({});
    if (!v.is_dict()) type_error("Can only get item pairs from a mapping.");
    ValueList out;
    for (const auto& [k, val] : v.dict().items)
        out.push_back(Value::list({k, val}, true));
    return Value::list(std::move(out));
}

Value filter_default(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    auto b = bind(args, {"default_value", "boolean"}, name);
    Value fallback = b[0] ? *b[0] : Value("");
    if (v.is_undefined() || (arg_bool(b[1], false) && !v.truthy())) return fallback;
    return v;
}

Value filter_upper(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    bind(args, {}, name);
    return Value(str_upper(v.to_str()));
}

Value filter_lower(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    bind(args, {}, name);
    return Value(str_lower(v.to_str()));
}

Value filter_capitalize(Interpreter& in, const std::string& name, const Value& v, CallArgs& args,
                        const ScopePtr& scope) {
    bind(args, {}, name);
    return Value(capitalize(v.to_str()));
}

Value filter_title(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    bind(args, {}, name);
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

Value filter_replace(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    auto b = bind(args, {"old", "new", "count"}, name);
    if (!b[0] || !b[1]) type_error("replace() missing arguments");
    return Value(replace(in, v.to_str(), b[0]->to_str(), b[1]->to_str(), arg_int(b[2], -1, "count")));
}

Value filter_join(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    auto b = bind(args, {"d", "attribute"}, name);
    std::string sep = b[0] ? b[0]->to_str() : "";
    std::string out;
    bool first = true;
    for (const auto& item : iterate(v)) {
        if (!first) out += sep;
        first = false;
        Value x = b[1] && !b[1]->is_none() ? get_path(in, item, *b[1]) : item;
        x.append_str(out);
        in.check_string_size(out.size());
    }
    return Value(std::move(out));
}

Value filter_list(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    bind(args, {}, name);
    return to_list(v);
}

Value filter_first(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    bind(args, {}, name);
    std::vector<Value> items = iterate(v);
    return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value filter_last(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    bind(args, {}, name);
    if (v.is_undefined()) raise_undefined(v);
    std::vector<Value> items = iterate(v);
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value filter_reverse(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    bind(args, {}, name);
    if (v.is_string()) {
        std::u32string u = decode(v.str());
        std::reverse(u.begin(), u.end());
        return Value(encode(u));
    }
    std::vector<Value> items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
}

Value filter_dictsort(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
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

Value filter_unique(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    auto b = bind(args, {"case_sensitive", "attribute"}, name);
    bool cs = arg_bool(b[0], false);
    ValueList out, seen;
    for (const auto& item : iterate(v)) {
        Value key = b[1] && !b[1]->is_none() ? get_path(in, item, *b[1]) : item;
        if (!cs) key = ignore_case(key);
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
        seen.push_back(key);
        out.push_back(item);
    }
    return Value::list(std::move(out));
}

Value filter_min(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    return min_max(in, v, args, false);
}

Value filter_max(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    return min_max(in, v, args, true);
}

Value filter_sum(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    auto b = bind(args, {"attribute", "start"}, name);
    Value total = b[1] ? *b[1] : Value(int64_t{0});
    for (const auto& item : iterate(v))
        total = sum_values(total, b[0] && !b[0]->is_none() ? get_path(in, item, *b[0]) : item);
    return total;
}

Value filter_abs(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    bind(args, {}, name);
    if (!v.is_number()) type_error(std::string("bad operand type for abs(): '") + v.type_name() + "'");
    if (v.is_float()) return Value(std::fabs(v.as_float()));
    if (v.as_int() == INT64_MIN) type_error("integer overflow");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
}

Value filter_center(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    auto b = bind(args, {"width"}, name);
    Value w = b[0] ? *b[0] : Value(int64_t{80});
    return Value(pad(in, v.to_str(), &w, nullptr, 0));
}

Value filter_wordcount(Interpreter& in, const std::string& name, const Value& v, CallArgs& args,
                       const ScopePtr& scope) {
    bind(args, {}, name);
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

Value filter_truncate(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
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

Value filter_map(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    ValueList out;
    std::vector<Value> items = iterate(v);
    if (!args.positional.empty()) {
        std::string filter = args.positional[0].to_str();
        CallArgs rest;
        rest.positional.assign(args.positional.begin() + 1, args.positional.end());
        rest.keyword = args.keyword;
        for (const auto& item : items) {
            CallArgs a = rest;
            out.push_back(in.apply_filter(filter, item, a, scope));
        }
    } else {
        auto b = bind(args, {"attribute", "default"}, name);
        if (!b[0]) type_error("map requires a filter name or attribute=");
        for (const auto& item : items) {
            Value x = get_path(in, item, *b[0]);
            if (x.is_undefined() && b[1]) x = *b[1];
            out.push_back(x);
        }
    }
    return Value::list(std::move(out));
}

Value filter_select(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    return Value::list(select_or_reject(in, v, args, false, true, scope));
}

Value filter_reject(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    return Value::list(select_or_reject(in, v, args, false, false, scope));
}

Value filter_selectattr(Interpreter& in, const std::string& name, const Value& v, CallArgs& args,
                        const ScopePtr& scope) {
    return Value::list(select_or_reject(in, v, args, true, true, scope));
}

Value filter_rejectattr(Interpreter& in, const std::string& name, const Value& v, CallArgs& args,
                        const ScopePtr& scope) {
    return Value::list(select_or_reject(in, v, args, true, false, scope));
}

Value filter_attr(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    auto b = bind(args, {"name"}, name);
    return in.get_attr(v, arg_str(b[0], ""));
}

Value filter_batch(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
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

Value filter_format(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
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
    return Value(python_percent_format(in, Value(v.to_str()), fmt_args));
}

Value filter_pprint(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    bind(args, {}, name);
    return Value(v.repr());
}

Value filter_striptags(Interpreter& in, const std::string& name, const Value& v, CallArgs& args,
                       const ScopePtr& scope) {
    bind(args, {}, name);
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

using FilterFn = Value (*)(Interpreter& in, const std::string& name, const Value& v, CallArgs& args,
                           const ScopePtr& scope);

const std::unordered_map<std::string_view, FilterFn>& filter_table() {
    static const std::unordered_map<std::string_view, FilterFn> kFilters = {
        {"trim", filter_trim},
        {"length", filter_length},
        {"count", filter_length},
        {"tojson", filter_tojson},
        {"safe", filter_safe},
        {"string", filter_string},
        {"escape", filter_escape},
        {"e", filter_escape},
        {"forceescape", filter_escape},
        {"items", filter_items},
        {"default", filter_default},
        {"d", filter_default},
        {"upper", filter_upper},
        {"lower", filter_lower},
        {"capitalize", filter_capitalize},
        {"title", filter_title},
        {"replace", filter_replace},
        {"join", filter_join},
        {"list", filter_list},
        {"first", filter_first},
        {"last", filter_last},
        {"reverse", filter_reverse},
        {"sort", filter_sort},
        {"dictsort", filter_dictsort},
        {"unique", filter_unique},
        {"min", filter_min},
        {"max", filter_max},
        {"sum", filter_sum},
        {"abs", filter_abs},
        {"round", filter_round},
        {"int", filter_int},
        {"float", filter_float},
        {"indent", filter_indent},
        {"center", filter_center},
        {"wordcount", filter_wordcount},
        {"truncate", filter_truncate},
        {"map", filter_map},
        {"select", filter_select},
        {"reject", filter_reject},
        {"selectattr", filter_selectattr},
        {"rejectattr", filter_rejectattr},
        {"attr", filter_attr},
        {"batch", filter_batch},
        {"format", filter_format},
        {"pprint", filter_pprint},
        {"striptags", filter_striptags},
    };
    return kFilters;
}

}  // namespace

Value Interpreter::apply_filter(const std::string& name, const Value& v, CallArgs& args, const ScopePtr& scope) {
    // The slice syntax x[a:b:c] calls the internal __slice__ with exactly three arguments; a template that names it
    // as a filter itself gets what any unknown filter gets (the fuzzer found `x|__slice__` read past its arguments).
    if (name == "__slice__" && args.positional.size() == 3 && args.keyword.empty())
        return filter_slice(*this, name, v, args, scope);
    const auto it = filter_table().find(name);
    if (it == filter_table().end()) throw TemplateError("no filter named '" + name + "'");
    return it->second(*this, name, v, args, scope);
}

bool is_filter_name(std::string_view name) {
    return filter_table().count(name) > 0;
}

}  // namespace pagoda::jinja
