#include "runtime/lora.h"

#include <algorithm>

#include "common/check.h"

namespace pagoda {

void LoraTokenGroups::build(std::span<const int32_t> token_slots, int32_t num_slots) {
    offsets.assign(static_cast<size_t>(num_slots) + 1, 0);
    for (int32_t s : token_slots) {
        PAGODA_CHECK_MSG(s < num_slots, "a token's LoRA slot is outside the adapter table");
        if (s >= 0) ++offsets[static_cast<size_t>(s) + 1];
    }
    for (size_t i = 1; i < offsets.size(); ++i)
        offsets[i] += offsets[i - 1];
    order.resize(static_cast<size_t>(offsets.back()));
    cursor.assign(offsets.begin(), offsets.end() - 1);
    for (size_t t = 0; t < token_slots.size(); ++t)
        if (const int32_t s = token_slots[t]; s >= 0) order[static_cast<size_t>(cursor[s]++)] = static_cast<int32_t>(t);
}

int32_t lora_tile_bound(int32_t tokens, int32_t slots) {
    // Slot s's n_s tokens take ceil(n_s / R) <= n_s / R + 1 tiles, and at most min(tokens, slots) slots have any.
    return (tokens + kLoraTileRows - 1) / kLoraTileRows + std::min(tokens, slots);
}

void LoraTokenGroups::tile(int32_t tokens, int32_t bound) {
    tiles.clear();
    for (int32_t s = 0; s < num_slots(); ++s)
        for (int32_t begin = offsets[static_cast<size_t>(s)]; begin < offsets[static_cast<size_t>(s) + 1];
             begin += kLoraTileRows)
            tiles.push_back(
                LoraTile{s, begin, std::min(kLoraTileRows, offsets[static_cast<size_t>(s) + 1] - begin), 0});
    PAGODA_CHECK_MSG(static_cast<int32_t>(tiles.size()) <= bound, "more LoRA tiles than the bound allows");
    PAGODA_CHECK_MSG(static_cast<int32_t>(order.size()) <= tokens, "more LoRA tokens than the step has");
    tiles.resize(static_cast<size_t>(bound));
    order.resize(static_cast<size_t>(tokens), 0);
}

}  // namespace pagoda
