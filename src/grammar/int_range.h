// Decimal integers in a range as a grammar expression: JSON Schema's minimum/maximum on integers. The digits are
// constrained position by position, as a range regex is built: [13, 247] is 1[3-9] | [2-9][0-9] | 1[0-9][0-9] |
// 2[0-3][0-9] | 24[0-7].
#pragma once

#include <cstdint>
#include <optional>

#include "grammar/expr.h"

namespace pagoda::grammar {

// The JSON spellings ("-12", "0", no leading zeros, no "-0") of the integers in [lo, hi]; nullopt = unbounded.
// Requires lo <= hi when both are set.
Expr integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace pagoda::grammar
