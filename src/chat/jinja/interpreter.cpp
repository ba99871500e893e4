// Statement execution and expression evaluation. Python semantics where templates observe them: truthiness,
// int/float arithmetic, floor division and modulo, `and`/`or` returning operands, chained comparisons.
#include "chat/jinja/interpreter.h"

#include <cmath>
#include <limits>

#include "chat/jinja/lexer.h"
#include "chat/jinja/parser.h"
#include "common/json.h"
#include "common/utf8.h"

namespace pagoda::jinja {

[[noreturn]] void raise_undefined(const Value& undefined) {
    throw TemplateError(undefined.str().empty() ? "undefined value" : undefined.str());
}

std::vector<Value> iterate(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::kUndefined:
            return {};
        case Value::Kind::kList:
            return v.items();
        case Value::Kind::kDict: {
            std::vector<Value> keys;
            keys.reserve(v.dict().items.size());
            for (const auto& [k, _] : v.dict().items)
                keys.push_back(k);
            return keys;
        }
        case Value::Kind::kString: {
            std::vector<Value> chars;
            const std::string& s = v.str();
            size_t pos = 0;
            while (pos < s.size()) {
                size_t start = pos;
                utf8_decode(s, pos);
                chars.emplace_back(s.substr(start, pos - start));
            }
            return chars;
        }
        default:
            throw TemplateError(std::string("'") + v.type_name() + "' object is not iterable");
    }
}

bool value_in(const Value& item, const Value& container) {
    switch (container.kind()) {
        case Value::Kind::kString:
            if (!item.is_string())
                throw TemplateError(std::string("'in <string>' requires string as left operand, not ") +
                                    item.type_name());
            return container.str().find(item.str()) != std::string::npos;
        case Value::Kind::kList:
            for (const auto& x : container.items())
                if (x == item) return true;
            return false;
        case Value::Kind::kDict:
            return container.dict().find(item) != nullptr;
        case Value::Kind::kUndefined:
            return false;
        default:
            throw TemplateError(std::string("argument of type '") + container.type_name() + "' is not iterable");
    }
}

void Interpreter::check_string_size(size_t bytes) const {
    if (bytes > limits_.max_output_bytes)
        throw TemplateError("string longer than the limit of " + std::to_string(limits_.max_output_bytes) + " bytes");
}

void Interpreter::check_container_size(size_t items) const {
    if (items > limits_.max_container_items)
        throw TemplateError("list longer than the limit of " + std::to_string(limits_.max_container_items) + " items");
}

void Interpreter::count_step(int line) {
    if (++steps_ > limits_.max_steps)
        throw TemplateError(
            "template exceeded the limit of " + std::to_string(limits_.max_steps) + " loop iterations and macro calls",
            line);
}

void Interpreter::append_output(std::string& out, std::string_view text) {
    if (out.size() + text.size() > limits_.max_output_bytes)
        throw TemplateError("output larger than the limit of " + std::to_string(limits_.max_output_bytes) + " bytes");
    out += text;
}

std::string Interpreter::render(const Body& body, ScopePtr globals) {
    auto root = std::make_shared<Scope>(std::move(globals));
    std::string out;
    exec(body, root, out);
    return out;
}

