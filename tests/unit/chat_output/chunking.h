// Chunkings of one text for streaming tests: whole, every two-way split, byte by byte, random.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::chat::testing {

using Chunks = std::vector<std::string_view>;

inline std::vector<Chunks> all_chunkings(std::string_view text, int random_count = 20, uint32_t seed = 1) {
    std::vector<Chunks> out;
    out.push_back({text});
    for (size_t i = 0; i <= text.size(); ++i)
        out.push_back({text.substr(0, i), text.substr(i)});
    Chunks bytes;
    for (size_t i = 0; i < text.size(); ++i)
        bytes.push_back(text.substr(i, 1));
    out.push_back(bytes);
    std::mt19937 rng(seed);
    for (int r = 0; r < random_count; ++r) {
        Chunks c;
        size_t pos = 0;
        while (pos < text.size()) {
            const size_t len = std::uniform_int_distribution<size_t>(0, 7)(rng);
            c.push_back(text.substr(pos, len));
            pos += len;
        }
        out.push_back(c);
    }
    return out;
}

}  // namespace pagoda::chat::testing
