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

// Where a device backend keeps one projection's adapters (model::LoraTable on a device). Every slot holds, for each
// part of the projection (q, k and v of a fused q/k/v; the projection itself when it is not fused), the rank of its
// adapter there (an int32; 0 where the adapter does not touch the part), A [rank, K] and B [rows, rank] in bf16 (as
// vLLM keeps adapters in the model's dtype; the host path keeps F32), at
// the same offsets from the slot's start, slots `slot_stride` bytes apart. The matrices have room for the table's
// largest rank (--max-lora-rank): an adapter of a lower rank fills A's first rows and B's first columns, and B is
// stored times the adapter's scale; what lies beyond the part's rank is never read. So a kernel finds slot s's
// matrices and ranks from s alone, and a recorded step (a CUDA graph) stays right when other adapters move in.
struct LoraDeviceLayout {
    struct Part {
        int64_t row_offset = 0;             // the part's first output feature in the projection's output
        int64_t rows = 0;                   // its output features
        size_t a_offset = 0, b_offset = 0;  // bytes from a slot's start
        size_t rank_offset = 0;             // bytes from a slot's start: the int32 rank of the slot's adapter here
    };
    const std::byte* base = nullptr;  // slot 0's start; null on the host, and until the slots are reserved
    size_t slot_stride = 0;
    int64_t rank = 0, K = 0;
    std::vector<Part> parts;  // in row order
};

struct LoraAdapterSet {
    // The host backend: slots[s] holds the slices of the adapter resident in slot s (empty: it does not touch this
    // projection, or the slot is free). Sized once (--max-loras); changed only between steps.
    std::vector<std::vector<LoraSlice>> slots;
    // A device backend: the slots' fixed places (slots stays empty there).
    LoraDeviceLayout device;
};

// A device kernel's share of a step's adapter tokens: `count` (at most kLoraTileRows) tokens of adapter slot `slot`,
// LoraTokenGroups::order[begin, begin + count). A tile of count 0 is padding: its blocks do nothing.
struct LoraTile {
    int32_t slot = 0, begin = 0, count = 0, unused = 0;
};
inline constexpr int32_t kLoraTileRows = 16;
// The most tiles the tokens of a step can need: each slot's tokens in runs of kLoraTileRows, the last one short. A
// recorded step is laid out for this many (the same for every step of its size), the rest padding.
int32_t lora_tile_bound(int32_t tokens, int32_t slots);

// A step's tokens grouped by adapter slot (a counting sort of ForwardBatch::lora_slots): tokens of slot s are
// order[offsets[s] .. offsets[s+1]). The CPU loops over the groups; the CUDA path launches one shrink and one expand
// a projection over their tiles. Kept across steps (build keeps the capacity).
struct LoraTokenGroups {
    std::vector<int32_t> order;
    std::vector<int32_t> offsets;  // [num_slots + 1]
    std::vector<int32_t> cursor;   // build()'s scratch

    void build(std::span<const int32_t> token_slots, int32_t num_slots);
    // After build: the groups cut into tiles of up to kLoraTileRows tokens, padded with empty tiles to `bound`
    // (lora_tile_bound of the step, at least the tiles needed), and order padded with token 0 to `tokens` entries,
    // so that a step's arrays have one size whatever its adapters (what a CUDA graph's replay needs).
    void tile(int32_t tokens, int32_t bound);
    std::vector<LoraTile> tiles;
    int32_t num_slots() const { return offsets.empty() ? 0 : static_cast<int32_t>(offsets.size()) - 1; }
    std::span<const int32_t> tokens(int32_t slot) const {
        return std::span<const int32_t>(order).subspan(offsets[slot], offsets[slot + 1] - offsets[slot]);
    }
};

}  // namespace pagoda
