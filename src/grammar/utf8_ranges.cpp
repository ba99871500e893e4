// The splitting follows the structure of UTF-8: first by encoded length, then until every continuation byte covers
// its whole range or a single prefix, at which point the encodings of lo and hi bound each byte independently.
#include "grammar/utf8_ranges.h"

namespace pagoda::grammar {

namespace {

int encode(uint32_t cp, uint8_t* b) {
    if (cp < 0x80) {
        b[0] = static_cast<uint8_t>(cp);
        return 1;
    }
    if (cp < 0x800) {
        b[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
        b[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        b[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
        b[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
        b[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
        return 3;
    }
    b[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
    b[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
    b[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    b[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 4;
}

}  // namespace

void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<ByteRangeSeq>& out) {
    if (lo > hi) return;
    for (uint32_t boundary : {0x7Fu, 0x7FFu, 0xFFFFu}) {
        if (lo <= boundary && hi > boundary) {
            utf8_sequences(lo, boundary, out);
            utf8_sequences(boundary + 1, hi, out);
            return;
        }
    }
    if (hi < 0x80) {
        out.push_back({{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
        return;
    }
    for (int i = 1; i < 4; ++i) {
        const uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                utf8_sequences(lo, lo | m, out);
                utf8_sequences((lo | m) + 1, hi, out);
                return;
            }
            if ((hi & m) != m) {
                utf8_sequences(lo, (hi & ~m) - 1, out);
                utf8_sequences(hi & ~m, hi, out);
                return;
            }
        }
    }
    uint8_t a[4], b[4];
    const int n = encode(lo, a);
    encode(hi, b);
    ByteRangeSeq s;
    for (int i = 0; i < n; ++i)
        s.push_back({a[i], b[i]});
    out.push_back(std::move(s));
}

}  // namespace pagoda::grammar