Interpreter::Flow Interpreter::exec(const Body& body, const ScopePtr& scope, std::string& out) {
    FrameGuard frame(*this);
    for (const auto& sp : body) {
        const Stmt& s = *sp;
        line_ = s.line;
        switch (s.kind) {
            case Stmt::Kind::kOutput:
                append_output(out, s.text);
                break;
            case Stmt::Kind::kPrint: {
                Value v = eval(*s.expr, scope);
                line_ = s.line;
                if (v.is_string()) {
                    append_output(out, v.str());
                } else {
                    std::string text = v.to_str();
                    append_output(out, text);
                }
                break;
            }
            case Stmt::Kind::kIf: {
                bool taken = false;
                for (const auto& [cond, branch] : s.branches) {
                    if (eval(*cond, scope).truthy()) {
                        taken = true;
                        Flow f = exec(branch, scope, out);
                        if (f != Flow::kNormal) return f;
                        break;
                    }
                }
                if (!taken) {
                    Flow f = exec(s.else_body, scope, out);
                    if (f != Flow::kNormal) return f;
                }
                break;
            }
            case Stmt::Kind::kFor: {
                Flow f = exec_for(s, scope, out);
                if (f != Flow::kNormal) return f;
                break;
            }
            case Stmt::Kind::kSet:
                exec_set(s, scope, eval(*s.expr, scope));
                break;
            case Stmt::Kind::kSetBlock:
                exec_set(s, scope, render_filtered_body(s, scope));
                break;
            case Stmt::Kind::kMacro:
                scope->set(s.macro->name, define_macro(s.macro, scope));
                break;
            case Stmt::Kind::kFilterBlock:
                append_output(out, render_filtered_body(s, scope).to_str());
                break;
            case Stmt::Kind::kWith: {
                auto inner = std::make_shared<Scope>(scope);
                for (const auto& [name, expr] : s.with_targets)
                    inner->set(name, eval(*expr, scope));
                Flow f = exec(s.body, inner, out);
                if (f != Flow::kNormal) return f;
                break;
            }
            case Stmt::Kind::kInclude:
                eval(*s.expr, scope);
                throw TemplateError("no loader for this environment specified", s.line);
            case Stmt::Kind::kBreak:
                return Flow::kBreak;
            case Stmt::Kind::kContinue:
                return Flow::kContinue;
        }
    }
    return Flow::kNormal;
}

namespace {

// `{% set a, b = pair %}` and `{% for k, v in items %}`: one name takes the value, several unpack it.
void assign_targets(Scope& scope, const std::vector<std::string>& names, const Value& value, const char* what,
                    int line) {
    if (names.size() == 1) {
        scope.set(names[0], value);
        return;
    }
    std::vector<Value> parts = iterate(value);
    if (parts.size() != names.size())
        throw TemplateError("cannot unpack " + std::to_string(parts.size()) + " values into " +
                                std::to_string(names.size()) + " " + what,
                            line);
    for (size_t i = 0; i < parts.size(); ++i)
        scope.set(names[i], parts[i]);
}

}  // namespace

// The body of a set block or filter block, rendered in a scope of its own, then passed through the block's filter
// chain (parsed with a null innermost input, which the body text takes), if it has one.
Value Interpreter::render_filtered_body(const Stmt& s, const ScopePtr& scope) {
    std::string text;
    exec(s.body, std::make_shared<Scope>(scope), text);
    Value v(std::move(text));
    std::vector<const Expr*> chain;
    for (const Expr* f = s.filter.get(); f; f = f->children.empty() ? nullptr : f->children[0].get())
        chain.push_back(f);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        CallArgs args = eval_args(**it, scope);
        v = apply_filter((*it)->name, v, args, scope);
    }
    return v;
}

