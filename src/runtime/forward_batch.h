// ForwardBatch: the host-side description of one model step over several sequences (prefill chunks and decodes
// mixed), as the engine builds it. All arrays are host memory owned by the caller, in a ForwardBatchArrays.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "common/check.h"

namespace pagoda {

struct ForwardBatch {
    int32_t num_tokens = 0;  // T: total new tokens over all sequences
    int32_t num_seqs = 0;    // S

    std::span<const int32_t> token_ids;        // [T] flattened, sequence after sequence
    std::span<const int32_t> positions;        // [T] absolute position of each token in its sequence
    std::span<const int32_t> query_start_loc;  // [S+1] sequence s owns rows [qsl[s], qsl[s+1])
    std::span<const int32_t> seq_lens;         // [S] context length INCLUDING this step's tokens

    // Paged KV (full-attention layers). Block b of sequence s is block_tables[s*max_blocks_per_seq + b].
    int32_t block_size = 16;
    int32_t max_blocks_per_seq = 0;
    std::span<const int32_t> block_tables;  // [S * max_blocks_per_seq]
    std::span<const int64_t> slot_mapping;  // [T] where token t's K/V go: block_id*block_size + offset; <0 = skip

    // Linear-attention (Gated DeltaNet) state slot of each sequence. A sequence whose cached context is 0
    // (seq_lens[s] == its number of new tokens) starts from zero conv and recurrent state; otherwise the slot
    // holds the state after its first seq_lens[s]-new tokens.
    std::span<const int32_t> state_slots;  // [S]

    // Rows (indices into the T tokens) whose hidden state produces logits, in output order.
    std::span<const int32_t> logits_indices;
    // Rows whose final-norm hidden state is returned as it is (pooling requests: embeddings), in output order.
    std::span<const int32_t> pooled_indices;

    // Multi-LoRA. lora_ids: the adapter id of each token's request (0 = the base model), as the engine knows them;
    // empty when no token of the step has one. lora_slots: the adapter-table slot of each token (-1 = none), filled
    // by the model from lora_ids once the adapters are resident; what Ops::linear reads (runtime/lora.h).
    std::span<const int32_t> lora_ids;    // [T] or empty
    std::span<const int32_t> lora_slots;  // [T] or empty
    int32_t lora_slot_count = 0;          // the adapter table's slots (--max-loras) when lora_slots is set

    // When > 0, kernels that size their work by the longest sequence (split-KV attention) plan for sequences of up
    // to this many tokens instead: a recorded step (CUDA graph) is replayed for longer sequences than it saw.
    int32_t seq_len_bound = 0;

    int32_t query_len(int32_t s) const { return query_start_loc[s + 1] - query_start_loc[s]; }
    int32_t context_len(int32_t s) const { return seq_lens[s] - query_len(s); }  // tokens cached before this step
    int32_t max_query_len() const;
    int32_t max_seq_len() const;
};

// The arrays a ForwardBatch views, owned, and the one place a batch is put together from them: the engine's step,
// ForwardBatchBuilder, the warm-up step, a decode step padded for a CUDA graph and a step decoded from the wire fill
// these and take view(). Kept across steps, since clear() keeps the capacity (steady-state steps do not allocate).
// Header-only: the engine assembles its steps with it without linking the runtime.
struct ForwardBatchArrays {
    std::vector<int32_t> token_ids, positions, query_start_loc{0}, seq_lens, block_tables, state_slots, logits_indices,
        pooled_indices;
    std::vector<int64_t> slot_mapping;
    std::vector<int32_t> lora_ids;  // [T]: kept empty until a sequence with an adapter is added
    bool has_lora = false;

    void clear() {
        token_ids.clear();
        positions.clear();
        query_start_loc.assign(1, 0);
        seq_lens.clear();
        block_tables.clear();
        state_slots.clear();
        logits_indices.clear();
        pooled_indices.clear();
        slot_mapping.clear();
        lora_ids.clear();
        has_lora = false;
    }

