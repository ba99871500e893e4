#include "executor/decode_graphs.h"

#include <algorithm>
#include <exception>
#include <string>

#include "common/log.h"

namespace pagoda::executor {

using model::Model;

Result<std::unique_ptr<DecodeGraphs>> DecodeGraphs::create(Model& model, const Options& options) {
    if (!model.backend().ops().supports_graphs() || model.shard_plan().size > 1) return std::unique_ptr<DecodeGraphs>();
    if (options.max_seqs <= 0 || options.max_seq_len <= 0 || options.block_size <= 0)
        return Status::error("decode graphs: max_seqs, max_seq_len and block_size must be positive");
    std::unique_ptr<DecodeGraphs> g(new DecodeGraphs(model, options));
    g->max_blocks_ = (options.max_seq_len + options.block_size - 1) / options.block_size;
    const size_t bytes = static_cast<size_t>(options.max_seqs) * static_cast<size_t>(model.vocab_size()) * 4;
    PAGODA_ASSIGN_OR_RETURN(g->logits_, Buffer::allocate(model.backend().allocator(), bytes, 256));
    return g;
}

int32_t decode_graph_bucket(int32_t n, int32_t max_seqs) {
    int32_t b = 1;
    while (b < n && b < 16)  // 1, 2, 4, 8, 16
        b *= 2;
    while (b < n)  // then multiples of 16
        b += 16;
    return std::min(b, max_seqs);
}

int32_t decode_graph_width(int32_t blocks, int32_t max_blocks) {
    int32_t w = 64;
    while (w < blocks && w < max_blocks)
        w *= 2;
    return std::min(w, max_blocks);
}

void pad_decode_batch(const ForwardBatch& b, int32_t bucket, int32_t max_blocks, int32_t seq_len_bound,
                      PaddedDecodeBatch& out) {
    const auto n = static_cast<size_t>(b.num_seqs), B = static_cast<size_t>(bucket);
    ForwardBatchArrays& a = out.arrays;
    a.token_ids.assign(b.token_ids.begin(), b.token_ids.end());
    a.token_ids.resize(B, 0);
    a.positions.assign(b.positions.begin(), b.positions.end());
    a.positions.resize(B, 0);
    a.seq_lens.assign(b.seq_lens.begin(), b.seq_lens.end());
    a.seq_lens.resize(B, 1);
    a.state_slots.assign(b.state_slots.begin(),
                         b.state_slots.begin() + static_cast<ptrdiff_t>(std::min(n, b.state_slots.size())));
    if (!b.state_slots.empty()) a.state_slots.resize(B, -1);  // padding rows have no state (the kernels skip -1)
    a.slot_mapping.assign(b.slot_mapping.begin(), b.slot_mapping.end());
    a.slot_mapping.resize(B, -1);  // padding rows store no K/V
    a.has_lora = !b.lora_ids.empty();
    a.lora_ids.assign(b.lora_ids.begin(), b.lora_ids.end());
    if (a.has_lora) a.lora_ids.resize(B, 0);  // padding rows take no adapter
    a.query_start_loc.resize(B + 1);
    a.logits_indices.resize(B);
    for (size_t i = 0; i < B; ++i)
        a.query_start_loc[i] = a.logits_indices[i] = static_cast<int32_t>(i);
    a.query_start_loc[B] = bucket;
    // max_blocks columns; padding rows (and the tails of real ones) point at block 0, never written.
    const auto w = static_cast<size_t>(b.max_blocks_per_seq);
    const int32_t width = a.lay_out_block_tables(
        B, [&](size_t s) { return s < n ? b.block_tables.subspan(s * w, w) : std::span<const int32_t>(); }, max_blocks);
    out.view = a.view(b.block_size, width, seq_len_bound);
}

bool DecodeGraphs::accepts(const ForwardBatch& b) const {
    if (b.num_seqs <= 0 || b.num_seqs > options_.max_seqs || b.num_tokens != b.num_seqs ||
        b.block_size != options_.block_size || b.max_blocks_per_seq > max_blocks_ ||
        static_cast<int32_t>(b.logits_indices.size()) != b.num_seqs)
        return false;
    // (Model::forward would refuse a batch whose adapter ids are not one a token; a replay skips it.)
    if (!b.lora_ids.empty() && (model_.lora() == nullptr || static_cast<int32_t>(b.lora_ids.size()) != b.num_tokens))
        return false;
    for (int32_t s = 0; s < b.num_seqs; ++s)
        if (b.query_start_loc[s] != s || b.logits_indices[s] != s || b.seq_lens[s] > options_.max_seq_len) return false;
    return true;
}

Result<Tensor> DecodeGraphs::forward(const ForwardBatch& batch, const KvCachePool* kv, const StateCachePool* states) {
    if (!accepts(batch)) return Status::error("decode graphs: batch is not a decode step this can run");
    // A replay skips Model::forward and its checks; this is the one that matters for memory safety.
    for (int32_t id : batch.token_ids)
        if (id < 0 || id >= model_.spec().vocab_size)
            return Status::error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                 std::to_string(model_.spec().vocab_size) + ")");
    const int32_t bucket = decode_graph_bucket(batch.num_seqs, options_.max_seqs);
    const int32_t width = decode_graph_width(batch.max_blocks_per_seq, max_blocks_);
    const Key key{bucket, width, !batch.lora_ids.empty()};
    pad_decode_batch(batch, bucket, width, std::min(width * options_.block_size, options_.max_seq_len), padded_);
    ForwardBatch& padded = padded_.view;
    const int64_t V = model_.vocab_size();
    const Tensor logits = logits_.view(DType::F32, Shape{bucket, V});
    const Tensor rows = logits.narrow(0, 0, batch.num_seqs);
    Ops& ops = model_.backend().ops();
    if (model_.memory_generation() != generation_) {  // some graph points into memory that moved
        graphs_.clear();
        failed_.clear();  // a failure may have come from the old memory's sizes: try again
        generation_ = model_.memory_generation();
    }
    if (auto it = graphs_.find(key); it != graphs_.end()) {
        if (!padded.lora_ids.empty()) {  // what Model::forward does on an eager step
            PAGODA_RETURN_IF_ERROR(model_.lora()->map_tokens(padded.lora_ids, padded_.lora_slots));
            padded.lora_slots = padded_.lora_slots;
            padded.lora_slot_count = model_.lora()->max_loras();
        }
        ops.replay(*it->second, padded);
        replays_.fetch_add(1, std::memory_order_relaxed);
        return rows;
    }
    // First step of this bucket (or first since memory moved): run it, then record it.
    PAGODA_RETURN_IF_ERROR(model_.forward(padded, kv, states, logits));
    if (failed_.count(key) > 0) return rows;
    if (model_.memory_generation() != generation_) {
        graphs_.clear();
        failed_.clear();
        generation_ = model_.memory_generation();
    }
    ops.begin_capture();
    Status recorded = ok_status();
    try {
        recorded = model_.forward(padded, kv, states, logits);
    } catch (const std::exception& e) {
        recorded = Status::error(e.what());
    }
    std::unique_ptr<StepGraph> graph = ops.end_capture();
    if (!recorded.ok() || !graph || model_.memory_generation() != generation_) {
        failed_.insert(key);
        PAGODA_LOG_WARNING("CUDA graph of decode bucket " + std::to_string(bucket) + " (block tables " +
                           std::to_string(width) + " wide) could not be recorded; its steps run eagerly" +
                           (recorded.ok() ? std::string() : ": " + recorded.message()));
        return rows;
    }
    graphs_[key] = std::move(graph);
    recordings_.fetch_add(1, std::memory_order_relaxed);
    return rows;
}

}  // namespace pagoda::executor
