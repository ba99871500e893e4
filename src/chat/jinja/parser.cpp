// Recursive-descent parser with Jinja2's precedence: condexpr < or < and < not < compare < +,- < ~ < *,/,//,% < **
// < unary -,+ < primary with postfix ([], ., call) and then filters / tests.
#include "chat/jinja/parser.h"

#include <initializer_list>

namespace pagoda::jinja {
namespace {

class Parser {
  public:
    Parser(const std::vector<Token>& tokens, int max_depth) : tokens_(tokens), max_depth_(max_depth) {}

    Body parse() {
        Body body = subparse({});
        if (cur().type != TokenType::kEof) fail(cur(), "unexpected tag");
        return body;
    }

  private:
    struct DepthGuard {
        DepthGuard(Parser& p, const Token& t) : parser(p) {
            if (++parser.depth_ > parser.max_depth_) parser.fail(t, "template nested too deeply");
        }
        ~DepthGuard() { --parser.depth_; }
        Parser& parser;
    };

    const Token& cur() const { return tokens_[pos_]; }
    const Token& peek(size_t k = 1) const { return tokens_[std::min(pos_ + k, tokens_.size() - 1)]; }
    const Token& next() {
        const Token& t = tokens_[pos_];
        if (pos_ + 1 < tokens_.size()) ++pos_;
        return t;
    }

    [[noreturn]] void fail(const Token& t, const std::string& message) const {
        throw TemplateError(std::to_string(t.line) + ":" + std::to_string(t.column) + ": " + message, t.line);
    }

    static std::string describe(const Token& t) {
        switch (t.type) {
            case TokenType::kData:
                return "template data";
            case TokenType::kVarBegin:
                return "'{{'";
            case TokenType::kVarEnd:
                return "'}}'";
            case TokenType::kBlockBegin:
                return "'{%'";
            case TokenType::kBlockEnd:
                return "'%}'";
            case TokenType::kName:
                return "'" + t.text + "'";
            case TokenType::kString:
                return "string literal";
            case TokenType::kInt:
            case TokenType::kFloat:
                return "number " + t.text;
            case TokenType::kOp:
                return "'" + t.text + "'";
            case TokenType::kEof:
                return "end of template";
        }
        return "token";
    }

    bool is_op(const char* op) const { return cur().type == TokenType::kOp && cur().text == op; }
    bool is_name(const char* name) const { return cur().type == TokenType::kName && cur().text == name; }
    bool skip_op(const char* op) {
        if (!is_op(op)) return false;
        next();
        return true;
    }
    bool skip_name(const char* name) {
        if (!is_name(name)) return false;
        next();
        return true;
    }
    void expect_op(const char* op) {
        if (!skip_op(op)) fail(cur(), std::string("expected '") + op + "', got " + describe(cur()));
    }
    std::string expect_name() {
        if (cur().type != TokenType::kName) fail(cur(), "expected a name, got " + describe(cur()));
        return next().text;
    }
    void expect_block_end() {
        if (cur().type != TokenType::kBlockEnd) fail(cur(), "expected end of statement block, got " + describe(cur()));
        next();
    }

    // Records the subtree height; left-deep chains (a+a+a..., x|f|f..., a.b.c...) are built by loops, not
    // recursion, so the parser's depth guard alone would not bound them.
    ExprPtr finish(ExprPtr e) {
        int d = 0;
        for (const auto& c : e->children)
            if (c) d = std::max(d, c->depth);
        for (const auto& a : e->args)
            d = std::max(d, a->depth);
        for (const auto& [k, a] : e->kwargs)
            d = std::max(d, a->depth);
        e->depth = d + 1;
        if (e->depth > max_depth_ * 4) fail(cur(), "expression nested too deeply");
        return e;
    }

    ExprPtr node(Expr::Kind kind, const Token& t) {
        auto e = std::make_unique<Expr>();
        e->kind = kind;
        e->line = t.line;
        return e;
    }

    // ---- statements ----

