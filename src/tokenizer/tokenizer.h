// Byte-level BPE tokenizer for the Qwen families: gives exactly the ids Hugging Face `tokenizers`
// gives for the same tokenizer.json (or vocab.json + merges.txt), decodes, and detokenizes streams.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pagoda {

struct TokenizerImpl;

// Immutable after loading; copies share the tables, and every method may be called from many
// threads at once.
class Tokenizer {
  public:
    // A folder holding tokenizer.json, or vocab.json + merges.txt (+ tokenizer_config.json).
    static Result<Tokenizer> load_from_dir(const std::string& dir);
    // The text of a tokenizer.json.
    static Result<Tokenizer> from_tokenizer_json(std::string_view json_text);
    // vocab.json + merges.txt, with added tokens (added_tokens_decoder) and the pre-tokenizer
    // regex ("pretokenize_regex") from tokenizer_config.json when its text is not empty.
    static Result<Tokenizer> from_vocab_and_merges(std::string_view vocab_json, std::string_view merges_txt,
                                                   std::string_view tokenizer_config_json);

    // Appends the ids of `text` to `out`. Invalid UTF-8 is not an error here: each maximal invalid
    // subsequence becomes U+FFFD first (what Python's bytes.decode(errors="replace") gives, i.e. the
    // str HF would be handed). With parse_special false, special added tokens in the text are
    // tokenized as plain text (HF's encode_special_tokens=True); non-special added tokens still match.
    void encode(std::string_view text, std::vector<int32_t>& out, bool parse_special = true) const;
    std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;

    // Text of `ids` (HF decode: byte-level bytes joined, invalid UTF-8 replaced by U+FFFD).
    // An id outside the vocabulary is an error naming it.
    Result<std::string> decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

    // One past the largest id; ids below it may still be unassigned (holes are errors in decode).
    int32_t vocab_size() const;
    bool is_valid_id(int32_t id) const;
    bool is_special(int32_t id) const;  // an added token flagged special (skipped by skip_special_tokens)
    // Id of a token given as written in the vocabulary (byte-level form, e.g. "Ġthe") or an added token.
    std::optional<int32_t> token_to_id(std::string_view token) const;
    // The ids tokenizer.json's TemplateProcessing post-processor puts before and after one sequence, which HF adds
    // with add_special_tokens=True (Qwen3-Embedding appends <|endoftext|>). encode() never adds them; both are
    // empty for the plain Qwen tokenizers (whose post-processor is ByteLevel or none).
    std::span<const int32_t> special_prefix() const;
    std::span<const int32_t> special_suffix() const;
    // The bytes `id` decodes to (empty for an invalid id); may be an incomplete UTF-8 sequence.
    std::string_view token_bytes(int32_t id) const;

    Tokenizer(const Tokenizer&) = default;
    Tokenizer& operator=(const Tokenizer&) = default;
    Tokenizer(Tokenizer&&) noexcept = default;
    Tokenizer& operator=(Tokenizer&&) noexcept = default;
    ~Tokenizer();

  private:
    explicit Tokenizer(std::shared_ptr<const TokenizerImpl> impl);
    std::shared_ptr<const TokenizerImpl> impl_;  // shared: request threads use one tokenizer
};

// Streaming detokenizer: push ids as they are generated; text comes out as soon as it is final and
// never splits a UTF-8 sequence. The concatenation of all output, after finish(), equals
// Tokenizer::decode of all ids.
class IncrementalDecoder {
  public:
    explicit IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);
    // Appends the newly final text to `out`; an invalid id is an error and changes nothing.
    Status push(int32_t id, std::string& out);
    // End of stream: an incomplete trailing sequence becomes U+FFFD.
    void finish(std::string& out);
    void reset() { buffer_.clear(); }

  private:
    Tokenizer tokenizer_;
    bool skip_special_;
    std::string buffer_;  // between calls: the bytes of an unfinished UTF-8 sequence (at most 3)
};

}  // namespace pagoda
