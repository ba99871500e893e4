// The source form of a grammar: named rules whose bodies are expression trees (literals, character classes, rule
// references, sequences, alternatives, bounded or unbounded repetition). The GBNF and regex parsers and the JSON
// Schema compiler all produce this form; grammar.h lowers it to the flat byte-level program the matcher runs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pagoda::grammar {

inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

struct CodepointRange {
    uint32_t lo = 0, hi = 0;  // inclusive
};

struct Expr {
    enum class Kind { kEmpty, kLiteral, kClass, kRef, kSeq, kAlt, kRepeat };
    Kind kind = Kind::kEmpty;
    std::string text;                    // kLiteral: the bytes (UTF-8); kRef: the rule name
    std::vector<CodepointRange> ranges;  // kClass: the codepoints it matches (after negation: see `negated`)
    bool negated = false;                // kClass: matches every codepoint NOT in `ranges`
    std::vector<Expr> items;             // kSeq, kAlt; kRepeat: items[0] is repeated
    int32_t min = 0, max = -1;           // kRepeat: max -1 = unbounded
};

Expr empty();
Expr lit(std::string bytes);
Expr cls(std::vector<CodepointRange> ranges, bool negated = false);
Expr ref(std::string rule);
Expr seq(std::vector<Expr> items);
Expr alt(std::vector<Expr> items);
Expr repeat(Expr item, int32_t min, int32_t max);
inline Expr star(Expr e) {
    return repeat(std::move(e), 0, -1);
}
inline Expr plus(Expr e) {
    return repeat(std::move(e), 1, -1);
}
inline Expr opt(Expr e) {
    return repeat(std::move(e), 0, 1);
}

// The codepoints a class matches, as sorted disjoint ranges (negation applied; surrogates never match).
std::vector<CodepointRange> class_codepoints(const Expr& cls);

struct GrammarSource {
    std::vector<std::pair<std::string, Expr>> rules;  // in definition order; names are unique
    std::string root = "root";

    // Adds or replaces the rule `name`.
    void set_rule(const std::string& name, Expr body);
    bool has_rule(const std::string& name) const;
};

// GBNF text of `g` (what a GBNF parser reads back as the same grammar): for logs, tests and debugging.
std::string to_gbnf(const GrammarSource& g);

}  // namespace pagoda::grammar
