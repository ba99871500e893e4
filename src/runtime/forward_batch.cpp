// ForwardBatch helpers and the builder that owns a batch's arrays.
#include "runtime/forward_batch.h"

#include <algorithm>

#include "common/check.h"

namespace pagoda {

int32_t ForwardBatch::max_query_len() const {
    int32_t m = 0;
    for (int32_t s = 0; s < num_seqs; ++s)
        m = std::max(m, query_len(s));
    return m;
}

int32_t ForwardBatch::max_seq_len() const {
    int32_t m = 0;
    for (int32_t s = 0; s < num_seqs; ++s)
        m = std::max(m, seq_lens[s]);
    return m;
}

void ForwardBatchBuilder::add_sequence(std::span<const int32_t> new_tokens, int32_t context_len,
                                       std::span<const int32_t> block_table, int32_t state_slot, Logits logits,
                                       int32_t lora_id) {
    const auto n = static_cast<int32_t>(new_tokens.size());
    PAGODA_CHECK_MSG(static_cast<int64_t>(block_table.size()) * block_size_ >= context_len + n,
                     "block table does not cover the sequence");
    const int32_t first_row =
        arrays_.add_sequence(new_tokens, context_len, block_table, block_size_, state_slot, lora_id);
    for (int32_t i = 0; i < n; ++i)
        if (logits == Logits::All || (logits == Logits::Last && i == n - 1))
            arrays_.logits_indices.push_back(first_row + i);
    tables_.emplace_back(block_table.begin(), block_table.end());
}

void ForwardBatchBuilder::clear() {
    arrays_.clear();
    tables_.clear();
}

ForwardBatch ForwardBatchBuilder::view() {
    const int32_t width = arrays_.lay_out_block_tables(
        tables_.size(), [this](size_t s) -> std::span<const int32_t> { return tables_[s]; });
    return arrays_.view(block_size_, width);
}

}  // namespace pagoda
