#include "common/utf8.h"

#include <gtest/gtest.h>

namespace pagoda {
namespace {

TEST(Utf8, AcceptsWellFormedText) {
    EXPECT_TRUE(utf8_is_valid(""));
    EXPECT_TRUE(utf8_is_valid("plain ascii"));
    EXPECT_TRUE(utf8_is_valid("h\xC3\xA9llo \xE4\xB8\xAD \xF0\x9F\x98\x80"));
    EXPECT_TRUE(utf8_is_valid("\xF4\x8F\xBF\xBF"));  // U+10FFFF
}

TEST(Utf8, FindsTheFirstInvalidByte) {
    EXPECT_EQ(utf8_find_invalid("ab\xC0\xAF"), 2u);          // overlong '/'
    EXPECT_EQ(utf8_find_invalid("a\xED\xA0\x80"), 1u);       // surrogate U+D800
    EXPECT_EQ(utf8_find_invalid("\xF4\x90\x80\x80"), 0u);    // above U+10FFFF
    EXPECT_EQ(utf8_find_invalid("abc\xE4\xB8"), 3u);         // truncated
    EXPECT_EQ(utf8_find_invalid("\x80"), 0u);                // lone continuation
    EXPECT_EQ(utf8_find_invalid("\xE0\x80\x80"), 0u);        // overlong 3-byte
}

TEST(Utf8, DecodeAndAppendRoundTripEveryScalarValue) {
    for (char32_t cp = 0; cp <= 0x10FFFF; cp += (cp < 0x3000 ? 1 : 97)) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        std::string s;
        utf8_append(s, cp);
        ASSERT_TRUE(utf8_is_valid(s)) << static_cast<uint32_t>(cp);
        size_t pos = 0;
        ASSERT_EQ(static_cast<uint32_t>(utf8_decode(s, pos)), static_cast<uint32_t>(cp));
        ASSERT_EQ(pos, s.size());
    }
}

TEST(Utf8, InvalidBytesDecodeToReplacementOneByteAtATime) {
    std::string s = "\xFF" "a";
    size_t pos = 0;
    EXPECT_EQ(static_cast<uint32_t>(utf8_decode(s, pos)), 0xFFFDu);
    EXPECT_EQ(pos, 1u);
    EXPECT_EQ(static_cast<uint32_t>(utf8_decode(s, pos)), 0x61u);
    std::string out;
    utf8_append(out, 0xD800);
    EXPECT_EQ(out, "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace pagoda
