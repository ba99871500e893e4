// A recursive-descent regex parser; exceptions carry errors out of the recursion and stop at parse_regex.
#include "grammar/regex.h"

#include <string>

#include "common/utf8.h"
#include "grammar/descent.h"
#include "grammar/escapes.h"

namespace pagoda::grammar {

namespace {

struct RegexError {
    std::string message;
};

class RegexParser : Descent<RegexParser> {
    friend Descent<RegexParser>;

  public:
    explicit RegexParser(std::string_view p) : Descent(p) {}

    Expr parse() {
        if (at('^')) ++i_;
        Expr e = alternatives(0);
        if (i_ < t_.size()) fail("unbalanced ')'");
        return e;
    }

  private:
    [[noreturn]] void fail(const std::string& what) const {
        throw RegexError{what + " at offset " + std::to_string(i_)};
    }
    Expr sequence(int depth) {
        std::vector<Expr> items;
        while (i_ < t_.size() && !at('|') && !at(')')) {
            if (at('$')) {
                ++i_;
                if (i_ == t_.size() || at('|') || at(')')) continue;  // an end anchor where the match ends anyway
                fail("'$' before the end of the pattern cannot be expressed");
            }
            Expr a = atom(depth);
            items.push_back(quantified(std::move(a)));
        }
        return seq(std::move(items));
    }

    // Reads {m}, {m,}, {m,n} or {,n} at i_ (on '{'); false (i_ unchanged) when it is not a quantifier.
    bool braces(int32_t& min, int32_t& max) {
        size_t j = i_ + 1;
        auto number = [&](int32_t& out) {
            const size_t s = j;
            int64_t v = 0;
            while (j < t_.size() && t_[j] >= '0' && t_[j] <= '9') {
                v = v * 10 + (t_[j++] - '0');
                if (v > 1'000'000) fail("repetition count too large");
            }
            out = static_cast<int32_t>(v);
            return j > s;
        };
        int32_t lo = 0, hi = -1;
        const bool has_lo = number(lo);
        if (j < t_.size() && t_[j] == ',') {
            ++j;
            if (!number(hi)) hi = -1;
        } else {
            if (!has_lo) return false;
            hi = lo;
        }
        if (j >= t_.size() || t_[j] != '}') return false;
        if (!has_lo && hi < 0) return false;  // "{,}" is a literal in Python
        if (hi >= 0 && hi < lo) fail("repetition {m,n} with n < m");
        i_ = j + 1;
        min = lo, max = hi;
        return true;
    }

    // One quantifier (and its lazy '?'); another right after it is Python's "multiple repeat" error (and would let
    // a long run of them nest the expression arbitrarily deep).
    Expr quantified(Expr a) {
        for (bool quantified = false; i_ < t_.size(); quantified = true) {
            int32_t min = 0, max = -1;
            const size_t at_quantifier = i_;
            if (at('*')) {
                ++i_;
            } else if (at('+')) {
                ++i_, min = 1;
            } else if (at('?')) {
                ++i_, max = 1;
            } else if (at('{') && braces(min, max)) {
            } else {
                break;
            }
            if (quantified) {
                i_ = at_quantifier;
                fail("multiple repeat");
            }
            if (at('?')) ++i_;  // lazy: matches the same strings
            if (at('+')) fail("possessive quantifiers cannot be expressed");
            a = repeat(std::move(a), min, max);
        }
        return a;
    }

    Expr atom(int depth) {
        const char c = t_[i_];
        switch (c) {
            case '(': {
                ++i_;
                if (at('?')) {
                    ++i_;
                    if (at(':')) {
                        ++i_;
                    } else if (at('P') && i_ + 1 < t_.size() && t_[i_ + 1] == '<') {
                        skip_name();
                    } else if (at('<') && i_ + 1 < t_.size() && t_[i_ + 1] != '=' && t_[i_ + 1] != '!') {
                        --i_;
                        skip_name();
                    } else if (at('=') || at('!') || at('<')) {
                        fail("lookaround cannot be expressed");
                    } else if (at('P') && i_ + 1 < t_.size() && t_[i_ + 1] == '=') {
                        fail("backreferences cannot be expressed");
                    } else {
                        fail("inline flags and other (?...) groups are not supported");
                    }
                }
                Expr e = alternatives(depth + 1);
                if (!at(')')) fail("missing ')'");
                ++i_;
                return e;
            }
            case '[':
                return char_class();
            case '.':
                ++i_;
                return cls({{'\n', '\n'}}, true);
            case '\\':
                return escape(false);
            case '*':
            case '+':
            case '?':
                fail(std::string("nothing to repeat before '") + c + "'");
            case '^':
                fail("'^' after the start of the pattern cannot be expressed");
            default: {
                const char32_t cp = utf8_decode(t_, i_);
                std::string s;
                utf8_append(s, cp);
                return lit(std::move(s));
            }
        }
    }

