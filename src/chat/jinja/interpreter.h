// Tree-walking interpreter over the Jinja AST, with Jinja2's scoping (a for-loop iteration, macro call, with or
// set-block body gets its own scope; if does not) and hard limits on work, depth and output size.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/template.h"
#include "common/utf8.h"  // utf8_length, for the built-ins

namespace pagoda::jinja {

// Scopes hold a handful of names each, so a vector beats a hash map (and a loop iteration makes one).
struct Scope {
    explicit Scope(std::shared_ptr<Scope> parent_ = nullptr) : parent(std::move(parent_)) {}
    const Value* lookup(std::string_view name) const {
        for (const Scope* s = this; s; s = s->parent.get())
            for (const auto& [k, v] : s->vars)
                if (k == name) return &v;
        return nullptr;
    }
    void set(std::string_view name, Value value) {
        for (auto& [k, v] : vars)
            if (k == name) {
                v = std::move(value);
                return;
            }
        vars.emplace_back(std::string(name), std::move(value));
    }
    std::vector<std::pair<std::string, Value>> vars;
    std::shared_ptr<Scope> parent;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
  public:
    explicit Interpreter(const Limits& limits) : limits_(limits) {}

    std::string render(const Body& body, ScopePtr globals);

    Value eval(const Expr& e, const ScopePtr& scope);
    Value call(const Value& callee, CallArgs& args, int line);

    // Limits, shared with the built-ins.
    void check_string_size(size_t bytes) const;
    void check_container_size(size_t items) const;
    void count_step(int line);
    const Limits& limits() const { return limits_; }
    int current_line() const { return line_; }

    // Built-ins (builtins.cpp).
    Value apply_filter(const std::string& name, const Value& input, CallArgs& args, const ScopePtr& scope);
    bool apply_test(const std::string& name, const Value& input, CallArgs& args, const ScopePtr& scope);
    Value get_attr(const Value& obj, const std::string& name);
    Value get_item(const Value& obj, const Value& key);
    static void install_globals(Scope& globals);

  private:
    enum class Flow { kNormal, kBreak, kContinue };
    Flow exec(const Body& body, const ScopePtr& scope, std::string& out);
    Flow exec_for(const Stmt& s, const ScopePtr& scope, std::string& out);
    void exec_set(const Stmt& s, const ScopePtr& scope, const Value& value);
    Value render_filtered_body(const Stmt& s, const ScopePtr& scope);
    Value define_macro(const std::shared_ptr<MacroDef>& macro, const ScopePtr& scope);
    Value eval_binary(const Expr& e, const ScopePtr& scope);
    Value eval_compare(const Expr& e, const ScopePtr& scope);
    void append_output(std::string& out, std::string_view text);
    CallArgs eval_args(const Expr& e, const ScopePtr& scope);

    // Every exec/eval frame counts: together with the parser's limits this keeps the C++ stack bounded whatever
    // mix of statement nesting, expression depth and macro recursion a template uses.
    struct FrameGuard {
        explicit FrameGuard(Interpreter& in) : in_(in) {
            if (++in_.frames_ > kMaxFrames) {
                --in_.frames_;
                throw TemplateError("template recursion too deep");
            }
        }
        ~FrameGuard() { --in_.frames_; }
        Interpreter& in_;
    };
    static constexpr int kMaxFrames = 1000;
    int frames_ = 0;

    Limits limits_;
    int64_t steps_ = 0;
    int macro_depth_ = 0;
    int line_ = 0;
};

// Python-style helpers shared by the interpreter and the built-ins.
std::vector<Value> iterate(const Value& v);  // for-loop iteration; TypeError when not iterable
bool value_in(const Value& item, const Value& container);
[[noreturn]] void raise_undefined(const Value& undefined);

}  // namespace pagoda::jinja
