// UTF-8 helpers: validation, decoding and encoding of code points.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pagoda {

// Index of the first byte of an invalid or truncated sequence, or npos when `s` is valid UTF-8
// (no overlongs, no surrogates, nothing above U+10FFFF).
size_t utf8_find_invalid(std::string_view s);
inline bool utf8_is_valid(std::string_view s) {
    return utf8_find_invalid(s) == std::string_view::npos;
}

// Decodes the code point starting at s[pos] and advances pos. An invalid byte yields U+FFFD
// and advances by one byte.
char32_t utf8_decode(std::string_view s, size_t& pos);

// Appends the UTF-8 encoding of `cp` (U+FFFD for values that are not scalar values).
void utf8_append(std::string& out, char32_t cp);

// Code points in UTF-8 text (bytes that are not continuation bytes): what Python's len() counts.
size_t utf8_length(std::string_view s);

// Length of the sequence a lead byte announces (1..4), or 0 for a continuation/invalid byte.
int utf8_sequence_length(unsigned char lead);

}  // namespace pagoda
