// OutputLengthEstimator: how many more tokens a running sequence is expected to generate, learned from how long the
// outputs of earlier sequences ran. Admission control reserves KV blocks for that much growth (scheduler.cpp says
// why). Engine thread only.
//
// The estimate is a survival curve over output length (Kaplan-Meier, actuarial form, on geometric length bins): a
// sequence the model ended (EOS, stop token) is a sample of the output length; one cut short (max_tokens,
// max_model_len, a cancel) and every sequence still running only say "at least this long" (censored samples). So
// the estimate is not biased towards the short outputs that finish first, and a length nobody has reached yet is
// assumed to go on up to the sequence's own limit: with no data at all every sequence is expected to use its whole
// max_tokens. Finished samples fade (each new one scales the old by kDecay), so the curve follows a changing load.
#pragma once

#include <cstdint>
#include <vector>

namespace pagoda::engine {

class OutputLengthEstimator {
  public:
    OutputLengthEstimator();

    // A sequence left after `output_len` tokens; `ended_by_model`: EOS or a stop token ended it (a sample of the
    // length), else it was cut short (it would have run at least this long).
    void record(int32_t output_len, bool ended_by_model);

    // An estimate pass: running sequences count as censored at their current output length. Call begin_pass, then
    // add_running for each running sequence, then end_pass before expected_remaining.
    void begin_pass();
    void add_running(int32_t output_len);
    void end_pass();

    // Expected number of tokens still to come, E[min(L, limit) - produced | L > produced], for a sequence that has
    // produced `produced` tokens and may produce `limit` in all. 0 when produced >= limit.
    double expected_remaining(int32_t produced, int32_t limit) const;

    // The survival curve's value at `length` (the fraction of outputs expected to run longer), for tests.
    double survival(int32_t length) const;

    static constexpr double kDecay = 1.0 - 1.0 / 1024.0;  // weight of the older samples after each new one

  private:
    static constexpr int32_t kDirectLengths = 4096;  // lengths whose bin is looked up in a table (the common ones)

    int32_t bin_of(int32_t length) const;
    double survival_in(int32_t bin, int32_t length) const;
    // The integral of the survival curve over [0, length), `survival` being its value at `length` in `bin`.
    double integral_in(int32_t bin, int32_t length, double survival) const;

    std::vector<int32_t> edges_;       // bin b covers output lengths [edges_[b], edges_[b+1])
    std::vector<uint8_t> direct_bin_;  // bin_of for lengths below kDirectLengths
    std::vector<double> ended_;        // per bin: decayed count of sequences the model ended there
    std::vector<double> cut_;          // per bin: decayed count of sequences cut short there
    std::vector<double> running_;      // per bin: running sequences now there (this pass)
    std::vector<double> hazard_;       // per bin: the fraction of those entering it that end in it
    std::vector<double> s_;            // survival at each edge
    std::vector<double> area_;         // integral of survival from 0 to each edge
};

}  // namespace pagoda::engine
