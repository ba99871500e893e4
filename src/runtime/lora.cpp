#include "runtime/lora.h"

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

}  // namespace pagoda