    // Skips "P<name>" or "<name>" of a named group (i_ on 'P' or '<').
    void skip_name() {
        while (i_ < t_.size() && t_[i_] != '>')
            ++i_;
        if (i_ == t_.size()) fail("unterminated group name");
        ++i_;
    }

    // An escape at i_ (on '\'): a class (\d \w \s ...) or one codepoint as a literal or a class member.
    Expr escape(bool in_class) {
        ++i_;
        if (i_ >= t_.size()) fail("trailing backslash");
        const char c = t_[i_];
        std::vector<CodepointRange> ranges;
        if (shorthand_class(c, ranges)) {
            ++i_;
            const bool negated = c == 'D' || c == 'W' || c == 'S';
            return cls(std::move(ranges), negated);
        }
        if (!in_class) {
            if (c == 'b' || c == 'B') fail("word boundaries cannot be expressed");
            if (c >= '1' && c <= '9') fail("backreferences cannot be expressed");
            if (c == 'A' || c == 'Z') {
                ++i_;
                return empty();  // the match is the whole output anyway
            }
        }
        auto cp = parse_escape(t_, i_, in_class ? EscapeContext::kRegexClass : EscapeContext::kRegex);
        if (!cp.ok()) fail(cp.message());
        std::string s;
        utf8_append(s, *cp);
        return lit(std::move(s));
    }

    static bool shorthand_class(char c, std::vector<CodepointRange>& out) {
        switch (c) {
            case 'd':
            case 'D':
                out = {{'0', '9'}};
                return true;
            case 'w':
            case 'W':
                out = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
                return true;
            case 's':
            case 'S':
                out = {{'\t', '\r'}, {' ', ' '}};
                return true;
            default:
                return false;
        }
    }

    // One member of a class at i_: a codepoint, or a shorthand (its ranges appended to `ranges`, returns -1).
    int64_t class_member(std::vector<CodepointRange>& ranges) {
        if (t_[i_] != '\\') return utf8_decode(t_, i_);
        Expr e = escape(true);
        if (e.kind == Expr::Kind::kClass) {
            for (const CodepointRange& r : class_codepoints(e))
                ranges.push_back(r);
            return -1;
        }
        size_t k = 0;
        return utf8_decode(e.text, k);
    }

    Expr char_class() {
        ++i_;
        bool negated = false;
        if (at('^')) ++i_, negated = true;
        std::vector<CodepointRange> ranges;
        bool first = true;
        while (i_ < t_.size() && (first || !at(']'))) {
            first = false;
            const int64_t lo = class_member(ranges);
            if (lo < 0) continue;
            if (at('-') && i_ + 1 < t_.size() && t_[i_ + 1] != ']') {
                ++i_;
                const int64_t hi = class_member(ranges);
                if (hi < 0) fail("a class shorthand cannot end a range");
                if (hi < lo) fail("bad character range");
                ranges.push_back({static_cast<uint32_t>(lo), static_cast<uint32_t>(hi)});
            } else {
                ranges.push_back({static_cast<uint32_t>(lo), static_cast<uint32_t>(lo)});
            }
        }
        if (!at(']')) fail("missing ']'");
        ++i_;
        return cls(std::move(ranges), negated);
    }
};

}  // namespace

Result<Expr> parse_regex(std::string_view pattern) {
    try {
        return RegexParser(pattern).parse();
    } catch (const RegexError& e) {
        return Status::error("regex: " + e.message);
    }
}

Result<GrammarSource> regex_grammar(std::string_view pattern) {
    auto e = parse_regex(pattern);
    if (!e.ok()) return e.status();
    GrammarSource g;
    g.set_rule("root", std::move(e).value());
    return g;
}

}  // namespace pagoda::grammar
