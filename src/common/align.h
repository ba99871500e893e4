// Rounding sizes up to an alignment: where consecutive regions of one allocation start (staged batch arrays, adapter
// slots, kernel workspaces).
#pragma once

#include <cstddef>

namespace pagoda {

// `n` rounded up to a multiple of `alignment` (> 0).
constexpr size_t align_up(size_t n, size_t alignment) {
    return (n + alignment - 1) / alignment * alignment;
}

}  // namespace pagoda
