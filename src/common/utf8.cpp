#include "common/utf8.h"

namespace pagoda {

int utf8_sequence_length(unsigned char lead) {
    if (lead < 0x80) return 1;
    if (lead >= 0xC2 && lead <= 0xDF) return 2;
    if (lead >= 0xE0 && lead <= 0xEF) return 3;
    if (lead >= 0xF0 && lead <= 0xF4) return 4;
    return 0;
}

namespace {

// Decodes one well-formed sequence at s[pos]; returns its length, or 0 when ill-formed
// (overlong, surrogate, above U+10FFFF, truncated, bad continuation).
int decode_one(std::string_view s, size_t pos, char32_t& cp) {
    const auto b0 = static_cast<unsigned char>(s[pos]);
    const int len = utf8_sequence_length(b0);
    if (len == 0 || pos + len > s.size()) return 0;
    if (len == 1) {
        cp = b0;
        return 1;
    }
    char32_t value = b0 & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
        const auto b = static_cast<unsigned char>(s[pos + i]);
        if ((b & 0xC0) != 0x80) return 0;
        value = (value << 6) | (b & 0x3F);
    }
    if (len == 3 && (value < 0x800 || (value >= 0xD800 && value <= 0xDFFF))) return 0;
    if (len == 4 && (value < 0x10000 || value > 0x10FFFF)) return 0;
    cp = value;
    return len;
}

}  // namespace

size_t utf8_find_invalid(std::string_view s) {
    size_t pos = 0;
    while (pos < s.size()) {
        if (static_cast<unsigned char>(s[pos]) < 0x80) {
            ++pos;
            continue;
        }
        char32_t cp;
        const int len = decode_one(s, pos, cp);
        if (len == 0) return pos;
        pos += len;
    }
    return std::string_view::npos;
}

char32_t utf8_decode(std::string_view s, size_t& pos) {
    char32_t cp = 0xFFFD;
    const int len = decode_one(s, pos, cp);
    if (len == 0) {
        pos += 1;
        return 0xFFFD;
    }
    pos += len;
    return cp;
}

void utf8_append(std::string& out, char32_t cp) {
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

size_t utf8_length(std::string_view s) {
    size_t n = 0;
    for (unsigned char c : s)
        n += (c & 0xC0) != 0x80;
    return n;
}

}  // namespace pagoda
