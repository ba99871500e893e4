// Step layout: num_tokens, num_seqs, block_size, max_blocks_per_seq, seq_len_bound (i32 each), then the arrays in
// ForwardBatch order (token_ids, positions, query_start_loc, seq_lens, block_tables, slot_mapping, state_slots,
// logits_indices), then state_restores, state_saves and lora_ids; each array is a u32 count and its elements.
#include "dist/step_codec.h"

#include <string>

#include "dist/node_messages.h"
#include "dist/wire_format.h"

namespace pagoda::dist {

namespace {

Status malformed(const std::string& why) {
    return Status::error("malformed step message: " + why);
}

// The ForwardBatch invariants the kernels index by (check_batch in the runner adds the pool bounds).
Status check_consistent(const ForwardBatch& b) {
    const int64_t T = b.num_tokens, S = b.num_seqs;
    if (T < 1 || S < 1) return malformed("no tokens or no sequences");
    if (b.block_size < 1 || b.max_blocks_per_seq < 0 || b.seq_len_bound < 0)
        return malformed("negative block size, block-table width or sequence-length bound");
    auto size_is = [](auto span, int64_t n) { return static_cast<int64_t>(span.size()) == n; };
    if (!size_is(b.token_ids, T) || !size_is(b.positions, T) || !size_is(b.slot_mapping, T))
        return malformed("token arrays of " + std::to_string(b.token_ids.size()) + "/" +
                         std::to_string(b.positions.size()) + "/" + std::to_string(b.slot_mapping.size()) +
                         " entries for " + std::to_string(T) + " tokens");
    if (!size_is(b.query_start_loc, S + 1) || !size_is(b.seq_lens, S))
        return malformed("sequence arrays do not match " + std::to_string(S) + " sequences");
    if (!size_is(b.block_tables, S * b.max_blocks_per_seq)) return malformed("block tables of the wrong size");
    if (!b.state_slots.empty() && !size_is(b.state_slots, S)) return malformed("state slots of the wrong size");
    if (b.query_start_loc[0] != 0 || b.query_start_loc[static_cast<size_t>(S)] != T)
        return malformed("query starts do not span the tokens");
    for (int64_t s = 0; s < S; ++s) {
        const auto i = static_cast<size_t>(s);
        const int64_t query = int64_t(b.query_start_loc[i + 1]) - b.query_start_loc[i];
        if (query < 0) return malformed("query starts go backwards");
        if (b.seq_lens[i] < query) return malformed("a sequence is shorter than its new tokens");
    }
    for (int32_t p : b.positions)
        if (p < 0) return malformed("negative position");
    for (int32_t row : b.logits_indices)
        if (row < 0 || row >= T) return malformed("logits row outside the tokens");
    if (!b.lora_ids.empty() && !size_is(b.lora_ids, T)) return malformed("adapter ids of the wrong size");
    for (int32_t id : b.lora_ids)
        if (id < 0) return malformed("a negative adapter id");
    return ok_status();
}

int64_t max_blocks_per_seq(const PoolSizes& limits) {
    return (int64_t{limits.max_model_len} + limits.block_size - 1) / limits.block_size;
}

// What the engine never schedules under `limits` (engine.h: steps stay within max_num_batched_tokens and
// max_num_seqs, sequences within max_model_len).
Status check_within(const ForwardBatch& b, size_t restores, size_t saves, const PoolSizes& limits) {
    if (b.num_tokens > limits.max_num_batched_tokens || b.num_seqs > limits.max_num_seqs)
        return malformed(std::to_string(b.num_tokens) + " tokens of " + std::to_string(b.num_seqs) +
                         " sequences, more than the pools' " + std::to_string(limits.max_num_batched_tokens) +
                         " tokens of " + std::to_string(limits.max_num_seqs) + " sequences");
    if (b.block_size != limits.block_size || b.max_blocks_per_seq > max_blocks_per_seq(limits))
        return malformed("block size " + std::to_string(b.block_size) + " or block-table width " +
                         std::to_string(b.max_blocks_per_seq) + " beyond the pools'");
    if (b.seq_len_bound > limits.max_model_len) return malformed("sequence-length bound beyond max_model_len");
    for (int32_t len : b.seq_lens)
        if (len > limits.max_model_len) return malformed("a sequence longer than max_model_len");
    if (restores > size_t(limits.num_state_slots) || saves > size_t(limits.num_state_slots))
        return malformed("more state copies than state slots");
    return ok_status();
}

}  // namespace

size_t max_step_bytes(const PoolSizes& s) {
    const auto T = size_t(s.max_num_batched_tokens), S = size_t(s.max_num_seqs);
    const size_t header = 5 * sizeof(int32_t) + 11 * sizeof(uint32_t);  // the scalars, then one count per array
    const size_t per_token = 4 * sizeof(int32_t) + sizeof(int64_t);     // id, position, logits row, adapter; slot
    const size_t per_seq = 3 * sizeof(int32_t) + size_t(max_blocks_per_seq(s)) * sizeof(int32_t);
    return header + T * per_token + (S + 1) * per_seq + 2 * size_t(s.num_state_slots) * sizeof(engine::StateCopy);
}

void encode_step(const engine::StepInput& input, std::vector<std::byte>& out) {
    const ForwardBatch& b = input.batch;
    WireWriter w(out);
    w.put(b.num_tokens);
    w.put(b.num_seqs);
    w.put(b.block_size);
    w.put(b.max_blocks_per_seq);
    w.put(b.seq_len_bound);
    w.put_array(b.token_ids);
    w.put_array(b.positions);
    w.put_array(b.query_start_loc);
    w.put_array(b.seq_lens);
    w.put_array(b.block_tables);
    w.put_array(b.slot_mapping);
    w.put_array(b.state_slots);
    w.put_array(b.logits_indices);
    w.put_array(input.state_restores);
    w.put_array(input.state_saves);
    w.put_array(b.lora_ids);
}

void encode_lora_adapter(int32_t id, const std::string& path, std::vector<std::byte>& out) {
    WireWriter w(out);
    w.put(id);
    w.put_string(path);
}

Status decode_lora_adapter(std::span<const std::byte> bytes, int32_t& id, std::string& path) {
    WireReader r(bytes);
    if (!r.get(id) || !r.get_string(path, kMaxLoraPathBytes) || !r.at_end())
        return Status::error("malformed LoRA adapter message (" + std::to_string(bytes.size()) + " bytes)");
    if (id <= 0 || path.empty())
        return Status::error("malformed LoRA adapter message: id " + std::to_string(id) +
                             (path.empty() ? ", no directory" : ""));
    return ok_status();
}

Status decode_step(std::span<const std::byte> bytes, const PoolSizes& limits, DecodedStep& out) {
    out.input_ = engine::StepInput{};  // stays empty unless every check passes
    int32_t num_tokens = 0, num_seqs = 0, block_size = 0, max_blocks_per_seq = 0, seq_len_bound = 0;
    WireReader r(bytes);
    if (!r.get(num_tokens) || !r.get(num_seqs) || !r.get(block_size) || !r.get(max_blocks_per_seq) ||
        !r.get(seq_len_bound))
        return malformed("truncated header (" + std::to_string(bytes.size()) + " bytes)");
    ForwardBatchArrays& a = out.arrays_;
    if (!r.get_array(a.token_ids) || !r.get_array(a.positions) || !r.get_array(a.query_start_loc) ||
        !r.get_array(a.seq_lens) || !r.get_array(a.block_tables) || !r.get_array(a.slot_mapping) ||
        !r.get_array(a.state_slots) || !r.get_array(a.logits_indices) || !r.get_array(out.state_restores_) ||
        !r.get_array(out.state_saves_) || !r.get_array(a.lora_ids))
        return malformed("an array runs past the end of the message");
    if (!r.at_end()) return malformed("bytes after the last array");
    a.has_lora = !a.lora_ids.empty();
    ForwardBatch b = a.view(block_size, max_blocks_per_seq, seq_len_bound);
    // The counts the header claims, which check_consistent holds the arrays to.
    b.num_tokens = num_tokens;
    b.num_seqs = num_seqs;
    PAGODA_RETURN_IF_ERROR(check_consistent(b));
    PAGODA_RETURN_IF_ERROR(check_within(b, out.state_restores_.size(), out.state_saves_.size(), limits));
    out.input_.batch = b;
    out.input_.state_restores = out.state_restores_;
    out.input_.state_saves = out.state_saves_;
    return ok_status();
}

PoolSizes PoolSizes::of(const engine::EngineConfig& c) {
    return PoolSizes{c.num_kv_blocks, c.block_size,    c.num_state_slots,
                     c.max_num_seqs,  c.max_model_len, c.max_num_batched_tokens};
}

engine::EngineConfig PoolSizes::to_config() const {
    engine::EngineConfig c;
    c.num_kv_blocks = num_kv_blocks;
    c.block_size = block_size;
    c.num_state_slots = num_state_slots;
    c.max_num_seqs = max_num_seqs;
    c.max_model_len = max_model_len;
    c.max_num_batched_tokens = max_num_batched_tokens;
    return c;
}

void encode_pool_sizes(const PoolSizes& s, std::vector<std::byte>& out) {
    WireWriter w(out);
    for (int32_t v :
         {s.num_kv_blocks, s.block_size, s.num_state_slots, s.max_num_seqs, s.max_model_len, s.max_num_batched_tokens})
        w.put(v);
}

Result<PoolSizes> decode_pool_sizes(std::span<const std::byte> bytes) {
    PoolSizes s;
    WireReader r(bytes);
    if (!r.get(s.num_kv_blocks) || !r.get(s.block_size) || !r.get(s.num_state_slots) || !r.get(s.max_num_seqs) ||
        !r.get(s.max_model_len) || !r.get(s.max_num_batched_tokens) || !r.at_end())
        return Status::error("malformed pool-sizes message: " + std::to_string(bytes.size()) + " bytes, expected 24");
    if (s.num_kv_blocks < 0 || s.num_state_slots < 0 || s.block_size < 1 || s.max_num_seqs < 1 || s.max_model_len < 1 ||
        s.max_num_batched_tokens < 1)
        return Status::error("malformed pool-sizes message: a size is negative, or zero where it must not be");
    return s;
}

}  // namespace pagoda::dist
