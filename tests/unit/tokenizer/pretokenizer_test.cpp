// Piece boundaries of the Qwen split patterns; expectations are HF tokenizers 0.23.3's
// pre_tokenizers.Split(Regex(pattern), "isolated") on the same strings.
#include "tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pagoda::tokenizer_internal {
namespace {

std::vector<std::string> pieces(SplitPattern p, std::string_view s) {
    std::vector<std::string> out;
    for (size_t pos = 0; pos < s.size();) {
        const size_t end = match_piece(p, s, pos);
        out.emplace_back(s.substr(pos, end - pos));
        pos = end;
    }
    return out;
}

using V = std::vector<std::string>;

TEST(Pretokenizer, Qwen2Pattern) {
    const auto q = SplitPattern::kQwen2;
    EXPECT_EQ(pieces(q, "Hello world!!\n\n  x  "), (V{"Hello", " world", "!!\n\n", " ", " x", "  "}));
    EXPECT_EQ(pieces(q, "I'M 'S don't"), (V{"I", "'M", " '", "S", " don", "'t"}));
    EXPECT_EQ(pieces(q, "a1234b"), (V{"a", "1", "2", "3", "4", "b"}));
    EXPECT_EQ(pieces(q, "  \r\n\t y\xE3\x80\x80\xE3\x80\x80z"),
              (V{"  \r\n", "\t", " y", "\xE3\x80\x80", "\xE3\x80\x80z"}));
    EXPECT_EQ(pieces(q, " ...\r\n."), (V{" ...\r\n", "."}));
    EXPECT_EQ(pieces(q,
                     "\xCC\x81"
                     "abc \xCC\x81"),
              (V{"\xCC\x81"
                 "abc",
                 " \xCC\x81"}));
}

TEST(Pretokenizer, RecognisesOnlyKnownPatterns) {
    EXPECT_EQ(recognize_split_pattern(kQwen2Pattern).value(), SplitPattern::kQwen2);
    EXPECT_EQ(recognize_split_pattern(kQwen35Pattern).value(), SplitPattern::kQwen35);
    EXPECT_FALSE(recognize_split_pattern("\\p{L}+").ok());
}

}  // namespace
}  // namespace pagoda::tokenizer_internal
