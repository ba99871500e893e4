// Whole-string acceptance through the real lowering and Earley recognizer, for the grammar tests.
#pragma once

#include <string_view>

#include "grammar/earley.h"
#include "grammar/grammar.h"

namespace pagoda::grammar::testing {

inline bool full_match(const Grammar& g, std::string_view s) {
    EarleyState st(g);
    for (unsigned char c : s)
        if (!st.advance(c)) return false;
    return st.can_end();
}

}  // namespace pagoda::grammar::testing
