// Lowering GrammarSource to the flat byte-level Grammar. Nested alternatives and multi-byte classes become helper
// rules; an unbounded repetition becomes a starred element, a bounded one a counted element.
#include "grammar/grammar.h"

#include <map>
#include <unordered_map>

#include "grammar/utf8_ranges.h"

namespace pagoda::grammar {

namespace {

using Sequence = std::vector<Element>;

class Lowering {
  public:
    explicit Lowering(const GrammarSource& src) : src_(src) {}

    Result<Grammar> run() {
        for (const auto& [name, body] : src_.rules) {
            ids_[name] = static_cast<uint32_t>(alts_.size());
            alts_.emplace_back();
            names_.push_back(name);
        }
        auto root = ids_.find(src_.root);
        if (root == ids_.end()) return Status::error("the grammar has no rule '" + src_.root + "'");
        for (size_t r = 0; r < src_.rules.size(); ++r) {
            std::vector<Sequence> a;
            const std::string base = names_[r];  // a copy: helper rules append to names_
            alternatives(src_.rules[r].second, base, a);
            alts_[r] = std::move(a);
            if (!error_.empty()) return Status::error(error_);
        }
        const uint32_t start = static_cast<uint32_t>(alts_.size());
        alts_.push_back({{Element{Element::kRule, false, root->second}}});
        names_.push_back("$start");
        return layout(start);
    }

  private:
    uint32_t byte_set(const ByteSet& s) {
        auto it = set_ids_.find(s.bits);
        if (it != set_ids_.end()) return it->second;
        const uint32_t id = static_cast<uint32_t>(g_.byte_sets.size());
        g_.byte_sets.push_back(s);
        set_ids_.emplace(s.bits, id);
        return id;
    }
    Element bytes(uint8_t lo, uint8_t hi) {
        ByteSet s;
        s.add_range(lo, hi);
        return {Element::kBytes, false, byte_set(s)};
    }

    uint32_t helper(const std::string& base, std::vector<Sequence> alts) {
        const uint32_t id = static_cast<uint32_t>(alts_.size());
        alts_.push_back(std::move(alts));
        names_.push_back(base + "_" + std::to_string(id));
        return id;
    }

    // The UTF-8 byte sequences of a class: one alternative per sequence, all one-byte ranges merged into one set.
    std::vector<Sequence> class_alternatives(const Expr& e) {
        std::vector<ByteRangeSeq> seqs;
        for (const CodepointRange& r : class_codepoints(e))
            utf8_sequences(r.lo, r.hi, seqs);
        std::vector<Sequence> out;
        ByteSet single;
        bool any_single = false;
        for (const ByteRangeSeq& s : seqs) {
            if (s.size() == 1) {
                single.add_range(s[0].lo, s[0].hi);
                any_single = true;
                continue;
            }
            Sequence q;
            for (const ByteRange& b : s)
                q.push_back(bytes(b.lo, b.hi));
            out.push_back(std::move(q));
        }
        if (any_single) out.insert(out.begin(), Sequence{Element{Element::kBytes, false, byte_set(single)}});
        return out;
    }

    void alternatives(const Expr& e, const std::string& base, std::vector<Sequence>& out) {
        if (e.kind == Expr::Kind::kAlt) {
            for (const Expr& item : e.items)
                alternatives(item, base, out);
            return;
        }
        if (e.kind == Expr::Kind::kClass) {
            for (Sequence& s : class_alternatives(e))
                out.push_back(std::move(s));
            return;
        }
        Sequence s;
        sequence(e, base, s);
        out.push_back(std::move(s));
    }

    // One element that matches `e` exactly once.
    Element unit(const Expr& e, const std::string& base) {
        if (e.kind == Expr::Kind::kRef) return rule_ref(e.text);
        if (e.kind == Expr::Kind::kLiteral && e.text.size() == 1)
            return bytes(static_cast<uint8_t>(e.text[0]), static_cast<uint8_t>(e.text[0]));
        std::vector<Sequence> alts;
        alternatives(e, base, alts);
        if (alts.size() == 1 && alts[0].size() == 1 && !alts[0][0].star && !alts[0][0].counted()) return alts[0][0];
        return {Element::kRule, false, helper(base, std::move(alts))};
    }

