// The real Qwen3 vocabulary (151,665 tokens, byte-level BPE with tokens that split UTF-8 characters) as the matcher
// sees it, for the grammar tests; special tokens have no bytes (they never appear in a mask).
#pragma once

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grammar/token_vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::grammar::testing {

struct QwenVocabulary {
    std::optional<Tokenizer> tokenizer;
    std::shared_ptr<const TokenVocabulary> vocab;
    std::string error;  // why it is absent
};

inline QwenVocabulary load_qwen_vocabulary() {
    QwenVocabulary out;
    const char* env = std::getenv("PAGODA_SHARED_DIR");
    auto tok = Tokenizer::load_from_dir(std::string(env ? env : PAGODA_SHARED_DIR) + "/qwen-tokenizers/qwen3-4b");
    if (!tok.ok()) {
        out.error = tok.message();
        return out;
    }
    std::vector<std::string> bytes(static_cast<size_t>(tok->vocab_size()));
    std::vector<int32_t> excluded;
    for (int32_t id = 0; id < tok->vocab_size(); ++id) {
        if (tok->is_special(id))
            excluded.push_back(id);
        else
            bytes[id] = std::string(tok->token_bytes(id));
    }
    out.vocab = std::make_shared<TokenVocabulary>(std::move(bytes), excluded);
    out.tokenizer = std::move(*tok);
    return out;
}

}  // namespace pagoda::grammar::testing