    // Parses until `{% <one of end_names> ...`, leaving the stream at that name.
    Body subparse(std::initializer_list<const char*> end_names) {
        DepthGuard guard(*this, cur());
        Body body;
        while (true) {
            const Token& t = cur();
            if (t.type == TokenType::kEof) {
                if (end_names.size() == 0) return body;
                std::string expected;
                for (const char* n : end_names)
                    expected += (expected.empty() ? "'" : " or '") + std::string(n) + "'";
                fail(t, "unexpected end of template, expected " + expected);
            }
            if (t.type == TokenType::kData) {
                auto s = std::make_unique<Stmt>();
                s->kind = Stmt::Kind::kOutput;
                s->line = t.line;
                s->text = t.text;
                body.push_back(std::move(s));
                next();
            } else if (t.type == TokenType::kVarBegin) {
                next();
                auto s = std::make_unique<Stmt>();
                s->kind = Stmt::Kind::kPrint;
                s->line = t.line;
                s->expr = parse_tuple(true, {});
                if (cur().type != TokenType::kVarEnd)
                    fail(cur(), "expected end of print statement, got " + describe(cur()));
                next();
                body.push_back(std::move(s));
            } else if (t.type == TokenType::kBlockBegin) {
                const Token& name = peek();
                if (name.type == TokenType::kName)
                    for (const char* end : end_names)
                        if (name.text == end) {
                            next();  // leave the stream at the end name
                            return body;
                        }
                next();
                body.push_back(parse_statement());
            } else {
                fail(t, "unexpected " + describe(t));
            }
        }
    }

    // Consumes `name %}` of an end tag.
    void end_tag(const char* name) {
        if (!skip_name(name)) fail(cur(), std::string("expected '") + name + "'");
        expect_block_end();
    }

