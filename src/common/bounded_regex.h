// Regular expressions that come from files a user hands pagoda (an adapter's target_modules, a quantization config's
// module rules), compiled so that no pattern can take the process down: their length and nesting are bounded
// (libstdc++ compiles groups recursively, and 20,000 nested ones overflow the stack), so are counted repetitions (each
// copies the repeated part into the automaton: search time grows with the copies), and they run on libstdc++'s
// breadth-first executor, in polynomial time (the default backtracking one takes exponential time on a pattern like
// (.*)*x against a module name: a hung load). Lookahead works; backreferences are refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <regex>
#include <string>

#include "common/status.h"

namespace pagoda {

constexpr size_t kMaxRegexBytes = 4096;
constexpr int kMaxRegexGroupDepth = 64;
constexpr int64_t kMaxRegexCount = 64;  // the largest {n} or {n,m}: (.?){3000}z took 0.2-0.5 s a search

// An error that says what is wrong with the pattern ("is longer than 4096 bytes", "nests groups deeper than 64", "is
// not a regular expression this server reads (...)"), to follow the pattern's own description.
Result<std::regex> compile_bounded_regex(const std::string& pattern);

}  // namespace pagoda
