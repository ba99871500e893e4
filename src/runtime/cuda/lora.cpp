// CudaOps' multi-LoRA path (runtime/lora.h): the step's tokens are grouped by adapter slot and cut into tiles when the
// batch is staged (stage(), so that a CUDA graph's replay restages them with the batch), and each projection with
// adapters runs one shrink and one expand over every tile (kernels/cuda/lora), reading each slot's matrices at the
// fixed places of the projection's LoraDeviceLayout. The shrink runs beside the projection on a second stream unless
// PAGODA_LORA_OVERLAP=0. Overlapped, PAGODA_CUDA_PROFILE=1's `linear (lora)` row holds the expand and its wait for
// the shrink, not the shrink's own time (that runs beside the projection's row).
#include <algorithm>
#include <cstddef>
#include <string>

#include "runtime/cuda/cuda_ops.h"

namespace pagoda {

static_assert(sizeof(LoraTile) == sizeof(kcu::LoraTileDesc) && offsetof(LoraTile, slot) == 0 &&
                  offsetof(LoraTile, begin) == offsetof(kcu::LoraTileDesc, begin) &&
                  offsetof(LoraTile, count) == offsetof(kcu::LoraTileDesc, count),
              "the kernels read runtime's tiles as they are");
static_assert(kLoraTileRows == kcu::kLoraTileTokens, "one tile size for the host and the kernels");

void CudaOps::group_lora_tokens(const ForwardBatch& b) {
    if (b.lora_slots.empty()) {
        lora_groups_.order.clear();
        lora_groups_.tiles.clear();
        return;
    }
    const auto T = static_cast<int32_t>(b.lora_slots.size());
    int32_t top = -1;
    for (int32_t s : b.lora_slots)
        top = std::max(top, s);
    expect(top < b.lora_slot_count, "linear",
           "a token's LoRA slot " + std::to_string(top) + " is outside the step's " +
               std::to_string(b.lora_slot_count) + " adapter slots (ForwardBatch::lora_slot_count)");
    lora_groups_.build(b.lora_slots, b.lora_slot_count);
    lora_groups_.tile(T, lora_tile_bound(T, b.lora_slot_count));
}

bool CudaOps::lora_args(const Tensor& x, const LoraAdapterSet& set, const Tensor& y, kcu::LoraArgs& a) {
    const LoraDeviceLayout& layout = set.device;
    const auto T = static_cast<int64_t>(lora_slots_.size());
    expect(x.dim(0) == T, "linear",
           "a projection with adapters ran on " + std::to_string(x.dim(0)) + " rows, not the step's " +
               std::to_string(T) + " tokens");
    if (layout.parts.empty()) return false;  // no adapter can target this projection
    expect(layout.base != nullptr, "linear", "a projection with adapters has no adapter slots on the device");
    expect(layout.K == x.dim(1) && layout.parts.size() <= static_cast<size_t>(kcu::kLoraMaxParts) &&
               layout.parts.back().row_offset + layout.parts.back().rows <= y.dim(1),
           "linear", "the adapter slots' layout does not fit the projection");
    a = kcu::LoraArgs{};
    a.x = x.data_as<float>();
    a.x_stride = x.stride(0);
    a.y = y.data_as<float>();
    a.y_stride = y.stride(0);
    a.slots = layout.base;
    a.slot_stride = static_cast<int64_t>(layout.slot_stride);
    a.rank = layout.rank;
    a.K = layout.K;
    a.num_parts = static_cast<int32_t>(layout.parts.size());
    for (size_t p = 0; p < layout.parts.size(); ++p) {
        const LoraDeviceLayout::Part& part = layout.parts[p];
        a.parts[p] = {part.row_offset, part.rows, static_cast<int64_t>(part.a_offset),
                      static_cast<int64_t>(part.b_offset), static_cast<int64_t>(part.rank_offset)};
        a.max_rows = std::max(a.max_rows, part.rows);
    }
    // The token order and the tiles came up with the step's arrays (stage()).
    const void* arrays[2];
    resolve({{lora_groups_.order.data(), lora_groups_.order.size() * sizeof(int32_t)},
             {lora_groups_.tiles.data(), lora_groups_.tiles.size() * sizeof(LoraTile)}},
            arrays);
    a.order = static_cast<const int32_t*>(arrays[0]);
    a.tiles = static_cast<const kcu::LoraTileDesc*>(arrays[1]);
    a.num_tiles = static_cast<int32_t>(lora_groups_.tiles.size());
    // Sized for the most parts and the table's rank, and this projection's K ranges: the runner's warm-up step runs
    // every projection at the most tokens, so no later step grows it (growing waits for the stream, and a recorded
    // step must find it in place).
    expect(lora_groups_.order.size() <= static_cast<size_t>(T), "linear", "more LoRA rows than the step's tokens");
    a.u_rows = T;
    a.tile_tokens = static_cast<int32_t>(std::min<int64_t>(T, kcu::kLoraTileTokens));
    a.tensor_cores = lora_tensor_cores_;
    a.u = static_cast<float*>(lora_shrunk_.get(
        static_cast<size_t>(kcu::lora_splits(layout.K) * T * kcu::kLoraMaxParts * layout.rank) * sizeof(float),
        stream_));
    return true;
}

// The shrink reads only x (and the slots, written before the step), never y: nothing the projection does is in its
// way. Overlapped, stream_ waits for it only before the expand (the join), so every later op of the step, and the
// step's end, still come after it.
void CudaOps::begin_lora(const kcu::LoraArgs& a) {
    const auto profile = profiler_.scope("linear (lora)");
    if (!lora_overlap_) return kcu::launch_lora_shrink(a, stream_);
    PAGODA_CUDA_OK(cudaEventRecord(lora_fork_, stream_));
    PAGODA_CUDA_OK(cudaStreamWaitEvent(lora_stream_, lora_fork_, 0));
    kcu::launch_lora_shrink(a, lora_stream_);
    PAGODA_CUDA_OK(cudaEventRecord(lora_join_, lora_stream_));
}

void CudaOps::finish_lora(const kcu::LoraArgs& a) {
    const auto profile = profiler_.scope("linear (lora)");
    if (lora_overlap_) PAGODA_CUDA_OK(cudaStreamWaitEvent(stream_, lora_join_, 0));
    kcu::launch_lora_expand(a, stream_);
}

}  // namespace pagoda
