// A deterministic fake model for engine tests. It keeps a "KV cache" of token ids (one per slot) and a
// "linear-attention state" per slot (a running hash of the tokens seen), written exactly where the batch says. The
// logits of a row are a hash of the tokens read back through the block table for positions 0..p, so any mistake in
// block tables, slot mapping, prefix sharing, eviction or state restore changes the outputs. reference_logits()
// computes the same row straight from a token list, without any cache: the engine-free reference the tests compare
// against.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "async_scheduling.h"
#include "engine/model_runner.h"
#include "engine/sampler.h"

namespace pagoda::engine::testing {

inline uint64_t fake_mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

inline constexpr uint64_t kFakeStateInit = 0x1234567887654321ull;
inline uint64_t fake_fold(uint64_t h, int32_t token) {
    return fake_mix(h ^ (static_cast<uint64_t>(token) + 1));
}

inline void fake_logits_from_hash(uint64_t h, std::span<float> out) {
    for (size_t v = 0; v < out.size(); ++v) {
        const uint64_t x = fake_mix(h ^ (0xABCDull * (v + 1)));
        out[v] = static_cast<float>(x % 2001) / 200.0f - 5.0f;  // [-5, 5]
    }
}

// Logits for the next token after `tokens`, computed directly.
inline void reference_logits(std::span<const int32_t> tokens, std::span<float> out) {
    uint64_t h = kFakeStateInit;
    for (int32_t t : tokens)
        h = fake_fold(h, t);
    fake_logits_from_hash(h, out);
}

class FakeModelRunner : public ModelRunner {
  public:
    FakeModelRunner(int32_t vocab, int32_t num_blocks, int32_t block_size, int32_t num_state_slots)
        : vocab_(vocab),
          block_size_(block_size),
          kv_(static_cast<size_t>(num_blocks) * block_size, -1),
          state_(num_state_slots, 0) {}

    int32_t vocab_size() const override { return vocab_; }

    StepOutput execute(const StepInput& in) override {
        const ForwardBatch& b = in.batch;
        ++steps_;
        if (before_step) before_step(steps_);
        if (steps_ == fail_at_step) {
            StepOutput out;
            out.status = Status::error("injected failure");
            return out;
        }
        if (b.block_size != block_size_) fail("block size");
        if (static_cast<int32_t>(b.query_start_loc.size()) != b.num_seqs + 1 || b.query_start_loc[0] != 0 ||
            b.query_start_loc[b.num_seqs] != b.num_tokens)
            fail("query_start_loc");
        for (const StateCopy& c : in.state_restores)
            state_.at(c.dst_slot) = state_.at(c.src_slot);
        logits_.assign(b.logits_indices.size() * static_cast<size_t>(vocab_), 0.0f);
        size_t next_row = 0;
        for (int32_t s = 0; s < b.num_seqs; ++s) {
            const int32_t q0 = b.query_start_loc[s], q1 = b.query_start_loc[s + 1];
            const int32_t ctx = b.seq_lens[s] - (q1 - q0);
            if (ctx < 0 || q1 <= q0) fail("seq_lens / query lengths");
            const bool hybrid = !state_.empty();
            uint64_t* st = nullptr;
            if (hybrid) {
                st = &state_.at(b.state_slots[s]);
                if (ctx == 0) *st = kFakeStateInit;
            }
            for (int32_t t = q0; t < q1; ++t) {
                const int32_t pos = ctx + (t - q0);
                if (b.positions[t] != pos) fail("positions");
                const int32_t block = b.block_tables[static_cast<size_t>(s) * b.max_blocks_per_seq + pos / block_size_];
                const int64_t slot = static_cast<int64_t>(block) * block_size_ + pos % block_size_;
                if (b.slot_mapping[t] != slot) fail("slot_mapping differs from the block table");
                kv_.at(slot) = b.token_ids[t];
                if (hybrid) *st = fake_fold(*st, b.token_ids[t]);
            }
            // The requested rows of this sequence, in order: tokens read back from the KV for positions 0..p.
            for (; next_row < b.logits_indices.size() && b.logits_indices[next_row] < q1; ++next_row) {
                const int32_t row = b.logits_indices[next_row];
                if (row < q0) fail("logits_indices out of order");
                uint64_t h = kFakeStateInit;
                for (int32_t pos = 0; pos <= ctx + (row - q0); ++pos) {
                    const int32_t block =
                        b.block_tables[static_cast<size_t>(s) * b.max_blocks_per_seq + pos / block_size_];
                    h = fake_fold(h, kv_.at(static_cast<size_t>(block) * block_size_ + pos % block_size_));
                }
                if (hybrid && row == q1 - 1) {
                    if (*st != h) ++state_mismatches_;
                    h = *st;  // the state decides the last row's logits in hybrid models
                }
                fake_logits_from_hash(h, std::span<float>(logits_).subspan(next_row * vocab_, vocab_));
            }
        }
        if (next_row != b.logits_indices.size()) fail("logits_indices out of order");
        for (const StateCopy& c : in.state_saves)
            state_.at(c.dst_slot) = state_.at(c.src_slot);
        StepOutput out;
        out.logits = logits_;
        if (samples_on_runner) sample_here(in, out);
        return out;
    }

    // Test switch: sample the rows in input.sample_rows here and return only the other rows, as a runner with a
    // device sampler does (ModelEngineRunner on CUDA), so the engine's handling of that contract is tested on the CPU.
    bool samples_on_runner = false;

    // Test hook, run at the start of each step (1-based step number): on the engine thread, or on the
    // PipelinedRunner's worker with async scheduling.
    std::function<void(int64_t)> before_step;
    int64_t fail_at_step = -1;  // this step returns an error

    int64_t steps() const { return steps_; }
    int64_t state_mismatches() const { return state_mismatches_; }
    const std::string& error() const { return error_; }

  private:
    void sample_here(const StepInput& in, StepOutput& out) {
        if (!sampler_) sampler_.emplace(vocab_);
        if (in.sample_rows.size() != in.sampling.size()) fail("sample_rows and sampling differ");
        if (in.await_sampling_inputs) in.await_sampling_inputs();  // as a device sampler must
        samples_.clear();
        host_rows_.clear();
        size_t next = 0;
        for (size_t row = 0; row * vocab_ < logits_.size(); ++row) {
            const std::span<const float> lg = std::span<const float>(logits_).subspan(row * vocab_, vocab_);
            if (next < in.sample_rows.size() && static_cast<size_t>(in.sample_rows[next]) == row)
                samples_.push_back(sampler_->sample(lg, in.sampling[next++]));
            else
                host_rows_.insert(host_rows_.end(), lg.begin(), lg.end());
        }
        if (next != in.sample_rows.size()) fail("sample_rows out of order");
        out.logits = host_rows_;
        out.samples = samples_;
    }
    void fail(const char* what) {
        if (error_.empty()) error_ = what;
    }
    int32_t vocab_;
    int32_t block_size_;
    std::vector<int32_t> kv_;
    std::vector<uint64_t> state_;
    std::vector<float> logits_;
    std::optional<Sampler> sampler_;
    std::vector<SampleResult> samples_;
    std::vector<float> host_rows_;
    int64_t steps_ = 0;
    int64_t state_mismatches_ = 0;
    std::string error_;
};

}  // namespace pagoda::engine::testing
