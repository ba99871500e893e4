// Hand-written equivalent of Oniguruma running the Qwen split patterns (leftmost-first alternation,
// greedy quantifiers with backtracking). Each alternative's comment is the part of the pattern it is.
#include "tokenizer/pretokenizer.h"

#include "tokenizer/unicode.h"

namespace pagoda::tokenizer_internal {

Result<SplitPattern> recognize_split_pattern(std::string_view regex) {
    if (regex == kQwen2Pattern) return SplitPattern::kQwen2;
    if (regex == kQwen35Pattern) return SplitPattern::kQwen35;
    return Status::error("unsupported pre-tokenizer regex (only the Qwen2/Qwen3 and Qwen3.5 patterns are known): " +
                         std::string(regex));
}

namespace {

// (?i:'s|'t|'re|'ve|'m|'ll|'d): Oniguruma's case folding also lets U+017F (long s) match 's'.
size_t match_contraction(std::string_view t, size_t pos) {
    const size_t n = t.size();
    if (pos + 1 >= n) return 0;
    auto lower = [](char c) { return static_cast<char>(c | 0x20); };
    const char c1 = lower(t[pos + 1]);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return pos + 2;
    if (t[pos + 1] == '\xC5' && pos + 2 < n && t[pos + 2] == '\xBF') return pos + 3;  // U+017F
    if (pos + 2 < n) {
        const char c2 = lower(t[pos + 2]);
        if ((c1 == 'r' || c1 == 'v') && c2 == 'e') return pos + 3;
        if (c1 == 'l' && c2 == 'l') return pos + 3;
    }
    return 0;
}

template <bool kWithMarks>
size_t match_piece_impl(std::string_view t, size_t pos) {
    const size_t n = t.size();
    constexpr uint8_t kLetterLike = kWithMarks ? (kClassLetter | kClassMark) : kClassLetter;
    constexpr uint8_t kNotPunct = kWithMarks ? (kClassSpace | kClassLetter | kClassMark | kClassNumber)
                                             : (kClassSpace | kClassLetter | kClassNumber);
    auto run_end = [&](size_t p, uint8_t want_any, bool negate) {
        while (p < n) {
            int len;
            const uint8_t cls = codepoint_class(decode_utf8_at(t, p, len));
            const bool in = (cls & want_any) != 0;
            if (in == negate) break;
            p += static_cast<size_t>(len);
        }
        return p;
    };

    int len0;
    const char32_t c0 = decode_utf8_at(t, pos, len0);
    const uint8_t cls0 = codepoint_class(c0);
    const size_t after0 = pos + static_cast<size_t>(len0);

    if (c0 == '\'') {
        if (size_t end = match_contraction(t, pos)) return end;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+   (Qwen3.5: [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+)
    if (cls0 & kLetterLike) return run_end(after0, kLetterLike, false);
    if (c0 != '\r' && c0 != '\n' && !(cls0 & (kClassLetter | kClassNumber)) && after0 < n) {
        int len1;
        if (codepoint_class(decode_utf8_at(t, after0, len1)) & kLetterLike) return run_end(after0, kLetterLike, false);
    }
    // \p{N}
    if (cls0 & kClassNumber) return after0;
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'   (Qwen3.5 also excludes \p{M})
    size_t punct_start = n;
    if (!(cls0 & kNotPunct)) {
        punct_start = pos;
    } else if (c0 == ' ' && after0 < n) {
        int len1;
        if (!(codepoint_class(decode_utf8_at(t, after0, len1)) & kNotPunct)) punct_start = after0;
    }
    if (punct_start != n) {
        size_t end = run_end(punct_start, kNotPunct, true);
        while (end < n && (t[end] == '\r' || t[end] == '\n'))
            ++end;
        return end;
    }
    // Whitespace from here on (every other code point matched above).
    size_t end = pos, last_start = pos, last_newline_end = 0;
    while (end < n) {
        int len;
        const char32_t c = decode_utf8_at(t, end, len);
        if (!(codepoint_class(c) & kClassSpace)) break;
        last_start = end;
        end += static_cast<size_t>(len);
        if (c == '\r' || c == '\n') last_newline_end = end;
    }
    if (end == pos) return after0;  // unreachable with the class table; keeps the scan advancing
    // \s*[\r\n]+ : backtracking leaves the match ending just after the run's last \r or \n.
    if (last_newline_end != 0) return last_newline_end;
    // \s+(?!\S) : the whole run at the end of text, else all but its last code point.
    if (end == n) return end;
    if (last_start > pos) return last_start;
    // \s+
    return end;
}

}  // namespace

size_t match_piece(SplitPattern pattern, std::string_view text, size_t pos) {
    return pattern == SplitPattern::kQwen35 ? match_piece_impl<true>(text, pos) : match_piece_impl<false>(text, pos);
}

}  // namespace pagoda::tokenizer_internal
