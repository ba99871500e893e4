#include "grammar/int_range.h"

#include <string>

namespace pagoda::grammar {

namespace {

Expr digit_range(char lo, char hi) {
    return cls({{static_cast<uint32_t>(lo), static_cast<uint32_t>(hi)}});
}

Expr any_digits(int32_t n) {
    return repeat(digit_range('0', '9'), n, n);
}

// Equal-length digit strings lo <= hi: every string of that length between them.
Expr same_length(const std::string& lo, const std::string& hi) {
    const size_t n = lo.size();
    if (n == 1) return digit_range(lo[0], hi[0]);
    const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
    if (lo[0] == hi[0]) return seq({lit(std::string(1, lo[0])), same_length(lo_rest, hi_rest)});
    const int32_t rest = static_cast<int32_t>(n - 1);
    if (lo_rest == std::string(n - 1, '0') && hi_rest == std::string(n - 1, '9'))
        return seq({digit_range(lo[0], hi[0]), any_digits(rest)});
    std::vector<Expr> alts;
    alts.push_back(seq({lit(std::string(1, lo[0])), same_length(lo_rest, std::string(n - 1, '9'))}));
    if (lo[0] + 1 <= hi[0] - 1)
        alts.push_back(
            seq({digit_range(static_cast<char>(lo[0] + 1), static_cast<char>(hi[0] - 1)), any_digits(rest)}));
    alts.push_back(seq({lit(std::string(1, hi[0])), same_length(std::string(n - 1, '0'), hi_rest)}));
    return alt(std::move(alts));
}

uint64_t power10(size_t n) {
    uint64_t p = 1;
    while (n--)
        p *= 10;
    return p;
}

// Non-negative integers in [a, b] (b unset: unbounded).
Expr natural_range(uint64_t a, std::optional<uint64_t> b) {
    const std::string sa = std::to_string(a);
    std::vector<Expr> alts;
    const size_t max_len = b ? std::to_string(*b).size() : sa.size();
    for (size_t len = sa.size(); len <= max_len; ++len) {
        const uint64_t first = len == 1 ? 0 : power10(len - 1);
        const uint64_t last = len >= 20 ? UINT64_MAX : power10(len) - 1;
        const uint64_t lo = std::max(a, first), hi = b ? std::min(*b, last) : last;
        if (lo <= hi) alts.push_back(same_length(std::to_string(lo), std::to_string(hi)));
    }
    if (!b)
        alts.push_back(
            seq({digit_range('1', '9'), repeat(digit_range('0', '9'), static_cast<int32_t>(sa.size()), -1)}));
    return alt(std::move(alts));
}

uint64_t magnitude(int64_t v) {
    return v < 0 ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v);
}

}  // namespace

Expr integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
    std::vector<Expr> alts;
    if (!lo || *lo < 0) {
        // Negative part: magnitudes in [max(1, -hi), -lo].
        const uint64_t min_mag = hi && *hi < 0 ? magnitude(*hi) : 1;
        std::optional<uint64_t> max_mag;
        if (lo) max_mag = magnitude(*lo);
        alts.push_back(seq({lit("-"), natural_range(min_mag, max_mag)}));
    }
    if (!hi || *hi >= 0) {
        const uint64_t a = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
        std::optional<uint64_t> b;
        if (hi) b = static_cast<uint64_t>(*hi);
        alts.push_back(natural_range(a, b));
    }
    return alt(std::move(alts));
}

}  // namespace pagoda::grammar
