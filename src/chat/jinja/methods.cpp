// Attribute and item lookup as Jinja2's sandboxed environment does it (loop attributes, dict keys before methods),
// and the str, dict and list methods templates call, each a name -> function table.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <initializer_list>
#include <memory>

#include "chat/jinja/builtins.h"
#include "common/utf8.h"

namespace pagoda::jinja {

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

}  // namespace pagoda::jinja
