// DeviceSampler: samples logits rows where they were computed, so a device backend copies a token per row to the
// host instead of the whole vocabulary (152k floats a row for Qwen). The rows and their edits come from the engine
// (executor/device_sampling.h), which defines what they mean; this layer only moves them and runs the kernel.
#pragma once

#include <memory>
#include <span>

#include "common/status.h"
#include "kernels/sampling_rows.h"
#include "runtime/backend.h"

namespace pagoda {

class DeviceSampler {
  public:
    virtual ~DeviceSampler() = default;
    // `logits`: an F32 [R, V] tensor on the sampler's device; the rows named by `rows` are overwritten. `masks`:
    // the structured-output token masks rows point at (SampleRow::mask_row), ceil(V / 32) words each; may be empty.
    // `out` gets one result per row; a row whose every token was masked out gets token -1 (engine::kNoToken) with
    // error = 1. An error Status (never an abort) only when the arguments do not fit.
    virtual Status sample(const Tensor& logits, std::span<const kernels::SampleRow> rows,
                          std::span<const kernels::LogitEdit> edits, std::span<const uint32_t> masks,
                          std::span<kernels::SampledToken> out) = 0;
};

// A sampler for `backend`'s device, or nullptr when the backend samples on the host (the CPU backend).
std::unique_ptr<DeviceSampler> make_device_sampler(Backend& backend);

}  // namespace pagoda
