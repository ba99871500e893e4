// StopStringMatcher against a direct model of vLLM's check_stop_strings run one character at a
// time (as vLLM does token by token): the first point where the text ends with a stop string
// stops it, the earlier stop in the list winning a tie; the output is cut before the stop string
// (or after it with include_stop_str_in_output).
#include "chat/output/stop_strings.h"

#include <gtest/gtest.h>

#include <random>

#include "chunking.h"

namespace pagoda::chat {
namespace {

struct Outcome {
    std::string text;
    bool stopped = false;
    int index = -1;
};

Outcome reference(std::string_view text, const std::vector<std::string>& stops, bool include) {
    for (size_t end = 1; end <= text.size(); ++end) {
        for (size_t i = 0; i < stops.size(); ++i) {
            const std::string& s = stops[i];
            if (s.empty() || s.size() > end || text.substr(end - s.size(), s.size()) != s) continue;
            return {std::string(text.substr(0, include ? end : end - s.size())), true, static_cast<int>(i)};
        }
    }
    return {std::string(text), false, -1};
}

Outcome run(const testing::Chunks& chunks, const std::vector<std::string>& stops, bool include) {
    StopStringMatcher m(stops, include);
    Outcome o;
    for (auto c : chunks) {
        if (m.feed(c, o.text)) break;
    }
    if (!m.stopped()) m.finish(o.text);
    o.stopped = m.stopped();
    o.index = m.matched_index();
    return o;
}

void check(std::string_view text, const std::vector<std::string>& stops) {
    for (bool include : {false, true}) {
        const Outcome want = reference(text, stops, include);
        for (const auto& chunks : testing::all_chunkings(text, 10)) {
            const Outcome got = run(chunks, stops, include);
            ASSERT_EQ(got.text, want.text) << "text: " << text << " include: " << include;
            ASSERT_EQ(got.stopped, want.stopped);
            ASSERT_EQ(got.index, want.index);
        }
    }
}

TEST(StopStrings, Basic) {
    check("Hello world. STOP here", {"STOP"});
    check("no stop in here", {"STOP"});
    check("abcabd", {"abd", "cab"});
    check("aaaab", {"aab", "aaaa"});
    check("x</s>y", {"</s>", "s>"});
    check("\xE4\xBD\xA0\xE5\xA5\xBD\xE5\x86\x8D\xE8\xA7\x81", {"\xE5\x86\x8D"});
    check("ends with partial ST", {"STOP"});
    check("anything", {});
    check("anything", {""});
}

TEST(StopStrings, HoldsBackOnlyPossibleStarts) {
    StopStringMatcher m({"Hello"});
    std::string out;
    EXPECT_FALSE(m.feed("Say Hel", out));
    EXPECT_EQ(out, "Say ");  // "Hel" may still become "Hello"
    EXPECT_FALSE(m.feed("p", out));
    EXPECT_EQ(out, "Say Help");
    EXPECT_TRUE(m.feed("! Hello there", out));
    EXPECT_EQ(out, "Say Help! ");
    EXPECT_EQ(m.matched_string(), "Hello");
    EXPECT_TRUE(m.feed("more", out));
    EXPECT_EQ(out, "Say Help! ");
}

TEST(StopStrings, RandomAgainstReference) {
    std::mt19937 rng(7);
    for (int iter = 0; iter < 300; ++iter) {
        std::string text;
        const int n = std::uniform_int_distribution<int>(0, 24)(rng);
        for (int i = 0; i < n; ++i)
            text.push_back(static_cast<char>('a' + std::uniform_int_distribution<int>(0, 2)(rng)));
        std::vector<std::string> stops;
        const int k = std::uniform_int_distribution<int>(1, 3)(rng);
        for (int j = 0; j < k; ++j) {
            std::string s;
            const int len = std::uniform_int_distribution<int>(1, 4)(rng);
            for (int i = 0; i < len; ++i)
                s.push_back(static_cast<char>('a' + std::uniform_int_distribution<int>(0, 2)(rng)));
            stops.push_back(s);
        }
        check(text, stops);
        if (::testing::Test::HasFailure()) return;
    }
}

}  // namespace
}  // namespace pagoda::chat
