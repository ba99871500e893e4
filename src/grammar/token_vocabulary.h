// The tokenizer's vocabulary as the matcher needs it: each token's bytes, and the tokens sorted by their bytes with
// the length of the prefix each shares with the one before (a trie laid out flat: walking the sorted list and
// keeping the common prefix visits each trie node once).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::grammar {

class TokenVocabulary {
  public:
    // `token_bytes[id]` is what token `id` decodes to; ids in `excluded` (special tokens, EOS) and tokens with no
    // bytes never appear in a mask: EOS is the engine's to allow (GrammarMatcher::fill_mask says when).
    TokenVocabulary(std::vector<std::string> token_bytes, std::span<const int32_t> excluded);

    int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
    std::string_view bytes(int32_t id) const { return bytes_[id]; }
    // Tokens that can appear in a mask, sorted by bytes; lcp(i) = common prefix length of sorted(i) and sorted(i-1).
    int32_t num_sorted() const { return static_cast<int32_t>(sorted_.size()); }
    int32_t sorted(int32_t i) const { return sorted_[i]; }
    int32_t lcp(int32_t i) const { return lcp_[i]; }
    std::string_view sorted_bytes(int32_t i) const { return bytes_[sorted_[i]]; }

  private:
    std::vector<std::string> bytes_;
    std::vector<int32_t> sorted_;
    std::vector<int32_t> lcp_;
};

}  // namespace pagoda::grammar