    StmtPtr parse_statement() {
        const Token& t = cur();
        if (t.type != TokenType::kName) fail(t, "tag name expected");
        auto s = std::make_unique<Stmt>();
        s->line = t.line;
        const std::string word = t.text;
        next();
        if (word == "if") {
            s->kind = Stmt::Kind::kIf;
            ExprPtr cond = parse_tuple(false, {});
            expect_block_end();
            while (true) {
                Body body = subparse({"elif", "else", "endif"});
                s->branches.emplace_back(std::move(cond), std::move(body));
                if (skip_name("elif")) {
                    cond = parse_tuple(false, {});
                    expect_block_end();
                    continue;
                }
                if (skip_name("else")) {
                    expect_block_end();
                    s->else_body = subparse({"endif"});
                }
                end_tag("endif");
                break;
            }
        } else if (word == "for") {
            s->kind = Stmt::Kind::kFor;
            s->targets = parse_assign_names();
            if (!skip_name("in")) fail(cur(), "expected 'in', got " + describe(cur()));
            s->expr = parse_tuple(false, {"recursive"});
            if (skip_name("if")) s->filter = parse_expression(true);
            if (is_name("recursive")) fail(cur(), "recursive loops are not supported");
            expect_block_end();
            ++loop_depth_;
            s->body = subparse({"endfor", "else"});
            --loop_depth_;
            if (skip_name("else")) {
                expect_block_end();
                s->else_body = subparse({"endfor"});
            }
            end_tag("endfor");
        } else if (word == "set") {
            if (cur().type == TokenType::kName && peek().type == TokenType::kOp && peek().text == "." &&
                peek(2).type == TokenType::kName) {
                s->targets.push_back(next().text);
                next();
                s->attr = next().text;
            } else {
                s->targets = parse_assign_names();
            }
            if (skip_op("=")) {
                s->kind = Stmt::Kind::kSet;
                s->expr = parse_tuple(true, {});
                expect_block_end();
            } else {
                if (!s->attr.empty() || s->targets.size() != 1) fail(cur(), "expected '='");
                s->kind = Stmt::Kind::kSetBlock;
                if (is_op("|")) s->filter = parse_filter(nullptr, false);
                expect_block_end();
                s->body = subparse({"endset"});
                end_tag("endset");
            }
        } else if (word == "macro") {
            s->kind = Stmt::Kind::kMacro;
            auto m = std::make_shared<MacroDef>();
            m->line = t.line;
            m->name = expect_name();
            expect_op("(");
            while (!is_op(")")) {
                if (!m->params.empty()) expect_op(",");
                if (is_op(")")) break;
                m->params.push_back(expect_name());
                if (skip_op("="))
                    m->defaults.push_back(parse_expression(true));
                else
                    m->defaults.push_back(nullptr);
            }
            expect_op(")");
            expect_block_end();
            int saved = loop_depth_;
            loop_depth_ = 0;
            m->body = subparse({"endmacro"});
            loop_depth_ = saved;
            end_tag("endmacro");
            s->macro = std::move(m);
        } else if (word == "filter") {
            s->kind = Stmt::Kind::kFilterBlock;
            s->filter = parse_filter(nullptr, true);
            expect_block_end();
            s->body = subparse({"endfilter"});
            end_tag("endfilter");
        } else if (word == "with") {
            s->kind = Stmt::Kind::kWith;
            while (cur().type != TokenType::kBlockEnd) {
                if (!s->with_targets.empty()) expect_op(",");
                std::string name = expect_name();
                expect_op("=");
                s->with_targets.emplace_back(name, parse_expression(true));
            }
            expect_block_end();
            s->body = subparse({"endwith"});
            end_tag("endwith");
        } else if (word == "generation") {
            // transformers' {% generation %} marks assistant spans; it renders its body unchanged.
            s->kind = Stmt::Kind::kWith;
            expect_block_end();
            s->body = subparse({"endgeneration"});
            end_tag("endgeneration");
        } else if (word == "include") {
            // Chat templates are compiled from a string with no loader: Jinja2 fails when an include runs.
            s->kind = Stmt::Kind::kInclude;
            s->expr = parse_expression(true);
            if (skip_name("ignore") && !skip_name("missing")) fail(cur(), "expected 'missing'");
            if (skip_name("with") || skip_name("without")) {
                if (!skip_name("context")) fail(cur(), "expected 'context'");
            }
            expect_block_end();
        } else if (word == "break" || word == "continue") {
            if (loop_depth_ == 0) fail(t, "'" + word + "' outside of a loop");
            s->kind = word == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
            expect_block_end();
        } else {
            fail(t, "encountered unknown tag '" + word + "'");
        }
        return s;
    }

    // `a` or `a, b` or `(a, b)` for loop and set targets.
    std::vector<std::string> parse_assign_names() {
        std::vector<std::string> names;
        bool paren = skip_op("(");
        while (true) {
            names.push_back(expect_name());
            if (!skip_op(",")) break;
            if (cur().type != TokenType::kName) break;
        }
        if (paren) expect_op(")");
        return names;
    }

    // ---- expressions ----

    bool is_tuple_end(std::initializer_list<const char*> extra_end) const {
        const Token& t = cur();
        if (t.type == TokenType::kVarEnd || t.type == TokenType::kBlockEnd || t.type == TokenType::kEof) return true;
        if (t.type == TokenType::kOp && t.text == ")") return true;
        if (t.type == TokenType::kName)
            for (const char* e : extra_end)
                if (t.text == e) return true;
        return false;
    }

    ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<const char*> extra_end,
                        bool explicit_parens = false) {
        const Token& start = cur();
        std::vector<ExprPtr> items;
        bool is_tuple = false;
        while (true) {
            if (!items.empty()) expect_op(",");
            if (is_tuple_end(extra_end)) break;
            items.push_back(with_condexpr ? parse_expression(true) : parse_or());
            if (is_op(","))
                is_tuple = true;
            else
                break;
        }
        if (!is_tuple) {
            if (!items.empty()) return std::move(items[0]);
            if (!explicit_parens) fail(cur(), "expected an expression, got " + describe(cur()));
        }
        auto e = node(Expr::Kind::kTuple, start);
        e->children = std::move(items);
        return finish(std::move(e));
    }

    ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

