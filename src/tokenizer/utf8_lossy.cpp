// UTF-8 repair with "substitution of maximal subparts" (Unicode ch. 3, U+FFFD practice).
#include "tokenizer/utf8_lossy.h"

namespace pagoda::tokenizer_internal {

int utf8_step(std::string_view s, size_t pos) {
    const auto b0 = static_cast<unsigned char>(s[pos]);
    if (b0 < 0x80) return 1;
    int need;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else {
        return -1;
    }
    const size_t n = s.size();
    for (int i = 1; i <= need; ++i) {
        if (pos + i >= n) return 0;
        const auto b = static_cast<unsigned char>(s[pos + i]);
        const bool in_range = i == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
        if (!in_range) return -i;
    }
    return need + 1;
}

static size_t append_impl(std::string_view s, std::string& out, bool final) {
    size_t pos = 0, run = 0;  // [run, pos) is well-formed and not yet copied
    const size_t n = s.size();
    while (pos < n) {
        if (static_cast<unsigned char>(s[pos]) < 0x80) {
            ++pos;
            continue;
        }
        const int step = utf8_step(s, pos);
        if (step > 0) {
            pos += static_cast<size_t>(step);
            continue;
        }
        out.append(s.substr(run, pos - run));
        if (step == 0) {
            if (!final) return n - pos;
            out.append(kReplacementChar);
            return 0;
        }
        out.append(kReplacementChar);
        pos += static_cast<size_t>(-step);
        run = pos;
    }
    out.append(s.substr(run, pos - run));
    return 0;
}

void append_utf8_lossy(std::string_view s, std::string& out) {
    append_impl(s, out, true);
}

size_t append_utf8_lossy_prefix(std::string_view s, std::string& out) {
    return append_impl(s, out, false);
}

}  // namespace pagoda::tokenizer_internal
