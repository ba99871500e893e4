// Multi-LoRA as Ops::linear applies it: each projection that adapters may touch points (LinearWeight::lora) at a
// LoraAdapterSet, one entry per adapter slot; a step's ForwardBatch says which slot each token uses. The delta of a
// token t with slot s is y[t, off:off+n] += scale · (x[t] · Aᵀ) · Bᵀ for every slice of slots[s]. A fused projection
// (q/k/v as one qkv) has one slice per part an adapter targets, at that part's rows. Knows nothing about models or
// adapter files (model/lora_adapter.h reads those; model/lora_table.h fills the sets).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tensor/tensor.h"

namespace pagoda {

// The largest rank a kernel handles (vLLM's largest --max-lora-rank choice); the CPU keeps x·Aᵀ on its stack.
inline constexpr int64_t kMaxLoraRank = 512;

// One adapter's low-rank delta on `b.dim(0)` consecutive output features of a projection, from `row_offset` on.
struct LoraSlice {
    int64_t row_offset = 0;
    Tensor a;  // [r, K] F32, on the backend's device
    Tensor b;  // [n, r] F32
    float scale = 1.0f;
};

struct LoraAdapterSet {
    // slots[s]: the slices of the adapter resident in slot s (empty: it does not touch this projection, or the slot
    // is free). Sized once (--max-loras); changed only between steps.
    std::vector<std::vector<LoraSlice>> slots;
};

// A step's tokens grouped by adapter slot (a counting sort of ForwardBatch::lora_slots): tokens of slot s are
// order[offsets[s] .. offsets[s+1]). The CPU loops over the groups; the CUDA path runs one shrink/expand per group.
// Kept across steps (clear keeps the capacity).
struct LoraTokenGroups {
    std::vector<int32_t> order;
    std::vector<int32_t> offsets;  // [num_slots + 1]
    std::vector<int32_t> cursor;   // build()'s scratch

    void build(std::span<const int32_t> token_slots, int32_t num_slots);
    int32_t num_slots() const { return offsets.empty() ? 0 : static_cast<int32_t>(offsets.size()) - 1; }
    std::span<const int32_t> tokens(int32_t slot) const {
        return std::span<const int32_t>(order).subspan(offsets[slot], offsets[slot + 1] - offsets[slot]);
    }
};

}  // namespace pagoda
