// Built-ins shared by every file of them: argument binding; and the globals transformers provides to templates
// (raise_exception, strftime_now, range, namespace, dict).
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
