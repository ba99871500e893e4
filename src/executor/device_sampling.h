// The bridge from the engine's sampling to a device sampler (runtime/device_sampler.h). Each sampled row becomes a
// SampleRow, and everything the CPU sampler's process() does to individual tokens (logit_bias, the min_tokens mask
// of EOS and stop ids, repetition, frequency and presence penalties) becomes one LogitEdit per touched token, with
// the same float operations in the same order; the request's uniform draw is computed here with uniform_for. So a
// device sampler that follows engine/sampler.cpp's algorithm draws the same tokens as the CPU one.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampler.h"
#include "kernels/sampling_rows.h"

namespace pagoda::executor {

class DeviceSamplingBatch {
  public:
    explicit DeviceSamplingBatch(int32_t vocab_size);

    void clear();
    // Appends the row that samples logits row `logits_row` for `ctx` (its params resolved).
    void add(const engine::SamplingContext& ctx, int32_t logits_row);

    std::span<const kernels::SampleRow> rows() const { return rows_; }
    std::span<const kernels::LogitEdit> edits() const { return edits_; }
    // The structured-output masks the rows' mask_row index, mask_words() words each.
    std::span<const uint32_t> masks() const { return masks_; }
    size_t mask_words() const { return mask_words_; }

  private:
    kernels::LogitEdit& edit(int32_t token);

    std::vector<kernels::SampleRow> rows_;
    std::vector<kernels::LogitEdit> edits_;
    std::vector<uint32_t> masks_;
    size_t mask_words_;
    std::vector<int32_t> edit_of_;  // per token: its edit in the current row, or -1 (reset after each row)
    std::vector<int32_t> counts_;   // per token: occurrences in the output (reset after each row)
};

engine::SampleResult to_sample_result(const kernels::SampledToken& t);

// What a device does with a row's edits, on the host: the reference the tests compare with Sampler::process.
void apply_edits(std::span<float> logits, std::span<const kernels::LogitEdit> edits);

}  // namespace pagoda::executor
