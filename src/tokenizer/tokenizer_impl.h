// Internal: the tables behind a Tokenizer, and how a loader hands them over.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"

namespace pagoda {

namespace tokenizer_internal {

struct AddedToken {
    std::string content;
    int32_t id = 0;
    bool special = false;
    bool lstrip = false;
    bool rstrip = false;
    bool normalized = false;
    bool single_word = false;
};

// Everything a loader reads from the files, before tables are built.
struct TokenizerSpec {
    std::vector<std::pair<std::string, int32_t>> vocab;       // byte-level token -> id
    std::vector<std::pair<std::string, std::string>> merges;  // rank order
    bool ignore_merges = false;
    bool nfc = true;
    std::string split_regex;
    std::vector<AddedToken> added;
    // tokenizer.json's TemplateProcessing post-processor for one sequence: ids before and after it.
    std::vector<int32_t> template_prefix, template_suffix;
};

// Leftmost-longest, non-overlapping matching of a set of added tokens (as HF's Aho-Corasick does).
class AddedTokenMatcher {
  public:
    // `patterns[k]` is the text to find for added token `which[k]`.
    void build(const std::vector<size_t>& which, const std::vector<std::string>& patterns);
    bool empty() const { return patterns_.empty(); }
    // Finds the next match at or after `from`; returns false when there is none.
    bool find(std::string_view s, size_t from, size_t& start, size_t& end, size_t& token_index) const;

  private:
    std::vector<std::string> patterns_;
    std::vector<size_t> token_index_;
    std::vector<std::vector<uint32_t>> by_first_byte_;  // pattern indices, longest first
    bool first_byte_[256] = {};
};

Result<std::shared_ptr<const TokenizerImpl>> build_tokenizer(TokenizerSpec spec);

}  // namespace tokenizer_internal

struct TokenizerImpl {
    tokenizer_internal::BpeModel bpe;
    tokenizer_internal::SplitPattern pattern = tokenizer_internal::SplitPattern::kQwen2;
    bool nfc = true;
    std::vector<tokenizer_internal::AddedToken> added;
    tokenizer_internal::AddedTokenMatcher raw_matcher;         // normalized == false: matched before NFC
    tokenizer_internal::AddedTokenMatcher normalized_matcher;  // normalized == true: matched after NFC
    // Decoding: bytes of each id in one arena; kValid/kSpecial flags per id.
    std::string id_bytes;
    std::vector<uint32_t> id_offset;  // vocab_size + 1 entries
    std::vector<uint8_t> id_flags;
    std::unordered_map<std::string, int32_t> token_ids;     // byte-level vocab spellings and added contents
    std::vector<int32_t> template_prefix, template_suffix;  // TokenizerSpec's
    uint64_t serial = 0;                                    // tells per-thread caches apart

    static constexpr uint8_t kValid = 1, kSpecial = 2;
};

}  // namespace pagoda