    Element rule_ref(const std::string& name) {
        auto it = ids_.find(name);
        if (it == ids_.end()) {
            if (error_.empty()) error_ = "the rule '" + name + "' is used but not defined";
            return {Element::kRule, false, 0};
        }
        return {Element::kRule, false, it->second};
    }

    void sequence(const Expr& e, const std::string& base, Sequence& out) {
        if (out.size() > kMaxProgramSize) {
            if (error_.empty()) error_ = "the grammar is too large";
            return;
        }
        switch (e.kind) {
            case Expr::Kind::kEmpty:
                return;
            case Expr::Kind::kLiteral:
                for (unsigned char b : e.text)
                    out.push_back(bytes(b, b));
                return;
            case Expr::Kind::kRef:
                out.push_back(rule_ref(e.text));
                return;
            case Expr::Kind::kSeq:
                for (const Expr& item : e.items)
                    sequence(item, base, out);
                return;
            case Expr::Kind::kClass:
            case Expr::Kind::kAlt:
                out.push_back(unit(e, base));
                return;
            case Expr::Kind::kRepeat:
                break;
        }
        if (e.min < 0 || e.min > kMaxRepeatBound || e.max > kMaxRepeatBound || (e.max >= 0 && e.max < e.min)) {
            if (error_.empty())
                error_ = "repetition bounds {" + std::to_string(e.min) + "," + std::to_string(e.max) +
                         "} are outside what is supported (0 <= min <= max <= " + std::to_string(kMaxRepeatBound) +
                         ") in rule '" + base + "'";
            return;
        }
        if (e.max == 0) return;
        Element u = unit(e.items[0], base);
        if (e.max < 0) {
            for (int32_t i = 0; i < e.min; ++i)
                out.push_back(u);
            u.star = true;
            out.push_back(u);
            return;
        }
        // One element that loops in place with a count: positions inside the repetition differ only in the count,
        // which the mask cache can then share (matcher.h).
        u.min = static_cast<uint16_t>(e.min);
        u.max = static_cast<uint16_t>(e.max);
        out.push_back(u);
    }

    Result<Grammar> layout(uint32_t start) {
        const size_t n = alts_.size();
        g_.rule_alts.assign(n, {});
        g_.rule_names = names_;
        for (uint32_t r = 0; r < n; ++r) {
            for (const Sequence& s : alts_[r]) {
                g_.rule_alts[r].push_back(static_cast<uint32_t>(g_.program.size()));
                g_.program.insert(g_.program.end(), s.begin(), s.end());
                g_.program.push_back({Element::kEnd, false, r});
            }
            if (g_.program.size() > kMaxProgramSize) return Status::error("the grammar is too large");
        }
        g_.start_pos = g_.rule_alts[start][0];
        g_.accept_pos = g_.start_pos + 1;
        // Nullable rules, to a fixed point.
        g_.nullable.assign(n, 0);
        for (bool changed = true; changed;) {
            changed = false;
            for (uint32_t r = 0; r < n; ++r) {
                if (g_.nullable[r]) continue;
                for (const Sequence& s : alts_[r]) {
                    bool all = true;
                    for (const Element& el : s)
                        all = all && (el.star || (el.counted() && el.min == 0) ||
                                      (el.kind == Element::kRule && g_.nullable[el.arg]));
                    if (all) {
                        g_.nullable[r] = 1;
                        changed = true;
                        break;
                    }
                }
            }
        }
        // A nullable rule repeated min..max times: the missing iterations can be empty ones.
        for (Element& el : g_.program)
            if (el.counted() && el.kind == Element::kRule && g_.nullable[el.arg]) el.min = 0;
        return std::move(g_);
    }

    const GrammarSource& src_;
    Grammar g_;
    std::unordered_map<std::string, uint32_t> ids_;
    std::vector<std::vector<Sequence>> alts_;
    std::vector<std::string> names_;
    std::map<std::array<uint64_t, 4>, uint32_t> set_ids_;
    std::string error_;
};

}  // namespace

Result<Grammar> compile_grammar(const GrammarSource& source) {
    return Lowering(source).run();
}

}  // namespace pagoda::grammar