    // Appends a sequence that has `context_len` tokens cached and now feeds `tokens`: their ids, positions and K/V
    // slots (block_table[pos / block_size] * block_size + pos % block_size; an empty table stores none, slot -1, as
    // the warm-up step does), then its query start, length and state slot. Returns the row of its first token. Its
    // logits rows and its block table (lay_out_block_tables, once every sequence is in) are the caller's.
    // `lora_id`: the sequence's adapter (0 = none); ids are kept per token once any sequence has one.
    int32_t add_sequence(std::span<const int32_t> tokens, int32_t context_len, std::span<const int32_t> block_table,
                         int32_t block_size, int32_t state_slot, int32_t lora_id = 0) {
        const auto n = static_cast<int32_t>(tokens.size());
        PAGODA_CHECK_MSG(
            block_table.empty() || static_cast<int64_t>(block_table.size()) * block_size >= context_len + n,
            "block table does not cover the sequence");
        const auto first_row = static_cast<int32_t>(token_ids.size());
        for (int32_t i = 0; i < n; ++i) {
            const int32_t pos = context_len + i;
            token_ids.push_back(tokens[static_cast<size_t>(i)]);
            positions.push_back(pos);
            slot_mapping.push_back(block_table.empty()
                                       ? -1
                                       : static_cast<int64_t>(block_table[pos / block_size]) * block_size +
                                             pos % block_size);
        }
        if (lora_id != 0 && !has_lora) lora_ids.assign(static_cast<size_t>(first_row), 0), has_lora = true;
        if (has_lora) lora_ids.insert(lora_ids.end(), static_cast<size_t>(n), lora_id);
        query_start_loc.push_back(first_row + n);
        seq_lens.push_back(context_len + n);
        state_slots.push_back(state_slot);
        return first_row;
    }

    // Lays the sequences' block tables out as the [S, width] matrix ForwardBatch::block_tables is: table_of(s) gives
    // sequence s's table as a std::span<const int32_t>; width is the longest table's length, or `min_width` when that
    // is more. Padding points at block 0 and is never read. Returns the width (the batch's max_blocks_per_seq).
    template <class TableOf>
    int32_t lay_out_block_tables(size_t num_seqs, TableOf table_of, int32_t min_width = 0) {
        static_assert(std::is_same_v<std::invoke_result_t<TableOf&, size_t>, std::span<const int32_t>>,
                      "table_of returns a span (a vector returned by value would be a dangling temporary)");
        size_t width = static_cast<size_t>(std::max(min_width, 0));
        for (size_t s = 0; s < num_seqs; ++s)
            width = std::max(width, table_of(s).size());
        block_tables.assign(num_seqs * width, 0);
        for (size_t s = 0; s < num_seqs; ++s) {
            const std::span<const int32_t> table = table_of(s);
            std::copy(table.begin(), table.end(), block_tables.begin() + static_cast<ptrdiff_t>(s * width));
        }
        return static_cast<int32_t>(width);
    }

    // A ForwardBatch viewing these arrays (valid until they change): as many tokens as token_ids, as many sequences
    // as seq_lens.
    ForwardBatch view(int32_t block_size, int32_t max_blocks_per_seq, int32_t seq_len_bound = 0) const {
        ForwardBatch b;
        b.num_tokens = static_cast<int32_t>(token_ids.size());
        b.num_seqs = static_cast<int32_t>(seq_lens.size());
        b.token_ids = token_ids;
        b.positions = positions;
        b.query_start_loc = query_start_loc;
        b.seq_lens = seq_lens;
        b.block_size = block_size;
        b.max_blocks_per_seq = max_blocks_per_seq;
        b.block_tables = block_tables;
        b.slot_mapping = slot_mapping;
        b.state_slots = state_slots;
        b.logits_indices = logits_indices;
        b.pooled_indices = pooled_indices;
        if (has_lora) b.lora_ids = lora_ids;
        b.seq_len_bound = seq_len_bound;
        return b;
    }
};

// Owns the arrays of a ForwardBatch, keeping a copy of each sequence's block table; used by tests and the CLI.
class ForwardBatchBuilder {
  public:
    explicit ForwardBatchBuilder(int32_t block_size = 16) : block_size_(block_size) {}

    // Adds a sequence that already has `context_len` tokens cached and now feeds `new_tokens` (with adapter `lora_id`;
    // 0: none).
    // `block_table` must cover context_len + new_tokens.size() tokens. `logits`: Last = only the final new token,
    // All = every new token, None = no logits.
    enum class Logits { None, Last, All };
    void add_sequence(std::span<const int32_t> new_tokens, int32_t context_len, std::span<const int32_t> block_table,
                      int32_t state_slot, Logits logits = Logits::Last, int32_t lora_id = 0);
    void clear();

    // A view valid until the builder is modified or destroyed.
    ForwardBatch view();

  private:
    int32_t block_size_;
    ForwardBatchArrays arrays_;  // block_tables: the padded copy of tables_, laid out by view()
    std::vector<std::vector<int32_t>> tables_;
};

}  // namespace pagoda
