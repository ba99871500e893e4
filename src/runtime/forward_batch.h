// ForwardBatch: the host-side description of one model step over several sequences (prefill chunks and decodes
// mixed), as the engine builds it. All arrays are host memory owned by the caller (or by ForwardBatchBuilder).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

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

    // When > 0, kernels that size their work by the longest sequence (split-KV attention) plan for sequences of up
    // to this many tokens instead: a recorded step (CUDA graph) is replayed for longer sequences than it saw.
    int32_t seq_len_bound = 0;

    int32_t query_len(int32_t s) const { return query_start_loc[s + 1] - query_start_loc[s]; }
    int32_t context_len(int32_t s) const { return seq_lens[s] - query_len(s); }  // tokens cached before this step
    int32_t max_query_len() const;
    int32_t max_seq_len() const;
};

// Owns the arrays of a ForwardBatch; used by tests, the CLI and the engine's batch assembly.
class ForwardBatchBuilder {
  public:
    explicit ForwardBatchBuilder(int32_t block_size = 16) : block_size_(block_size) {}

    // Adds a sequence that already has `context_len` tokens cached and now feeds `new_tokens`.
    // `block_table` must cover context_len + new_tokens.size() tokens. `logits`: Last = only the final new token,
    // All = every new token, None = no logits.
    enum class Logits { None, Last, All };
    void add_sequence(std::span<const int32_t> new_tokens, int32_t context_len, std::span<const int32_t> block_table,
                      int32_t state_slot, Logits logits = Logits::Last);
    void clear();

    // A view valid until the builder is modified or destroyed.
    ForwardBatch view();

  private:
    int32_t block_size_;
    std::vector<int32_t> token_ids_, positions_, query_start_loc_{0}, seq_lens_, state_slots_, logits_indices_;
    std::vector<std::vector<int32_t>> tables_;
    std::vector<int32_t> block_tables_;  // padded copy of tables_, rebuilt by view()
    std::vector<int64_t> slot_mapping_;
};

}  // namespace pagoda
