// SequenceRunner: runs whole sequences through a Model without the engine — for the CLI (logits, generate), the
// golden tests and benchmarks. It owns a KV pool and a state pool with a fixed block range and state slot per
// sequence, and remembers how many tokens of each sequence are cached.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "model/model.h"
#include "runtime/cache_pools.h"

namespace pagoda::model {

class SequenceRunner {
  public:
    // Room for `max_seqs` sequences of up to `max_len` tokens each.
    static Result<SequenceRunner> create(Model& model, int32_t max_seqs, int32_t max_len, int32_t block_size = 16);

    struct Feed {
        int32_t seq = 0;                  // 0 .. max_seqs-1
        std::span<const int32_t> tokens;  // new tokens, appended to what the sequence already holds
        bool all_logits = false;          // logits of every new token, or only of the last
        int32_t lora_id = 0;              // the adapter (resident in the model's LoRA table), 0 = none
    };
    // One forward step over several sequences (each sequence at most once). Returns, per feed, its logits rows
    // flattened: [rows, vocab]. `observer` sees the residual stream of the step's tokens after each layer (Model).
    Result<std::vector<std::vector<float>>> step(std::span<const Feed> feeds, const HiddenObserver& observer = {});
    // Convenience for one sequence.
    Result<std::vector<float>> feed(int32_t seq, std::span<const int32_t> tokens, bool all_logits,
                                    const HiddenObserver& observer = {});

    void reset(int32_t seq) { lengths_.at(static_cast<size_t>(seq)) = 0; }
    int32_t length(int32_t seq) const { return lengths_.at(static_cast<size_t>(seq)); }
    int64_t vocab_size() const { return model_->vocab_size(); }

  private:
    SequenceRunner() = default;

    Model* model_ = nullptr;
    int32_t max_len_ = 0, block_size_ = 16, blocks_per_seq_ = 0;
    std::vector<KvCachePool> kv_;         // 0 or 1 pool
    std::vector<StateCachePool> states_;  // 0 or 1 pool
    std::vector<int32_t> lengths_;
};

}  // namespace pagoda::model
