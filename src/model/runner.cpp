#include "model/runner.h"

#include <numeric>
#include <string>

#include "runtime/forward_batch.h"

namespace pagoda::model {

Result<SequenceRunner> SequenceRunner::create(Model& model, int32_t max_seqs, int32_t max_len, int32_t block_size) {
    if (max_seqs <= 0 || max_len <= 0 || block_size <= 0) return Status::error("runner: sizes must be positive");
    SequenceRunner r;
    r.model_ = &model;
    r.max_len_ = max_len;
    r.block_size_ = block_size;
    r.blocks_per_seq_ = (max_len + block_size - 1) / block_size;
    r.lengths_.assign(static_cast<size_t>(max_seqs), 0);
    Allocator& allocator = model.backend().allocator();
    if (model.spec().num_full_attention_layers() > 0) {
        PAGODA_ASSIGN_OR_RETURN(
            KvCachePool kv,
            KvCachePool::create(allocator, model.kv_cache_config(max_seqs * r.blocks_per_seq_, block_size)));
        r.kv_.push_back(std::move(kv));
    }
    if (model.spec().num_linear_attention_layers() > 0) {
        PAGODA_ASSIGN_OR_RETURN(StateCachePool states,
                                StateCachePool::create(allocator, model.state_cache_config(max_seqs)));
        r.states_.push_back(std::move(states));
    }
    return r;
}

Result<std::vector<std::vector<float>>> SequenceRunner::step(std::span<const Feed> feeds,
                                                             const HiddenObserver& observer) {
    ForwardBatchBuilder builder(block_size_);
    std::vector<int64_t> rows_of(feeds.size());
    int64_t total_rows = 0;
    std::vector<bool> seen(lengths_.size(), false);
    for (size_t f = 0; f < feeds.size(); ++f) {
        const Feed& feed = feeds[f];
        if (feed.seq < 0 || feed.seq >= static_cast<int32_t>(lengths_.size()) || seen[feed.seq]) {
            return Status::error("runner: bad or repeated sequence index " + std::to_string(feed.seq));
        }
        seen[feed.seq] = true;
        if (feed.tokens.empty()) return Status::error("runner: no tokens for sequence " + std::to_string(feed.seq));
        const int32_t len = lengths_[feed.seq];
        if (len + static_cast<int64_t>(feed.tokens.size()) > max_len_) {
            return Status::error("sequence of " + std::to_string(len + feed.tokens.size()) +
                                 " tokens exceeds the runner's limit of " + std::to_string(max_len_));
        }
        std::vector<int32_t> table(static_cast<size_t>(blocks_per_seq_));
        std::iota(table.begin(), table.end(), feed.seq * blocks_per_seq_);
        builder.add_sequence(feed.tokens, len, table, feed.seq,
                             feed.all_logits ? ForwardBatchBuilder::Logits::All : ForwardBatchBuilder::Logits::Last,
                             feed.lora_id);
        rows_of[f] = feed.all_logits ? static_cast<int64_t>(feed.tokens.size()) : 1;
        total_rows += rows_of[f];
    }
    const int64_t V = model_->vocab_size();
    HostTensor logits = HostTensor::empty(DType::F32, Shape{total_rows, V});
    ForwardBatch batch = builder.view();
    PAGODA_RETURN_IF_ERROR(model_->forward(batch, kv_.empty() ? nullptr : &kv_[0],
                                           states_.empty() ? nullptr : &states_[0], logits.tensor, observer));
    std::vector<std::vector<float>> out(feeds.size());
    const float* p = logits.tensor.data_as<float>();
    for (size_t f = 0; f < feeds.size(); ++f) {
        out[f].assign(p, p + rows_of[f] * V);
        p += rows_of[f] * V;
        lengths_[feeds[f].seq] += static_cast<int32_t>(feeds[f].tokens.size());
    }
    return out;
}

Result<std::vector<float>> SequenceRunner::feed(int32_t seq, std::span<const int32_t> tokens, bool all_logits,
                                                const HiddenObserver& observer) {
    Feed f{seq, tokens, all_logits};
    PAGODA_ASSIGN_OR_RETURN(auto out, step(std::span<const Feed>(&f, 1), observer));
    return std::move(out[0]);
}

}  // namespace pagoda::model
