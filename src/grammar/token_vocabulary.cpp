#include "grammar/token_vocabulary.h"

#include <algorithm>

namespace pagoda::grammar {

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes, std::span<const int32_t> excluded)
    : bytes_(std::move(token_bytes)) {
    std::vector<uint8_t> skip(bytes_.size(), 0);
    for (int32_t id : excluded)
        if (id >= 0 && id < size()) skip[id] = 1;
    for (int32_t id = 0; id < size(); ++id)
        if (!skip[id] && !bytes_[id].empty()) sorted_.push_back(id);
    std::sort(sorted_.begin(), sorted_.end(),
              [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b] || (bytes_[a] == bytes_[b] && a < b); });
    lcp_.assign(sorted_.size(), 0);
    for (size_t i = 1; i < sorted_.size(); ++i) {
        const std::string& a = bytes_[sorted_[i - 1]];
        const std::string& b = bytes_[sorted_[i]];
        size_t n = 0;
        while (n < a.size() && n < b.size() && a[n] == b[n])
            ++n;
        lcp_[i] = static_cast<int32_t>(n);
    }
}

}  // namespace pagoda::grammar
