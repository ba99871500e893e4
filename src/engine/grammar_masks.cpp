#include "engine/grammar_masks.h"

#include <algorithm>

#include "common/check.h"

namespace pagoda::engine {

GrammarMasks::GrammarMasks(int32_t vocab_size, std::vector<int32_t> eos_token_ids)
    : words_(grammar::mask_words(vocab_size)), eos_(std::move(eos_token_ids)) {}

GrammarMasks::~GrammarMasks() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
}

void GrammarMasks::begin_step(size_t rows) {
    wait();
    storage_.resize(rows * words_);  // keeps its capacity: steady-state steps do not allocate
    queued_.clear();
}

std::span<const uint32_t> GrammarMasks::mask(size_t row) const {
    PAGODA_CHECK((row + 1) * words_ <= storage_.size());
    return {storage_.data() + row * words_, words_};
}

void GrammarMasks::add(size_t row, grammar::GrammarMatcher* matcher) {
    queued_.emplace_back(row, matcher);
}

void GrammarMasks::start() {
    if (queued_.empty()) return;
    if (!worker_.joinable()) worker_ = std::thread([this] { run(); });
    {
        std::lock_guard lock(mu_);
        pending_ = true;
    }
    cv_.notify_all();
}

void GrammarMasks::wait() const {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return !pending_; });
}

void GrammarMasks::run() {
    std::unique_lock lock(mu_);
    for (;;) {
        cv_.wait(lock, [this] { return pending_ || stop_; });
        if (stop_) return;
        lock.unlock();
        for (const auto& [row, matcher] : queued_)
            fill(row, *matcher);
        lock.lock();
        pending_ = false;
        cv_.notify_all();
    }
}

void GrammarMasks::fill(size_t row, grammar::GrammarMatcher& matcher) {
    const std::span<uint32_t> m(storage_.data() + row * words_, words_);
    std::fill(m.begin(), m.end(), 0u);
    const bool can_end = matcher.fill_mask(m);
    const bool none = std::all_of(m.begin(), m.end(), [](uint32_t w) { return w == 0; });
    if (can_end || none)
        for (int32_t t : eos_)
            m[static_cast<size_t>(t) >> 5] |= 1u << (t & 31);
}

}  // namespace pagoda::engine