    ExprPtr parse_condexpr() {
        DepthGuard guard(*this, cur());
        ExprPtr expr1 = parse_or();
        while (is_name("if")) {
            const Token& t = next();
            ExprPtr expr2 = parse_or();
            ExprPtr expr3;
            if (skip_name("else")) expr3 = parse_condexpr();
            auto e = node(Expr::Kind::kCondition, t);
            e->children.push_back(std::move(expr1));
            e->children.push_back(std::move(expr2));
            e->children.push_back(std::move(expr3));
            expr1 = finish(std::move(e));
        }
        return expr1;
    }

    ExprPtr binary(const Token& t, const std::string& op, ExprPtr left, ExprPtr right) {
        auto e = node(Expr::Kind::kBinary, t);
        e->name = op;
        e->children.push_back(std::move(left));
        e->children.push_back(std::move(right));
        return finish(std::move(e));
    }

    ExprPtr parse_or() {
        ExprPtr left = parse_and();
        while (is_name("or")) {
            const Token& t = next();
            left = binary(t, "or", std::move(left), parse_and());
        }
        return left;
    }

    ExprPtr parse_and() {
        ExprPtr left = parse_not();
        while (is_name("and")) {
            const Token& t = next();
            left = binary(t, "and", std::move(left), parse_not());
        }
        return left;
    }

    ExprPtr parse_not() {
        if (is_name("not")) {
            DepthGuard guard(*this, cur());
            const Token& t = next();
            auto e = node(Expr::Kind::kUnary, t);
            e->name = "not";
            e->children.push_back(parse_not());
            return finish(std::move(e));
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        const Token& start = cur();
        ExprPtr first = parse_math1();
        std::vector<std::string> ops;
        std::vector<ExprPtr> operands;
        while (true) {
            const Token& t = cur();
            if (t.type == TokenType::kOp && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" ||
                                             t.text == ">" || t.text == ">=")) {
                ops.push_back(next().text);
            } else if (is_name("in")) {
                next();
                ops.push_back("in");
            } else if (is_name("not") && peek().type == TokenType::kName && peek().text == "in") {
                next();
                next();
                ops.push_back("notin");
            } else {
                break;
            }
            operands.push_back(parse_math1());
        }
        if (ops.empty()) return first;
        auto e = node(Expr::Kind::kCompare, start);
        e->children.push_back(std::move(first));
        for (auto& o : operands)
            e->children.push_back(std::move(o));
        e->ops = std::move(ops);
        return finish(std::move(e));
    }

    ExprPtr parse_math1() {
        ExprPtr left = parse_concat();
        while (is_op("+") || is_op("-")) {
            const Token& t = next();
            left = binary(t, t.text, std::move(left), parse_concat());
        }
        return left;
    }

    ExprPtr parse_concat() {
        ExprPtr left = parse_math2();
        while (is_op("~")) {
            const Token& t = next();
            left = binary(t, "~", std::move(left), parse_math2());
        }
        return left;
    }

    ExprPtr parse_math2() {
        ExprPtr left = parse_pow();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const Token& t = next();
            left = binary(t, t.text, std::move(left), parse_pow());
        }
        return left;
    }

    ExprPtr parse_pow() {
        ExprPtr left = parse_unary(true);
        while (is_op("**")) {
            const Token& t = next();
            left = binary(t, "**", std::move(left), parse_unary(true));
        }
        return left;
    }

    ExprPtr parse_unary(bool with_filter) {
        DepthGuard guard(*this, cur());
        ExprPtr e;
        if (is_op("-") || is_op("+")) {
            const Token& t = next();
            e = node(Expr::Kind::kUnary, t);
            e->name = t.text;
            e->children.push_back(parse_unary(false));
            e = finish(std::move(e));
        } else {
            e = parse_postfix(parse_primary());
        }
        if (with_filter) e = parse_filter_expr(std::move(e));
        return e;
    }

