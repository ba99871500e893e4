// UTF-8 repair as Rust's String::from_utf8_lossy and Python's decode(errors="replace") do it:
// each maximal subpart of an ill-formed sequence becomes one U+FFFD.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pagoda::tokenizer_internal {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

// Length of the well-formed sequence at s[pos] (> 0), or -k for an ill-formed maximal subpart of k
// bytes, or 0 when s ends inside a sequence that could still become well-formed.
int utf8_step(std::string_view s, size_t pos);

// Appends `s` with ill-formed parts replaced; an unfinished sequence at the end becomes U+FFFD too.
void append_utf8_lossy(std::string_view s, std::string& out);

// Appends the final text of `s` and returns how many bytes at the end are an unfinished sequence
// that was held back (0..3).
size_t append_utf8_lossy_prefix(std::string_view s, std::string& out);

}  // namespace pagoda::tokenizer_internal
