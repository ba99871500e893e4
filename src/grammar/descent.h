// What the regex and GBNF parsers share: the text and a position, and the alternation rule both read the same way
// (sequences separated by '|'), each with its own notion of a sequence and of an error (Derived::sequence, fail).
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "grammar/expr.h"

namespace pagoda::grammar {

template <typename Derived>
class Descent {
  protected:
    explicit Descent(std::string_view text) : t_(text) {}

    bool at(char c) const { return i_ < t_.size() && t_[i_] == c; }

    Expr alternatives(int depth) {
        Derived& self = static_cast<Derived&>(*this);
        if (depth > 200) self.fail("groups nested too deeply");
        std::vector<Expr> alts{self.sequence(depth)};
        while (at('|')) {
            ++i_;
            alts.push_back(self.sequence(depth));
        }
        return alt(std::move(alts));
    }

    std::string_view t_;
    size_t i_ = 0;
};

}  // namespace pagoda::grammar
