#include "grammar/expr.h"

#include <algorithm>
#include <cstdio>

namespace pagoda::grammar {

Expr empty() {
    return Expr{};
}

Expr lit(std::string bytes) {
    Expr e;
    e.kind = bytes.empty() ? Expr::Kind::kEmpty : Expr::Kind::kLiteral;
    e.text = std::move(bytes);
    return e;
}

Expr cls(std::vector<CodepointRange> ranges, bool negated) {
    Expr e;
    e.kind = Expr::Kind::kClass;
    e.ranges = std::move(ranges);
    e.negated = negated;
    return e;
}

Expr ref(std::string rule) {
    Expr e;
    e.kind = Expr::Kind::kRef;
    e.text = std::move(rule);
    return e;
}

Expr seq(std::vector<Expr> items) {
    std::erase_if(items, [](const Expr& e) { return e.kind == Expr::Kind::kEmpty; });
    if (items.empty()) return empty();
    if (items.size() == 1) return std::move(items[0]);
    Expr e;
    e.kind = Expr::Kind::kSeq;
    e.items = std::move(items);
    return e;
}

Expr alt(std::vector<Expr> items) {
    if (items.size() == 1) return std::move(items[0]);
    Expr e;
    e.kind = Expr::Kind::kAlt;
    e.items = std::move(items);
    return e;
}

Expr repeat(Expr item, int32_t min, int32_t max) {
    if (max == 0 || item.kind == Expr::Kind::kEmpty) return empty();
    if (min == 1 && max == 1) return item;
    Expr e;
    e.kind = Expr::Kind::kRepeat;
    e.items.push_back(std::move(item));
    e.min = min;
    e.max = max;
    return e;
}

std::vector<CodepointRange> class_codepoints(const Expr& c) {
    std::vector<CodepointRange> r = c.ranges;
    std::sort(r.begin(), r.end(), [](const CodepointRange& a, const CodepointRange& b) { return a.lo < b.lo; });
    std::vector<CodepointRange> merged;
    for (CodepointRange x : r) {
        if (x.lo > x.hi) continue;
        x.hi = std::min(x.hi, kMaxCodepoint);
        if (x.lo > kMaxCodepoint) continue;
        if (!merged.empty() && x.lo <= merged.back().hi + 1)
            merged.back().hi = std::max(merged.back().hi, x.hi);
        else
            merged.push_back(x);
    }
    if (c.negated) {
        std::vector<CodepointRange> inv;
        uint32_t next = 0;
        for (const CodepointRange& x : merged) {
            if (x.lo > next) inv.push_back({next, x.lo - 1});
            next = x.hi + 1;
        }
        if (next <= kMaxCodepoint) inv.push_back({next, kMaxCodepoint});
        merged = std::move(inv);
    }
    // Surrogates are not scalar values: UTF-8 cannot carry them.
    std::vector<CodepointRange> out;
    for (const CodepointRange& x : merged) {
        if (x.hi < 0xD800 || x.lo > 0xDFFF) {
            out.push_back(x);
            continue;
        }
        if (x.lo < 0xD800) out.push_back({x.lo, 0xD7FF});
        if (x.hi > 0xDFFF) out.push_back({0xE000, x.hi});
    }
    return out;
}

void GrammarSource::set_rule(const std::string& name, Expr body) {
    for (auto& [n, e] : rules)
        if (n == name) {
            e = std::move(body);
            return;
        }
    rules.emplace_back(name, std::move(body));
}

bool GrammarSource::has_rule(const std::string& name) const {
    return std::any_of(rules.begin(), rules.end(), [&](const auto& r) { return r.first == name; });
}

namespace {

void put_codepoint(std::string& out, uint32_t cp, bool in_class) {
    char buf[16];
    if (cp == '\n') {
        out += "\\n";
    } else if (cp == '\r') {
        out += "\\r";
    } else if (cp == '\t') {
        out += "\\t";
    } else if (cp == '\\' || (!in_class && cp == '"') || (in_class && (cp == ']' || cp == '-' || cp == '^'))) {
        out += '\\';
        out += static_cast<char>(cp);
    } else if (cp < 0x20 || cp == 0x7F) {
        std::snprintf(buf, sizeof buf, "\\x%02X", cp);
        out += buf;
    } else if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else {
        std::snprintf(buf, sizeof buf, cp <= 0xFFFF ? "\\u%04X" : "\\U%08X", cp);
        out += buf;
    }
}

void print(std::string& out, const Expr& e, bool nested) {
    switch (e.kind) {
        case Expr::Kind::kEmpty:
            out += "\"\"";
            break;
        case Expr::Kind::kLiteral:
            // UTF-8 passes through as is (GBNF text is UTF-8); ASCII controls and quotes are escaped.
            out += '"';
            for (unsigned char b : e.text) {
                if (b >= 0x80)
                    out += static_cast<char>(b);
                else
                    put_codepoint(out, b, false);
            }
            out += '"';
            break;
        case Expr::Kind::kClass:
            out += e.negated ? "[^" : "[";
            for (const CodepointRange& r : e.ranges) {
                put_codepoint(out, r.lo, true);
                if (r.hi != r.lo) {
                    out += '-';
                    put_codepoint(out, r.hi, true);
                }
            }
            out += ']';
            break;
        case Expr::Kind::kRef:
            out += e.text;
            break;
        case Expr::Kind::kSeq:
            if (nested) out += '(';
            for (size_t i = 0; i < e.items.size(); ++i) {
                if (i) out += ' ';
                print(out, e.items[i], true);
            }
            if (nested) out += ')';
            break;
        case Expr::Kind::kAlt:
            if (nested) out += '(';
            for (size_t i = 0; i < e.items.size(); ++i) {
                if (i) out += " | ";
                print(out, e.items[i], false);
            }
            if (nested) out += ')';
            break;
        case Expr::Kind::kRepeat: {
            print(out, e.items[0], true);
            if (e.min == 0 && e.max == -1)
                out += '*';
            else if (e.min == 1 && e.max == -1)
                out += '+';
            else if (e.min == 0 && e.max == 1)
                out += '?';
            else if (e.max == -1)
                out += '{' + std::to_string(e.min) + ",}";
            else if (e.min == e.max)
                out += '{' + std::to_string(e.min) + '}';
            else
                out += '{' + std::to_string(e.min) + ',' + std::to_string(e.max) + '}';
            break;
        }
    }
}

}  // namespace

std::string to_gbnf(const GrammarSource& g) {
    std::string out;
    for (const auto& [name, body] : g.rules) {
        out += name;
        out += " ::= ";
        print(out, body, false);
        out += '\n';
    }
    return out;
}

}  // namespace pagoda::grammar
