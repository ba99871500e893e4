// DecodeGraphs: decode steps as recorded CUDA graphs. A decode step of a few sequences is hundreds of small kernel
// launches whose CPU cost leaves the GPU idle between them; a recorded step replays with one launch.
//
// A graph holds a fixed batch shape, so batches are padded to buckets of sequence counts (1, 2, 4, 8, then multiples
// of 16 up to max_seqs). Padding sequences have one token (id 0, position 0) whose K/V are not stored (slot -1),
// whose attention reads one key of block 0, and whose linear-attention state slot is -1 (outside the pool: the
// delta-net kernels skip them): their rows compute garbage that no real row reads (every op is row-wise or per
// sequence) and nobody samples. State slots are batch data like block tables, so hybrid models record too, and so are
// LoRA adapters: a step with adapters is recorded apart from the base model's (its graph adds every projection's
// deltas), the tokens' adapter slots and tiles are restaged at each replay, padding rows take none, and each slot's
// matrices sit at fixed places whatever adapter is in it (runtime/lora.h, LoraDeviceLayout). Block tables
// are padded to a width bucket too (a power of two of blocks, at least 64, at most max_seq_len's), and split-KV
// attention plans for that width (ForwardBatch::seq_len_bound): one graph serves every context length within its
// width, and a step of short sequences does not fill and upload tables as wide as a 262,144-token context.
//
// A bucket's graph is recorded at its first step: that step runs eagerly (which also tunes its GEMMs and grows any
// scratch to the shape's needs), then is recorded. Graphs point into scratch memory; when any of it is reallocated
// (Model::memory_generation, e.g. a longer prefill grew the arena) all graphs are dropped and re-recorded on use.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "common/status.h"
#include "model/model.h"
#include "tensor/buffer.h"

namespace pagoda::executor {

// The bucket of a decode step of n sequences: 1, 2, 4, 8, 16, then multiples of 16, at most max_seqs.
int32_t decode_graph_bucket(int32_t n, int32_t max_seqs);
// The block-table width of a decode step whose longest table has `blocks` blocks: the next power of two from 64 up,
// at most max_blocks.
int32_t decode_graph_width(int32_t blocks, int32_t max_blocks);

// A decode batch padded to `bucket` sequences (see above); owns its arrays, which view() spans.
struct PaddedDecodeBatch {
    ForwardBatchArrays arrays;
    ForwardBatch view;
    std::vector<int32_t> lora_slots;  // a replayed step's adapter slots (the model maps them on an eager step)
};
// `batch`: one token per sequence, num_seqs <= bucket, max_blocks_per_seq <= max_blocks. The padded batch's block
// tables have max_blocks columns and its seq_len_bound is `seq_len_bound`.
void pad_decode_batch(const ForwardBatch& batch, int32_t bucket, int32_t max_blocks, int32_t seq_len_bound,
                      PaddedDecodeBatch& out);

class DecodeGraphs {
  public:
    struct Options {
        int32_t max_seqs = 256;      // the largest bucket
        int32_t max_seq_len = 4096;  // tokens per sequence (block tables and split-KV plans are sized for it)
        int32_t block_size = 16;
    };
    // Null when the backend cannot record steps (the CPU), or the model is split over ranks.
    static Result<std::unique_ptr<DecodeGraphs>> create(model::Model& model, const Options& options);

    // True for a batch this runs: one new token per sequence, logits for every row in order, at most max_seqs
    // sequences, each within max_seq_len and the batch's block size equal to the options'. A batch with adapters
    // needs them resident (the runner's prepare step) before forward().
    bool accepts(const ForwardBatch& batch) const;
    // Runs the step; the logits [num_seqs, vocab] are rows of device memory owned here, valid until the next call.
    Result<Tensor> forward(const ForwardBatch& batch, const KvCachePool* kv, const StateCachePool* states);

    // Graphs recorded and steps replayed so far (re-recordings included); safe to read from any thread.
    size_t recordings() const { return recordings_.load(std::memory_order_relaxed); }
    size_t replays() const { return replays_.load(std::memory_order_relaxed); }

  private:
    DecodeGraphs(model::Model& model, const Options& options) : model_(model), options_(options) {}

    model::Model& model_;
    Options options_;
    int32_t max_blocks_ = 0;
    Buffer logits_;                                  // [max_seqs, vocab] on the device
    using Key = std::tuple<int32_t, int32_t, bool>;  // (sequence bucket, block-table width, with adapters)
    std::map<Key, std::unique_ptr<StepGraph>> graphs_;
    std::set<Key> failed_;  // shapes whose recording failed: they run eagerly until memory moves
    uint64_t generation_ = 0;
    std::atomic<size_t> recordings_{0}, replays_{0};
    PaddedDecodeBatch padded_;  // reused across steps
};

}  // namespace pagoda::executor
