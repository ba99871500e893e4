// Structured output in the engine: the step's token masks, one per sampled row whose request has a grammar. A row's
// mask is its matcher's (grammar/matcher.h) plus the EOS ids where the grammar may end; when the grammar has no
// other token left (or, defensively, at a dead end) EOS alone is allowed, so a row always has a token to draw.
//
// The masks are computed on a helper thread while the model runs the step's forward (the design's "GPU work
// overlaps CPU work"): the engine hands the rows over before execute(), and whoever samples waits for them first —
// a device-sampling runner before it builds its sampling batch, the engine before it samples on the host.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "grammar/matcher.h"

namespace pagoda::engine {

class GrammarMasks {
  public:
    GrammarMasks(int32_t vocab_size, std::vector<int32_t> eos_token_ids);
    ~GrammarMasks();
    GrammarMasks(const GrammarMasks&) = delete;
    GrammarMasks& operator=(const GrammarMasks&) = delete;

    // Makes room for `rows` masks for this step and returns where mask `row` will be (the spans stay valid until the
    // next begin_step). Call wait() first if a previous step may still be filling.
    void begin_step(size_t rows);
    std::span<const uint32_t> mask(size_t row) const;
    // Queues mask `row` to be filled from `matcher`; start() hands the queued rows to the helper thread.
    void add(size_t row, grammar::GrammarMatcher* matcher);
    void start();
    // Returns once every started mask is filled. Any thread; cheap when nothing is pending.
    void wait() const;

    size_t words() const { return words_; }

  private:
    void fill(size_t row, grammar::GrammarMatcher& matcher);
    void run();

    size_t words_;
    std::vector<int32_t> eos_;
    std::vector<uint32_t> storage_;
    std::vector<std::pair<size_t, grammar::GrammarMatcher*>> queued_;

    mutable std::mutex mu_;
    mutable std::condition_variable cv_;
    bool pending_ = false;  // started and not finished; guarded by mu_
    bool stop_ = false;
    std::thread worker_;  // started on first use
};

}  // namespace pagoda::engine
