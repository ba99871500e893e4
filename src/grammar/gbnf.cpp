// A recursive-descent GBNF parser; exceptions carry errors out of the recursion and stop at parse_gbnf.
#include "grammar/gbnf.h"

#include <string>

#include "common/utf8.h"
#include "grammar/descent.h"
#include "grammar/escapes.h"

namespace pagoda::grammar {

namespace {

struct GbnfError {
    std::string message;
};

bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

class GbnfParser : Descent<GbnfParser> {
    friend Descent<GbnfParser>;

  public:
    explicit GbnfParser(std::string_view t) : Descent(t) {}

    GrammarSource parse() {
        GrammarSource g;
        skip_space();
        if (i_ == t_.size()) fail("the grammar is empty");
        while (i_ < t_.size()) {
            const std::string n = name();
            skip_space();
            if (t_.substr(i_, 3) != "::=") fail("expected '::=' after the rule name '" + n + "'");
            i_ += 3;
            if (g.has_rule(n)) fail("the rule '" + n + "' is defined twice");
            g.set_rule(n, alternatives(0));
            skip_space();
        }
        return g;
    }

  private:
    [[noreturn]] void fail(const std::string& what) const {
        size_t line = 1;
        for (size_t k = 0; k < i_ && k < t_.size(); ++k)
            line += t_[k] == '\n';
        throw GbnfError{what + " (line " + std::to_string(line) + ")"};
    }
    void skip_space() {
        while (i_ < t_.size()) {
            const char c = t_[i_];
            if (c == '#') {
                while (i_ < t_.size() && t_[i_] != '\n')
                    ++i_;
            } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
                ++i_;
            } else {
                break;
            }
        }
    }

    std::string name() {
        const size_t s = i_;
        while (i_ < t_.size() && name_char(t_[i_]))
            ++i_;
        if (i_ == s) fail(std::string("expected a rule name, got '") + (i_ < t_.size() ? t_[i_] : ' ') + "'");
        return std::string(t_.substr(s, i_ - s));
    }

    // At a rule name followed by '::=': the start of the next rule.
    bool at_rule_start() const {
        size_t j = i_;
        while (j < t_.size() && name_char(t_[j]))
            ++j;
        if (j == i_) return false;
        while (j < t_.size() && (t_[j] == ' ' || t_[j] == '\t' || t_[j] == '\n' || t_[j] == '\r'))
            ++j;
        return t_.substr(j, 3) == "::=";
    }

    Expr sequence(int depth) {
        std::vector<Expr> items;
        for (;;) {
            skip_space();
            if (i_ == t_.size() || at('|') || at(')') || (depth == 0 && at_rule_start())) break;
            Expr a = term(depth);
            skip_space();
            items.push_back(quantified(std::move(a)));
        }
        return seq(std::move(items));
    }

    // Stacked quantifiers ("x*+") are allowed, a few: each nests the expression one level deeper.
    Expr quantified(Expr a) {
        for (int stacked = 0;; ++stacked) {
            skip_space();
            if (stacked > 8 && (at('*') || at('+') || at('?') || at('{'))) fail("too many quantifiers in a row");
            if (at('*')) {
                ++i_, a = star(std::move(a));
            } else if (at('+')) {
                ++i_, a = plus(std::move(a));
            } else if (at('?')) {
                ++i_, a = opt(std::move(a));
            } else if (at('{')) {
                ++i_;
                int32_t lo = 0, hi = -1;
                skip_space();
                const bool has_lo = number(lo);
                skip_space();
                if (at(',')) {
                    ++i_;
                    skip_space();
                    if (!number(hi)) hi = -1;
                    skip_space();
                } else {
                    if (!has_lo) fail("expected a number in '{...}'");
                    hi = lo;
                }
                if (!at('}')) fail("expected '}'");
                ++i_;
                if (hi >= 0 && hi < lo) fail("repetition {m,n} with n < m");
                a = repeat(std::move(a), lo, hi);
            } else {
                return a;
            }
        }
    }

    bool number(int32_t& out) {
        const size_t s = i_;
        int64_t v = 0;
        while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') {
            v = v * 10 + (t_[i_++] - '0');
            if (v > 1'000'000) fail("repetition count too large");
        }
        out = static_cast<int32_t>(v);
        return i_ > s;
    }

    char32_t codepoint(EscapeContext ctx) {
        if (!at('\\')) return utf8_decode(t_, i_);
        ++i_;
        auto cp = parse_escape(t_, i_, ctx);
        if (!cp.ok()) fail(cp.message());
        return *cp;
    }

    Expr term(int depth) {
        const char c = t_[i_];
        if (c == '"' || c == '\'') {
            ++i_;
            std::string s;
            while (i_ < t_.size() && t_[i_] != c)
                utf8_append(s, codepoint(EscapeContext::kGbnf));
            if (!at(c)) fail("unterminated literal");
            ++i_;
            return lit(std::move(s));
        }
        if (c == '[') {
            ++i_;
            bool negated = false;
            if (at('^')) ++i_, negated = true;
            std::vector<CodepointRange> ranges;
            while (i_ < t_.size() && !at(']')) {
                const char32_t lo = codepoint(EscapeContext::kGbnf);
                char32_t hi = lo;
                if (at('-') && i_ + 1 < t_.size() && t_[i_ + 1] != ']') {
                    ++i_;
                    hi = codepoint(EscapeContext::kGbnf);
                    if (hi < lo) fail("bad character range");
                }
                ranges.push_back({static_cast<uint32_t>(lo), static_cast<uint32_t>(hi)});
            }
            if (!at(']')) fail("unterminated character class");
            ++i_;
            return cls(std::move(ranges), negated);
        }
        if (c == '.') {
            ++i_;
            return cls({}, true);
        }
        if (c == '(') {
            ++i_;
            Expr e = alternatives(depth + 1);
            skip_space();
            if (!at(')')) fail("missing ')'");
            ++i_;
            return e;
        }
        if (name_char(c)) return ref(name());
        fail(std::string("unexpected '") + c + "'");
    }
};

}  // namespace

Result<GrammarSource> parse_gbnf(std::string_view text) {
    GrammarSource g;
    try {
        g = GbnfParser(text).parse();
    } catch (const GbnfError& e) {
        return Status::error("grammar: " + e.message);
    }
    if (!g.has_rule("root")) return Status::error("grammar: there is no 'root' rule");
    return g;
}

}  // namespace pagoda::grammar
