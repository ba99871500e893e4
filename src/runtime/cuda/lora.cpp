// CudaOps' multi-LoRA path (runtime/lora.h): the step's tokens are grouped by adapter slot once (begin_step), the
// groups' token lists uploaded once, and each projection with adapters runs, per slot with tokens and per slice of
// that slot, the gathered shrink and expand kernels (kernels/cuda/lora). Steps with adapters are never recorded into
// CUDA graphs (DecodeGraphs::accepts), so the uploads here need no staging for a replay.
#include <algorithm>

#include "runtime/cuda/cuda_ops.h"

namespace pagoda {

void CudaOps::begin_lora_step(const ForwardBatch& b) {
    lora_slots_ = b.lora_slots;
    if (lora_slots_.empty()) return;
    if (capturing_) {  // the token lists below are copied from pageable memory: not recordable
        capture_failed_ = true;
        return;
    }
    int32_t slots = 0;
    for (int32_t s : lora_slots_)
        slots = std::max(slots, s + 1);
    lora_groups_.build(lora_slots_, slots);
    const size_t bytes = lora_groups_.order.size() * sizeof(int32_t);
    if (bytes > 0)
        PAGODA_CUDA_OK(cudaMemcpyAsync(lora_tokens_.get(bytes, stream_), lora_groups_.order.data(), bytes,
                                       cudaMemcpyHostToDevice, stream_));
}

void CudaOps::add_lora(const Tensor& x, const LoraAdapterSet& set, const Tensor& y) {
    expect(x.dim(0) == static_cast<int64_t>(lora_slots_.size()), "linear",
           "a projection with adapters ran on " + std::to_string(x.dim(0)) + " rows, not the step's " +
               std::to_string(lora_slots_.size()) + " tokens");
    const auto profile = profiler_.scope("linear (lora)");
    const auto* tokens =
        static_cast<const int32_t*>(lora_tokens_.get(lora_groups_.order.size() * sizeof(int32_t), stream_));
    const int32_t slots = std::min(lora_groups_.num_slots(), static_cast<int32_t>(set.slots.size()));
    // One shrink buffer for every slice: a reallocation between launches would free memory still in use.
    int64_t max_rank = 0;
    for (int32_t s = 0; s < slots; ++s)
        for (const LoraSlice& slice : set.slots[static_cast<size_t>(s)])
            max_rank = std::max(max_rank, slice.a.dim(0));
    if (max_rank == 0) return;
    auto* u = static_cast<float*>(
        lora_shrunk_.get(lora_slots_.size() * static_cast<size_t>(max_rank) * sizeof(float), stream_));
    for (int32_t s = 0; s < slots; ++s) {
        const int64_t n = static_cast<int64_t>(lora_groups_.tokens(s).size());
        if (n == 0) continue;
        const int32_t* group = tokens + lora_groups_.offsets[static_cast<size_t>(s)];
        for (const LoraSlice& slice : set.slots[static_cast<size_t>(s)]) {
            const int64_t rank = slice.a.dim(0), K = slice.a.dim(1), N = slice.b.dim(0);
            expect(K == x.dim(1) && slice.row_offset + N <= y.dim(1) && slice.a.device() == x.device(), "linear",
                   "a LoRA slice does not fit its projection");
            kcu::launch_lora_shrink(
                {x.data_as<float>(), x.stride(0), slice.a.data_as<float>(), rank, K, slice.scale, group, n, u},
                stream_);
            kcu::launch_lora_expand(
                {u, slice.b.data_as<float>(), rank, N, y.data_as<float>(), y.stride(0), slice.row_offset, group, n},
                stream_);
        }
    }
}

}  // namespace pagoda
