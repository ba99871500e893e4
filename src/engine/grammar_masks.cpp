#include "engine/grammar_masks.h"

#include <algorithm>

#include "common/check.h"

namespace pagoda::engine {

GrammarMasks::GrammarMasks(int32_t vocab_size, std::vector<int32_t> eos_token_ids)
    : words_(grammar::mask_words(vocab_size)), eos_(std::move(eos_token_ids)) {}

void GrammarMasks::begin_step(size_t rows) {
    storage_.resize(rows * words_);  // keeps its capacity: steady-state steps do not allocate
}

std::span<const uint32_t> GrammarMasks::fill(size_t row, grammar::GrammarMatcher& matcher) {
    PAGODA_CHECK((row + 1) * words_ <= storage_.size());
    const std::span<uint32_t> mask(storage_.data() + row * words_, words_);
    std::fill(mask.begin(), mask.end(), 0u);
    const bool can_end = matcher.fill_mask(mask);
    const bool none = std::all_of(mask.begin(), mask.end(), [](uint32_t w) { return w == 0; });
    if (can_end || none)
        for (int32_t t : eos_)
            mask[static_cast<size_t>(t) >> 5] |= 1u << (t & 31);
    return mask;
}

}  // namespace pagoda::engine