void Interpreter::exec_set(const Stmt& s, const ScopePtr& scope, const Value& value) {
    if (!s.attr.empty()) {
        const Value* target = scope->lookup(s.targets[0]);
        if (!target || !target->is_namespace())
            throw TemplateError("cannot assign attribute on non-namespace object", s.line);
        if (!s.attr.empty() && s.attr[0] == '_')
            throw TemplateError("cannot store underscore-prefixed attributes on a namespace", s.line);
        if (value.holds_namespace()) throw TemplateError("a namespace cannot hold another namespace", s.line);
        target->ns_attrs().set(Value(s.attr), value);
        return;
    }
    assign_targets(*scope, s.targets, value, "names", s.line);
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
    Value iterable = eval(*s.expr, scope);
    std::shared_ptr<const ValueList> items =
        iterable.is_list() ? iterable.shared_items() : std::make_shared<const ValueList>(iterate(iterable));
    auto bind = [&](Scope& target, const Value& item) {
        assign_targets(target, s.targets, item, "loop variables", s.line);
    };
    if (s.filter) {
        ValueList kept;
        for (const auto& item : *items) {
            count_step(s.line);
            auto probe = std::make_shared<Scope>(scope);
            bind(*probe, item);
            if (eval(*s.filter, probe).truthy()) kept.push_back(item);
        }
        items = std::make_shared<const ValueList>(std::move(kept));
    }
    if (items->empty()) {
        auto inner = std::make_shared<Scope>(scope);
        return exec(s.else_body, inner, out);
    }
    auto state = std::make_shared<LoopState>();
    state->items = items;
    Value loop = Value::loop(state);
    for (size_t i = 0; i < items->size(); ++i) {
        count_step(s.line);
        state->index = i;
        auto inner = std::make_shared<Scope>(scope);
        inner->vars.reserve(s.targets.size() + 1);
        bind(*inner, (*items)[i]);
        inner->set("loop", loop);
        Flow f = exec(s.body, inner, out);
        if (f == Flow::kBreak) break;
    }
    return Flow::kNormal;
}

Value Interpreter::define_macro(const std::shared_ptr<MacroDef>& macro, const ScopePtr& scope) {
    std::weak_ptr<Scope> closure = scope;  // weak: the scope holds the macro, a strong ref would be a cycle
    return Value::function(macro->name, [macro, closure](Interpreter& in, CallArgs& args) -> Value {
        int line = in.line_;
        if (in.macro_depth_ >= in.limits_.max_macro_depth)
            throw TemplateError(
                "macro calls nested deeper than the limit of " + std::to_string(in.limits_.max_macro_depth), line);
        in.count_step(line);
        ScopePtr parent = closure.lock();
        if (!parent) throw TemplateError("macro '" + macro->name + "' called outside its scope", line);
        auto local = std::make_shared<Scope>(parent);
        if (args.positional.size() > macro->params.size())
            throw TemplateError("macro '" + macro->name + "' takes not more than " +
                                    std::to_string(macro->params.size()) + " argument(s)",
                                line);
        for (const auto& [key, _] : args.keyword) {
            bool known = false;
            for (const auto& p : macro->params)
                known = known || p == key;
            if (!known)
                throw TemplateError("macro '" + macro->name + "' takes no keyword argument '" + key + "'", line);
        }
        for (size_t i = 0; i < macro->params.size(); ++i) {
            const std::string& p = macro->params[i];
            if (i < args.positional.size()) {
                local->set(p, args.positional[i]);
            } else if (const Value* kw = args.kw(p)) {
                local->set(p, *kw);
            } else if (macro->defaults[i]) {
                local->set(p, in.eval(*macro->defaults[i], local));
            } else {
                local->set(p, Value::undefined("parameter '" + p + "' was not provided"));
            }
        }
        ++in.macro_depth_;
        std::string out;
        try {
            in.exec(macro->body, local, out);
        } catch (...) {
            --in.macro_depth_;
            throw;
        }
        --in.macro_depth_;
        in.line_ = line;
        return Value(std::move(out));
    });
}

CallArgs Interpreter::eval_args(const Expr& e, const ScopePtr& scope) {
    CallArgs args;
    args.positional.reserve(e.args.size());
    for (const auto& a : e.args)
        args.positional.push_back(eval(*a, scope));
    for (const auto& [k, v] : e.kwargs)
        args.keyword.emplace_back(k, eval(*v, scope));
    return args;
}

Value Interpreter::call(const Value& callee, CallArgs& args, int line) {
    if (callee.is_undefined()) raise_undefined(callee);
    if (!callee.is_function())
        throw TemplateError(std::string("'") + callee.type_name() + "' object is not callable", line);
    return callee.function().fn(*this, args);
}

