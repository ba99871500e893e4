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
                                       std::span<const int32_t> block_table, int32_t state_slot, Logits logits) {
    const auto n = static_cast<int32_t>(new_tokens.size());
    const int32_t total = context_len + n;
    PAGODA_CHECK_MSG(static_cast<int64_t>(block_table.size()) * block_size_ >= total,
                     "block table does not cover the sequence");
    const auto first_row = static_cast<int32_t>(token_ids_.size());
    for (int32_t i = 0; i < n; ++i) {
        const int32_t pos = context_len + i;
        token_ids_.push_back(new_tokens[i]);
        positions_.push_back(pos);
        slot_mapping_.push_back(static_cast<int64_t>(block_table[pos / block_size_]) * block_size_ + pos % block_size_);
        if (logits == Logits::All || (logits == Logits::Last && i == n - 1)) logits_indices_.push_back(first_row + i);
    }
    query_start_loc_.push_back(first_row + n);
    seq_lens_.push_back(total);
    state_slots_.push_back(state_slot);
    tables_.emplace_back(block_table.begin(), block_table.end());
}

void ForwardBatchBuilder::clear() {
    token_ids_.clear();
    positions_.clear();
    query_start_loc_.assign(1, 0);
    seq_lens_.clear();
    state_slots_.clear();
    logits_indices_.clear();
    tables_.clear();
    block_tables_.clear();
    slot_mapping_.clear();
}

ForwardBatch ForwardBatchBuilder::view() {
    size_t max_blocks = 0;
    for (const auto& t : tables_)
        max_blocks = std::max(max_blocks, t.size());
    block_tables_.assign(tables_.size() * max_blocks, 0);  // padding points at block 0 and is never read
    for (size_t s = 0; s < tables_.size(); ++s)
        std::copy(tables_[s].begin(), tables_[s].end(), &block_tables_[s * max_blocks]);

    ForwardBatch b;
    b.num_tokens = static_cast<int32_t>(token_ids_.size());
    b.num_seqs = static_cast<int32_t>(seq_lens_.size());
    b.token_ids = token_ids_;
    b.positions = positions_;
    b.query_start_loc = query_start_loc_;
    b.seq_lens = seq_lens_;
    b.block_size = block_size_;
    b.max_blocks_per_seq = static_cast<int32_t>(max_blocks);
    b.block_tables = block_tables_;
    b.slot_mapping = slot_mapping_;
    b.state_slots = state_slots_;
    b.logits_indices = logits_indices_;
    return b;
}

}  // namespace pagoda
