// Byte-level BPE model: merges keyed by pair of ids in an open-addressing table, and the merge loop
// of HF tokenizers (lowest rank first, leftmost on ties) run directly on byte ids.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace pagoda::tokenizer_internal {

// GPT-2's reversible byte <-> printable code point mapping.
char32_t byte_to_char(unsigned char b);
// Bytes of a token as HF's ByteLevel decoder gives them: each char mapped back to its byte, or, when
// some char is outside the mapping, the token's own UTF-8.
std::string byte_level_decode(std::string_view token);
// The byte-level spelling of raw bytes ("Ġthe" for " the").
std::string byte_level_encode(std::string_view bytes);

class BpeModel {
  public:
    // `vocab`: (byte-level token, id); `merges` in rank order, as (left, right) byte-level tokens.
    static Result<BpeModel> build(const std::vector<std::pair<std::string, int32_t>>& vocab,
                                  const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges);

    // Appends the ids of one pre-tokenized piece given as raw bytes.
    void encode_word(std::string_view bytes, std::vector<int32_t>& out) const;

    struct MergeValue {
        int32_t rank;
        int32_t new_id;
    };

  private:
    const MergeValue* find_merge(int32_t left, int32_t right) const {
        const uint64_t key = (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
        size_t i = hash(key) & mask_;
        while (true) {
            const uint64_t k = keys_[i];
            if (k == key) return &values_[i];
            if (k == kEmpty) return nullptr;
            i = (i + 1) & mask_;
        }
    }
    static uint64_t hash(uint64_t key) {
        key *= 0x9E3779B97F4A7C15ull;
        return key ^ (key >> 29);
    }
    void insert_merge(uint64_t key, MergeValue value);

    static constexpr uint64_t kEmpty = ~uint64_t{0};
    int32_t byte_ids_[256];  // id of each single byte's token, -1 when absent (such bytes are dropped)
    std::vector<uint64_t> keys_;
    std::vector<MergeValue> values_;
    size_t mask_ = 0;
    bool ignore_merges_ = false;
    std::vector<std::pair<std::string, int32_t>> whole_words_;  // only for ignore_merges: sorted raw bytes -> id
};

}  // namespace pagoda::tokenizer_internal