namespace {

int64_t checked_int(__int128 v) {
    if (v > std::numeric_limits<int64_t>::max() || v < std::numeric_limits<int64_t>::min())
        throw TemplateError("integer overflow");
    return static_cast<int64_t>(v);
}

double py_fmod(double a, double b) {
    double m = std::fmod(a, b);
    if (m != 0.0 && ((m < 0) != (b < 0))) m += b;
    return m;
}

}  // namespace

std::string python_percent_format(Interpreter& in, const Value& fmt, const Value& args);

Value Interpreter::eval_binary(const Expr& e, const ScopePtr& scope) {
    const std::string& op = e.name;
    if (op == "and") {
        Value l = eval(*e.children[0], scope);
        return l.truthy() ? eval(*e.children[1], scope) : l;
    }
    if (op == "or") {
        Value l = eval(*e.children[0], scope);
        return l.truthy() ? l : eval(*e.children[1], scope);
    }
    Value l = eval(*e.children[0], scope);
    Value r = eval(*e.children[1], scope);
    line_ = e.line;
    if (op == "~") {
        std::string s = l.to_str();
        std::string rs = r.to_str();
        check_string_size(s.size() + rs.size());
        return Value(s + rs);
    }
    if (l.is_undefined()) raise_undefined(l);
    if (r.is_undefined()) raise_undefined(r);
    auto type_error = [&]() -> TemplateError {
        return TemplateError(std::string("unsupported operand type(s) for ") + op + ": '" + l.type_name() + "' and '" +
                                 r.type_name() + "'",
                             e.line);
    };
    const bool numbers = l.is_number() && r.is_number();
    const bool floats = numbers && (l.is_float() || r.is_float());
    if (op == "+") {
        if (numbers)
            return floats ? Value(l.as_float() + r.as_float()) : Value(checked_int(__int128(l.as_int()) + r.as_int()));
        if (l.is_string() && r.is_string()) {
            check_string_size(l.str().size() + r.str().size());
            // Markup + str escapes the plain operand, as markupsafe does.
            if (l.is_markup() != r.is_markup()) {
                CallArgs none;
                Value le = l.is_markup() ? l : apply_filter("escape", l, none, scope);
                Value re = r.is_markup() ? r : apply_filter("escape", r, none, scope);
                return Value(le.str() + re.str(), true);
            }
            return Value(l.str() + r.str(), l.is_markup());
        }
        if (l.is_list() && r.is_list() && l.is_tuple() == r.is_tuple()) {
            check_container_size(l.items().size() + r.items().size());
            ValueList items = l.items();
            items.insert(items.end(), r.items().begin(), r.items().end());
            return Value::list(std::move(items), l.is_tuple());
        }
        throw type_error();
    }
    if (op == "-") {
        if (!numbers) throw type_error();
        return floats ? Value(l.as_float() - r.as_float()) : Value(checked_int(__int128(l.as_int()) - r.as_int()));
    }
    if (op == "*") {
        if (numbers)
            return floats ? Value(l.as_float() * r.as_float()) : Value(checked_int(__int128(l.as_int()) * r.as_int()));
        const Value* seq = l.is_number() ? &r : &l;
        const Value* count = l.is_number() ? &l : &r;
        if (count->is_float() || !count->is_number()) throw type_error();
        int64_t times = std::max<int64_t>(0, count->as_int());
        if (seq->is_string()) {
            check_string_size(static_cast<size_t>(checked_int(__int128(seq->str().size()) * times)));
            std::string out;
            for (int64_t i = 0; i < times; ++i)
                out += seq->str();
            return Value(std::move(out), seq->is_markup());
        }
        if (seq->is_list()) {
            check_container_size(static_cast<size_t>(checked_int(__int128(seq->items().size()) * times)));
            ValueList out;
            for (int64_t i = 0; i < times; ++i)
                out.insert(out.end(), seq->items().begin(), seq->items().end());
            return Value::list(std::move(out), seq->is_tuple());
        }
        throw type_error();
    }
    if (op == "/") {
        if (!numbers) throw type_error();
        if (r.as_float() == 0.0) throw TemplateError("division by zero", e.line);
        return Value(l.as_float() / r.as_float());
    }
    if (op == "//") {
        if (!numbers) throw type_error();
        if (r.as_float() == 0.0) throw TemplateError("integer division or modulo by zero", e.line);
        if (floats) return Value(std::floor(l.as_float() / r.as_float()));
        int64_t a = l.as_int(), b = r.as_int();
        if (a == std::numeric_limits<int64_t>::min() && b == -1) throw TemplateError("integer overflow", e.line);
        int64_t q = a / b;
        if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
        return Value(q);
    }
    if (op == "%") {
        if (l.is_string()) return Value(python_percent_format(*this, l, r));
        if (!numbers) throw type_error();
        if (r.as_float() == 0.0) throw TemplateError("integer division or modulo by zero", e.line);
        if (floats) return Value(py_fmod(l.as_float(), r.as_float()));
        int64_t a = l.as_int(), b = r.as_int();
        if (b == -1) return Value(int64_t{0});
        int64_t m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) m += b;
        return Value(m);
    }
    if (op == "**") {
        if (!numbers) throw type_error();
        if (!floats && r.as_int() >= 0) {
            __int128 result = 1, base = l.as_int();
            int64_t exp = r.as_int();
            while (exp > 0) {
                if (exp & 1) result = checked_int(result * base);
                exp >>= 1;
                if (exp) base = checked_int(base * base);
            }
            return Value(checked_int(result));
        }
        if (l.as_float() == 0.0 && r.as_float() < 0)
            throw TemplateError("0.0 cannot be raised to a negative power", e.line);
        return Value(std::pow(l.as_float(), r.as_float()));
    }
    throw TemplateError("unknown operator " + op, e.line);
}

