// Codepoint ranges as UTF-8 byte-range sequences: [U+0080, U+07FF] is [C2-DF][80-BF], and so on. A character class
// becomes the alternatives of these sequences, which is what lets the matcher work on bytes alone.
#pragma once

#include <cstdint>
#include <vector>

namespace pagoda::grammar {

struct ByteRange {
    uint8_t lo = 0, hi = 0;
};
using ByteRangeSeq = std::vector<ByteRange>;  // one to four ranges: each byte of the encoding in its range

// Appends to `out` sequences whose byte strings are exactly the UTF-8 encodings of [lo, hi] (no surrogates in it).
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<ByteRangeSeq>& out);

}  // namespace pagoda::grammar
