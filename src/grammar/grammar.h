// The internal grammar form the matcher runs: every rule is a list of alternatives, each a sequence of elements over
// bytes. An element is a byte set (one byte of input), a reference to a rule, or the end of an alternative; an element
// may be starred (repeated zero or more times in place) or counted (repeated min..max times in place, the matcher's
// items carrying the count), which keeps repetition from growing the matcher's state.
// Character classes over codepoints are lowered to byte sequences of their UTF-8 forms, so a token that ends inside a
// multi-byte character (byte-level BPE) simply leaves the matcher inside the sequence.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "grammar/expr.h"

namespace pagoda::grammar {

struct ByteSet {
    std::array<uint64_t, 4> bits{};
    bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
    void add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
    void add_range(uint8_t lo, uint8_t hi) {
        for (int b = lo; b <= hi; ++b)
            add(static_cast<uint8_t>(b));
    }
    friend bool operator==(const ByteSet&, const ByteSet&) = default;
};

struct Element {
    enum Kind : uint8_t { kBytes, kRule, kEnd };
    Kind kind = kEnd;
    bool star = false;  // zero or more times, in place
    uint32_t arg = 0;   // kBytes: index into byte_sets; kRule: rule id; kEnd: rule id
    // Counted (max > 0): min..max times, in place. min is 0 when the repeated rule is nullable (an empty iteration
    // adds nothing), so every counted iteration consumes at least one byte.
    uint16_t min = 0, max = 0;

    bool counted() const { return max > 0; }
};

struct Grammar {
    std::vector<Element> program;                  // alternatives back to back, each closed by a kEnd
    std::vector<std::vector<uint32_t>> rule_alts;  // per rule: program positions where its alternatives start
    std::vector<std::string> rule_names;           // helper rules are named after their parent ("value_3")
    std::vector<uint8_t> nullable;                 // per rule: can match the empty string
    std::vector<ByteSet> byte_sets;
    uint32_t start_pos = 0;   // the synthetic start rule's one alternative: [root, end]
    uint32_t accept_pos = 0;  // its end: the grammar matched a whole sentence

    size_t num_rules() const { return rule_alts.size(); }
};

// Limits that keep a hostile grammar (a schema with maxLength 10^9, a regex a{99999}) from exhausting memory.
inline constexpr int32_t kMaxRepeatBound = 10000;
inline constexpr size_t kMaxProgramSize = 2'000'000;

// Lowers `source`; errors name the rule (undefined references, no root, bounds over the limits).
Result<Grammar> compile_grammar(const GrammarSource& source);

}  // namespace pagoda::grammar