Value Interpreter::eval_compare(const Expr& e, const ScopePtr& scope) {
    Value left = eval(*e.children[0], scope);
    for (size_t i = 0; i < e.ops.size(); ++i) {
        Value right = eval(*e.children[i + 1], scope);
        line_ = e.line;
        const std::string& op = e.ops[i];
        bool result;
        if (op == "==")
            result = left == right;
        else if (op == "!=")
            result = !(left == right);
        else if (op == "in")
            result = value_in(left, right);
        else if (op == "notin")
            result = !value_in(left, right);
        else {
            if (left.is_undefined()) raise_undefined(left);
            if (right.is_undefined()) raise_undefined(right);
            int c = compare_values(left, right);
            result = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
        }
        if (!result) return Value(false);
        left = std::move(right);
    }
    return Value(true);
}

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
    FrameGuard frame(*this);
    switch (e.kind) {
        case Expr::Kind::kLiteral:
            return e.value;
        case Expr::Kind::kName: {
            const Value* v = scope->lookup(e.name);
            return v ? *v : Value::undefined("'" + e.name + "' is undefined");
        }
        case Expr::Kind::kList:
        case Expr::Kind::kTuple: {
            ValueList items;
            items.reserve(e.children.size());
            for (const auto& c : e.children)
                items.push_back(eval(*c, scope));
            return Value::list(std::move(items), e.kind == Expr::Kind::kTuple);
        }
        case Expr::Kind::kDict: {
            ValueDict d;
            for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
                Value k = eval(*e.children[i], scope);
                if (k.is_list() && !k.is_tuple()) throw TemplateError("unhashable type: 'list'", e.line);
                if (k.is_dict()) throw TemplateError("unhashable type: 'dict'", e.line);
                d.set(std::move(k), eval(*e.children[i + 1], scope));
            }
            return Value::dict(std::move(d));
        }
        case Expr::Kind::kGetAttr: {
            Value obj = eval(*e.children[0], scope);
            line_ = e.line;
            return get_attr(obj, e.name);
        }
        case Expr::Kind::kGetItem: {
            Value obj = eval(*e.children[0], scope);
            Value key = eval(*e.children[1], scope);
            line_ = e.line;
            return get_item(obj, key);
        }
        case Expr::Kind::kSlice: {
            Value obj = eval(*e.children[0], scope);
            Value parts[3];
            for (int i = 0; i < 3; ++i)
                parts[i] = e.children[static_cast<size_t>(i) + 1] ? eval(*e.children[static_cast<size_t>(i) + 1], scope)
                                                                  : Value::none();
            line_ = e.line;
            ValueList slice_args{parts[0], parts[1], parts[2]};
            CallArgs args;
            args.positional = std::move(slice_args);
            return apply_filter("__slice__", obj, args, scope);
        }
        case Expr::Kind::kCall: {
            Value callee = eval(*e.children[0], scope);
            CallArgs args = eval_args(e, scope);
            line_ = e.line;
            return call(callee, args, e.line);
        }
        case Expr::Kind::kFilter: {
            Value input = e.children[0] ? eval(*e.children[0], scope) : Value::undefined();
            CallArgs args = eval_args(e, scope);
            line_ = e.line;
            return apply_filter(e.name, input, args, scope);
        }
        case Expr::Kind::kTest: {
            Value input = eval(*e.children[0], scope);
            CallArgs args = eval_args(e, scope);
            line_ = e.line;
            bool r = apply_test(e.name, input, args, scope);
            return Value(e.negated ? !r : r);
        }
        case Expr::Kind::kUnary: {
            Value v = eval(*e.children[0], scope);
            line_ = e.line;
            if (e.name == "not") return Value(!v.truthy());
            if (v.is_undefined()) raise_undefined(v);
            if (!v.is_number())
                throw TemplateError(std::string("bad operand type for unary ") + e.name + ": '" + v.type_name() + "'",
                                    e.line);
            if (e.name == "+") return v.is_bool() ? Value(v.as_int()) : v;
            if (v.is_float()) return Value(-v.as_float());
            return Value(checked_int(-__int128(v.as_int())));
        }
        case Expr::Kind::kBinary:
            return eval_binary(e, scope);
        case Expr::Kind::kCompare:
            return eval_compare(e, scope);
        case Expr::Kind::kCondition: {
            if (eval(*e.children[1], scope).truthy()) return eval(*e.children[0], scope);
            if (e.children[2]) return eval(*e.children[2], scope);
            return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
        }
    }
    return Value();
}