    ExprPtr parse_primary() {
        const Token& t = cur();
        if (t.type == TokenType::kName) {
            next();
            auto e = node(Expr::Kind::kLiteral, t);
            if (t.text == "true" || t.text == "True")
                e->value = Value(true);
            else if (t.text == "false" || t.text == "False")
                e->value = Value(false);
            else if (t.text == "none" || t.text == "None")
                e->value = Value::none();
            else {
                e->kind = Expr::Kind::kName;
                e->name = t.text;
            }
            return e;
        }
        if (t.type == TokenType::kString) {
            std::string s;
            while (cur().type == TokenType::kString)
                s += next().text;
            auto e = node(Expr::Kind::kLiteral, t);
            e->value = Value(std::move(s));
            return e;
        }
        if (t.type == TokenType::kInt || t.type == TokenType::kFloat) {
            next();
            auto e = node(Expr::Kind::kLiteral, t);
            e->value = t.type == TokenType::kInt ? Value(t.int_value) : Value(t.float_value);
            return e;
        }
        if (is_op("(")) {
            next();
            ExprPtr e = parse_tuple(true, {}, true);
            expect_op(")");
            return e;
        }
        if (is_op("[")) {
            next();
            auto e = node(Expr::Kind::kList, t);
            while (!is_op("]")) {
                if (!e->children.empty()) expect_op(",");
                if (is_op("]")) break;
                e->children.push_back(parse_expression(true));
            }
            expect_op("]");
            return finish(std::move(e));
        }
        if (is_op("{")) {
            next();
            auto e = node(Expr::Kind::kDict, t);
            while (!is_op("}")) {
                if (!e->children.empty()) expect_op(",");
                if (is_op("}")) break;
                e->children.push_back(parse_expression(true));
                expect_op(":");
                e->children.push_back(parse_expression(true));
            }
            expect_op("}");
            return finish(std::move(e));
        }
        fail(t, "unexpected " + describe(t));
    }

    ExprPtr parse_postfix(ExprPtr e) {
        while (true) {
            if (is_op(".") || is_op("[")) {
                e = parse_subscript(std::move(e));
            } else if (is_op("(")) {
                e = parse_call(std::move(e));
            } else {
                return e;
            }
        }
    }

    ExprPtr parse_filter_expr(ExprPtr e) {
        while (true) {
            if (is_op("|")) {
                e = parse_filter(std::move(e), false);
            } else if (is_name("is")) {
                e = parse_test(std::move(e));
            } else if (is_op("(")) {
                e = parse_call(std::move(e));
            } else {
                return e;
            }
        }
    }

    ExprPtr parse_subscript(ExprPtr obj) {
        const Token& t = next();
        if (t.text == ".") {
            const Token& attr = cur();
            if (attr.type == TokenType::kName) {
                next();
                auto e = node(Expr::Kind::kGetAttr, t);
                e->name = attr.text;
                e->children.push_back(std::move(obj));
                return finish(std::move(e));
            }
            if (attr.type == TokenType::kInt) {
                next();
                auto e = node(Expr::Kind::kGetItem, t);
                auto idx = node(Expr::Kind::kLiteral, attr);
                idx->value = Value(attr.int_value);
                e->children.push_back(std::move(obj));
                e->children.push_back(std::move(idx));
                return finish(std::move(e));
            }
            fail(attr, "expected name or number after '.'");
        }
        // '['
        std::vector<ExprPtr> args;
        while (!is_op("]")) {
            if (!args.empty()) expect_op(",");
            args.push_back(parse_subscribed());
        }
        expect_op("]");
        if (args.size() == 1 && args[0]->kind == Expr::Kind::kSlice) {
            args[0]->children.insert(args[0]->children.begin(), std::move(obj));
            return finish(std::move(args[0]));
        }
        auto e = node(Expr::Kind::kGetItem, t);
        e->children.push_back(std::move(obj));
        if (args.size() == 1) {
            e->children.push_back(std::move(args[0]));
        } else {
            // x[a:b, c]: Python would look up a tuple holding a slice object, which no list, string or dict has;
            // a None stands in for the slice so the lookup comes out undefined the same way.
            for (auto& a : args)
                if (a->kind == Expr::Kind::kSlice) {
                    auto none = node(Expr::Kind::kLiteral, t);
                    none->value = Value::none();
                    a = std::move(none);
                }
            auto tup = node(Expr::Kind::kTuple, t);
            tup->children = std::move(args);
            e->children.push_back(finish(std::move(tup)));
        }
        return finish(std::move(e));
    }

