#include "common/bounded_regex.h"

#include <algorithm>
#include <string_view>

namespace pagoda {

namespace {

// The deepest nesting of groups in a pattern (escapes and classes skipped).
int group_depth(std::string_view pattern) {
    int depth = 0, deepest = 0;
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
            deepest = std::max(deepest, ++depth);
        } else if (ch == ')') {
            depth = std::max(depth - 1, 0);
        }
    }
    return deepest;
}

}  // namespace

Result<std::regex> compile_bounded_regex(const std::string& pattern) {
    if (pattern.size() > kMaxRegexBytes)
        return Status::error("is longer than " + std::to_string(kMaxRegexBytes) + " bytes");
    if (group_depth(pattern) > kMaxRegexGroupDepth)
        return Status::error("nests groups deeper than " + std::to_string(kMaxRegexGroupDepth));
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
