// Small string helpers shared by the streaming output parsers (internal to chat/output).
#pragma once

#include <cstddef>
#include <string_view>

namespace pagoda::chat {

// Length of the longest proper suffix of `text` that is a prefix of `tag`: the bytes a streaming
// parser must hold back because the next chunk may complete the tag.
inline size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
    const size_t max_len = tag.size() > 0 ? tag.size() - 1 : 0;
    for (size_t len = text.size() < max_len ? text.size() : max_len; len > 0; --len) {
        if (text.substr(text.size() - len) == tag.substr(0, len)) return len;
    }
    return 0;
}

inline bool is_json_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

inline bool is_blank(std::string_view s) {
    for (char c : s) {
        if (!is_json_space(c)) return false;
    }
    return true;
}

}  // namespace pagoda::chat