    ExprPtr parse_subscribed() {
        const Token& t = cur();
        std::vector<ExprPtr> parts;
        if (is_op(":")) {
            next();
            parts.push_back(nullptr);
        } else {
            ExprPtr e = parse_expression(true);
            if (!is_op(":")) return e;
            next();
            parts.push_back(std::move(e));
        }
        if (is_op(":")) {
            parts.push_back(nullptr);
        } else if (!is_op("]") && !is_op(",")) {
            parts.push_back(parse_expression(true));
        } else {
            parts.push_back(nullptr);
        }
        if (skip_op(":")) {
            if (!is_op("]") && !is_op(","))
                parts.push_back(parse_expression(true));
            else
                parts.push_back(nullptr);
        } else {
            parts.push_back(nullptr);
        }
        auto e = node(Expr::Kind::kSlice, t);
        e->children = std::move(parts);
        return e;
    }

    void parse_call_args(Expr& e) {
        expect_op("(");
        bool require_comma = false;
        while (!is_op(")")) {
            if (require_comma) {
                expect_op(",");
                if (is_op(")")) break;
            }
            if (is_op("*") || is_op("**")) fail(cur(), "*args and **kwargs in calls are not supported");
            if (cur().type == TokenType::kName && peek().type == TokenType::kOp && peek().text == "=") {
                std::string key = next().text;
                next();
                e.kwargs.emplace_back(std::move(key), parse_expression(true));
            } else {
                if (!e.kwargs.empty()) fail(cur(), "positional argument follows keyword argument");
                e.args.push_back(parse_expression(true));
            }
            require_comma = true;
        }
        expect_op(")");
    }

    ExprPtr parse_call(ExprPtr callee) {
        auto e = node(Expr::Kind::kCall, cur());
        e->children.push_back(std::move(callee));
        parse_call_args(*e);
        return finish(std::move(e));
    }

    ExprPtr parse_filter(ExprPtr e, bool start_inline) {
        while (is_op("|") || start_inline) {
            if (!start_inline) next();
            start_inline = false;
            const Token& t = cur();
            std::string name = expect_name();
            while (is_op(".")) {
                next();
                name += "." + expect_name();
            }
            auto f = node(Expr::Kind::kFilter, t);
            f->name = std::move(name);
            f->children.push_back(std::move(e));
            if (is_op("(")) parse_call_args(*f);
            e = finish(std::move(f));
        }
        return e;
    }

    ExprPtr parse_test(ExprPtr e) {
        const Token& t = next();  // 'is'
        bool negated = skip_name("not");
        std::string name = expect_name();
        while (is_op(".")) {
            next();
            name += "." + expect_name();
        }
        auto test = node(Expr::Kind::kTest, t);
        test->name = std::move(name);
        test->negated = negated;
        test->children.push_back(std::move(e));
        const Token& c = cur();
        if (is_op("(")) {
            parse_call_args(*test);
        } else if ((c.type == TokenType::kName || c.type == TokenType::kString || c.type == TokenType::kInt ||
                    c.type == TokenType::kFloat || is_op("(") || is_op("[") || is_op("{")) &&
                   !(c.type == TokenType::kName && (c.text == "else" || c.text == "or" || c.text == "and"))) {
            if (is_name("is")) fail(c, "you cannot chain multiple tests with is");
            test->args.push_back(parse_postfix(parse_primary()));
        }
        return finish(std::move(test));
    }

    const std::vector<Token>& tokens_;
    size_t pos_ = 0;
    int depth_ = 0;
    int max_depth_;
    int loop_depth_ = 0;
};

}  // namespace

Body parse_template(const std::vector<Token>& tokens, int max_depth) {
    return Parser(tokens, max_depth).parse();
}

}  // namespace pagoda::jinja
