// Scanning helpers shared by the streaming tool-call and reasoning parsers (internal to chat/output): where a tag
// stands in text that may still be growing, and the plain text between calls that both call formats share.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
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

// The first position at or after `pos` that is not JSON whitespace (text.size() when there is none).
inline size_t skip_json_space(std::string_view text, size_t pos) {
    while (pos < text.size() && is_json_space(text[pos]))
        ++pos;
    return pos;
}

// Where `text` at `pos` stands against `tag`: the whole tag, a possible start of it (the text ends first), or not it.
enum class TagMatch { kNo, kPartial, kFull };
inline TagMatch match_at(std::string_view text, size_t pos, std::string_view tag) {
    const std::string_view rest = text.substr(pos);
    if (rest.size() >= tag.size()) return rest.substr(0, tag.size()) == tag ? TagMatch::kFull : TagMatch::kNo;
    return tag.substr(0, rest.size()) == rest ? TagMatch::kPartial : TagMatch::kNo;
}

// The earliest complete tag of `tags` in `text` (empty tags are skipped), and in `hold` how many trailing bytes
// could start one.
struct TagAt {
    size_t pos = std::string_view::npos;
    size_t which = 0;  // index into tags
};
inline TagAt find_earliest_tag(std::string_view text, std::span<const std::string_view> tags, size_t& hold) {
    TagAt best;
    hold = 0;
    for (size_t i = 0; i < tags.size(); ++i) {
        if (tags[i].empty()) continue;
        const size_t p = text.find(tags[i]);
        if (p < best.pos) best = {p, i};
        hold = std::max(hold, partial_tag_suffix(text, tags[i]));
    }
    return best;
}

// Where to resume searching for `tag` in text of `size` bytes in which it was not found: only a partial tag at the
// end can still become one.
inline size_t resume_search_at(size_t size, std::string_view tag) {
    return size >= tag.size() ? size - tag.size() + 1 : 0;
}

// The plain text of a tool-call format, up to a call: moves the text before the earliest complete opening tag of
// `open_tags` to `content`, erases it and the tag from `text`, and returns the tag's index. Without a complete tag it
// moves all but a possible start of one (everything `at_end`) and returns nullopt. After a call (`after_call`),
// whitespace is held back and dropped when another call follows, as vLLM's parsers drop it; anything else ends that.
inline std::optional<size_t> take_text_until_call(std::string& text, std::span<const std::string_view> open_tags,
                                                  bool at_end, bool& after_call, std::string& content) {
    if (after_call) {
        const size_t p = skip_json_space(text, 0);
        if (p == text.size()) return std::nullopt;
        for (size_t i = 0; i < open_tags.size(); ++i) {
            const TagMatch m = match_at(text, p, open_tags[i]);
            if (m == TagMatch::kFull) {
                text.erase(0, p + open_tags[i].size());
                return i;
            }
            if (m == TagMatch::kPartial && !at_end) return std::nullopt;
        }
        after_call = false;
    }
    size_t hold = 0;
    const TagAt tag = find_earliest_tag(text, open_tags, hold);
    if (tag.pos != std::string_view::npos) {
        content.append(text, 0, tag.pos);
        text.erase(0, tag.pos + open_tags[tag.which].size());
        return tag.which;
    }
    if (at_end) hold = 0;
    content.append(text, 0, text.size() - hold);
    text.erase(0, text.size() - hold);
    return std::nullopt;
}

// At the end of the output: plain text still held goes out as content, but whitespace after a call is dropped.
inline void flush_text(std::string& text, bool after_call, std::string& content) {
    if (!(after_call && is_blank(text))) content += text;
    text.clear();
}

}  // namespace pagoda::chat
