#include "common/bounded_regex.h"

#include <algorithm>
#include <cstdint>
#include <string_view>

namespace pagoda {

namespace {

// The deepest nesting of groups in a pattern and its largest counted repetition ({n}, {n,m}: the executor copies the
// repeated part that many times, and a search costs the name's length squared times the copies), escapes and classes
// skipped.
struct Shape {
    int deepest = 0;
    int64_t largest_count = 0;
};
Shape shape_of(std::string_view pattern) {
    Shape s;
    int depth = 0;
    bool in_class = false;
    for (size_t i = 0; i < pattern.size(); ++i) {
        const char ch = pattern[i];
        if (ch == '\\') {
            ++i;
        } else if (in_class) {
            in_class = ch != ']';
        } else if (ch == '[') {
            in_class = true;
        } else if (ch == '(') {
            s.deepest = std::max(s.deepest, ++depth);
        } else if (ch == ')') {
            depth = std::max(depth - 1, 0);
        } else if (ch == '{') {
            int64_t n = 0;
            for (size_t j = i + 1; j < pattern.size() && n <= kMaxRegexCount; ++j) {
                const char d = pattern[j];
                if (d >= '0' && d <= '9') {
                    n = n * 10 + (d - '0');
                } else {
                    s.largest_count = std::max(s.largest_count, n);
                    n = 0;
                    if (d != ',') break;
                }
            }
            s.largest_count = std::max(s.largest_count, n);
        }
    }
    return s;
}

}  // namespace

Result<std::regex> compile_bounded_regex(const std::string& pattern) {
    if (pattern.size() > kMaxRegexBytes)
        return Status::error("is longer than " + std::to_string(kMaxRegexBytes) + " bytes");
    const Shape shape = shape_of(pattern);
    if (shape.deepest > kMaxRegexGroupDepth)
        return Status::error("nests groups deeper than " + std::to_string(kMaxRegexGroupDepth));
    if (shape.largest_count > kMaxRegexCount)
        return Status::error("repeats a part more than " + std::to_string(kMaxRegexCount) + " times");
    try {
#if defined(__GLIBCXX__)
        return std::regex(pattern, std::regex::ECMAScript | std::regex_constants::__polynomial);
#else
#error "compile_bounded_regex needs a regex executor whose matching time is polynomial"
#endif
    } catch (const std::regex_error& e) {
        return Status::error("is not a regular expression this server reads (" + std::string(e.what()) + ")");
    }
}

}  // namespace pagoda
