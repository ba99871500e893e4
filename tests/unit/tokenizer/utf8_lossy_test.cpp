// U+FFFD substitution of maximal subparts; expectations are Python's bytes.decode("utf-8", "replace").
#include "tokenizer/utf8_lossy.h"

#include <gtest/gtest.h>

namespace pagoda::tokenizer_internal {
namespace {

std::string lossy(std::string_view s) {
    std::string out;
    append_utf8_lossy(s, out);
    return out;
}

const std::string R = "\xEF\xBF\xBD";

TEST(Utf8Lossy, MaximalSubparts) {
    EXPECT_EQ(lossy("\xE0\x80\x80"), R + R + R);
    EXPECT_EQ(lossy("\xF0\x9F\x98"), R);
    EXPECT_EQ(lossy("\xED\xA0\x80"), R + R + R);
    EXPECT_EQ(lossy("\xC3("), R + "(");
    EXPECT_EQ(lossy("\xF4\x90\x80\x80"), R + R + R + R);
    EXPECT_EQ(lossy("a\xF0\x9F\x98\x80"
                    "b"),
              "a\xF0\x9F\x98\x80"
              "b");
    EXPECT_EQ(lossy("\xE2\x82"), R);
    EXPECT_EQ(lossy("\xFF\xFE"), R + R);
}

TEST(Utf8Lossy, PrefixHoldsBackAnUnfinishedSequence) {
    std::string out;
    EXPECT_EQ(append_utf8_lossy_prefix("ab\xF0\x9F", out), 2u);
    EXPECT_EQ(out, "ab");
    out.clear();
    EXPECT_EQ(append_utf8_lossy_prefix("ab\xF0(", out), 0u);
    EXPECT_EQ(out, "ab" + R + "(");
}

}  // namespace
}  // namespace pagoda::tokenizer_internal
