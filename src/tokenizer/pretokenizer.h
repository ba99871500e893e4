// The Qwen pre-tokenizer regexes, matched by hand (no regex engine): the piece boundaries are those
// Oniguruma finds for the exact patterns below, and any other pattern is refused when loading.
#pragma once

#include <cstddef>
#include <string_view>

#include "common/status.h"

namespace pagoda::tokenizer_internal {

enum class SplitPattern {
    kQwen2,   // Qwen2 / 2.5 / 3
    kQwen35,  // Qwen3.5: letters are [\p{L}\p{M}]+, punctuation runs exclude \p{M}
};

inline constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The pattern a tokenizer file names, or an error quoting it.
Result<SplitPattern> recognize_split_pattern(std::string_view regex);

// End of the piece that starts at `pos` (< text.size()) of valid UTF-8. With these patterns every
// position starts a match, so pieces tile the text.
size_t match_piece(SplitPattern pattern, std::string_view text, size_t pos);

}  // namespace pagoda::tokenizer_internal