// ---- Template ----

struct Template::Impl {
    Body body;
    Limits limits;
};

Template::Template(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;
Template::~Template() = default;

Result<Template> Template::parse(std::string_view source, const Limits& limits) {
    auto impl = std::make_unique<Impl>();
    impl->limits = limits;
    try {
        std::vector<Token> tokens = tokenize(source, LexOptions{});
        impl->body = parse_template(tokens, limits.max_nesting_depth);
    } catch (const TemplateError& e) {
        return Status::error(std::string("template syntax error at ") + e.what());
    } catch (const std::exception& e) {
        return Status::error(std::string("template syntax error: ") + e.what());
    }
    return Template(std::move(impl));
}

Result<std::string> Template::render(const Json& context) const {
    if (!context.is_object() && !context.is_null()) return Status::error("template context must be a JSON object");
    Interpreter interpreter(impl_->limits);
    try {
        auto globals = std::make_shared<Scope>();
        Interpreter::install_globals(*globals);
        if (context.is_object())
            for (const auto& [k, v] : context.as_object())
                globals->set(k, Value::from_json(v));
        return interpreter.render(impl_->body, globals);
    } catch (const RaisedError& e) {
        return Status::error(e.what());
    } catch (const TemplateError& e) {
        int line = e.line ? e.line : interpreter.current_line();
        return Status::error("template error at line " + std::to_string(line) + ": " + e.what());
    } catch (const std::bad_alloc&) {
        return Status::error("template error at line " + std::to_string(interpreter.current_line()) +
                             ": out of memory");
    } catch (const std::exception& e) {
        return Status::error("template error at line " + std::to_string(interpreter.current_line()) + ": " + e.what());
    }
}

}  // namespace pagoda::jinja
