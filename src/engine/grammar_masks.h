// Structured output in the engine: the step's token masks, one per sampled row whose request has a grammar. A row's
// mask is its matcher's (grammar/matcher.h) plus the EOS ids where the grammar may end; when the grammar has no
// other token left (or, defensively, at a dead end) EOS alone is allowed, so a row always has a token to draw.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "grammar/matcher.h"

namespace pagoda::engine {

class GrammarMasks {
  public:
    GrammarMasks(int32_t vocab_size, std::vector<int32_t> eos_token_ids);

    // Makes room for `rows` masks for this step; spans from earlier steps become invalid.
    void begin_step(size_t rows);
    // Fills mask `row` from `matcher` and returns it (valid until the next begin_step).
    std::span<const uint32_t> fill(size_t row, grammar::GrammarMatcher& matcher);

    size_t words() const { return words_; }

  private:
    size_t words_;
    std::vector<int32_t> eos_;
    std::vector<uint32_t> storage_;
};

}  // namespace pagoda::engine
