// The Unicode knowledge the tokenizer needs, matched to what Hugging Face `tokenizers` uses:
// regex classes as its Oniguruma sees them (generated table), NFC as its normalizer does it
// (Unicode 9.0 data), and the Rust char predicates its added-token flags rely on.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pagoda::tokenizer_internal {

enum CodepointClass : uint8_t { kClassLetter = 1, kClassNumber = 2, kClassMark = 4, kClassSpace = 8 };

struct CodepointRange {
    uint32_t lo, hi;
};

namespace detail {
extern const uint8_t kAsciiClass[128];
uint8_t non_ascii_class(char32_t cp);
}  // namespace detail

// Bit set of CodepointClass for `cp` (\p{L}, \p{N}, \p{M}, \s of the reference regex engine).
inline uint8_t codepoint_class(char32_t cp) {
    return cp < 128 ? detail::kAsciiClass[cp] : detail::non_ascii_class(cp);
}

// \s and \w of Rust's regex crate, which HF uses for the lstrip/rstrip/single_word flags:
// White_Space, and Alphabetic | M | Nd | Pc | Join_Control.
bool is_rust_regex_space(char32_t cp);
bool is_rust_regex_word(char32_t cp);

// True when `s` (valid UTF-8) is certainly unchanged by NFC (cheap; ASCII is always NFC).
bool is_nfc_quick(std::string_view s);
// Appends NFC(s) as HF's NFC normalizer computes it: Unicode 9.0 data, later code points pass through.
void append_nfc(std::string_view s, std::string& out);

// Decodes the code point at s[pos] of valid UTF-8; sets `len` to its byte length.
inline char32_t decode_utf8_at(std::string_view s, size_t pos, int& len) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + pos;
    const unsigned char b0 = p[0];
    if (b0 < 0x80) {
        len = 1;
        return b0;
    }
    if (b0 < 0xE0) {
        len = 2;
        return (char32_t(b0 & 0x1F) << 6) | (p[1] & 0x3F);
    }
    if (b0 < 0xF0) {
        len = 3;
        return (char32_t(b0 & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    }
    len = 4;
    return (char32_t(b0 & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) | (char32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

}  // namespace pagoda::tokenizer_internal
