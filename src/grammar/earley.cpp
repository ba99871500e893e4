#include "grammar/earley.h"

#include "common/check.h"

namespace pagoda::grammar {

namespace {

uint64_t key_of(Item it) {
    return (static_cast<uint64_t>(it.pos) << 32) | it.origin;
}

uint64_t hash_of(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
}

}  // namespace

EarleyState::EarleyState(const Grammar& grammar) : g_(grammar), keys_(256), stamps_(256, 0) {
    reset();
}

void EarleyState::add(Item it) {
    // Keep the table at most half full.
    if ((in_set_ + 1) * 2 > keys_.size()) {
        const size_t begin = set_begin_.back();
        keys_.assign(keys_.size() * 2, 0);
        stamps_.assign(stamps_.size() * 2, 0);
        ++stamp_;
        in_set_ = 0;
        for (size_t i = begin; i < items_.size(); ++i) {
            const uint64_t k = key_of(items_[i]);
            size_t h = hash_of(k) & (keys_.size() - 1);
            while (stamps_[h] == stamp_)
                h = (h + 1) & (keys_.size() - 1);
            stamps_[h] = stamp_, keys_[h] = k;
            ++in_set_;
        }
    }
    const uint64_t k = key_of(it);
    size_t h = hash_of(k) & (keys_.size() - 1);
    while (stamps_[h] == stamp_) {
        if (keys_[h] == k) return;
        h = (h + 1) & (keys_.size() - 1);
    }
    stamps_[h] = stamp_, keys_[h] = k;
    ++in_set_;
    items_.push_back(it);
}

void EarleyState::closure(size_t begin) {
    const uint32_t here = static_cast<uint32_t>(set_begin_.size() - 1);
    for (size_t i = begin; i < items_.size(); ++i) {
        const Item it = items_[i];
        const Element& e = g_.program[it.pos];
        switch (e.kind) {
            case Element::kBytes:
                if (e.star) add({it.pos + 1, it.origin});
                break;
            case Element::kRule:
                for (uint32_t a : g_.rule_alts[e.arg])
                    add({a, here});
                if (e.star || g_.nullable[e.arg]) add({it.pos + 1, it.origin});
                break;
            case Element::kEnd: {
                if (it.origin == here) break;  // an empty match: the nullable rule was skipped when predicted
                if (it.origin < floor_) tainted_.back() = 1;
                const size_t ob = set_begin_[it.origin], oe = set_begin_[it.origin + 1];
                for (size_t j = ob; j < oe; ++j) {
                    const Item w = items_[j];
                    const Element& we = g_.program[w.pos];
                    if (we.kind == Element::kRule && we.arg == e.arg) add({we.star ? w.pos : w.pos + 1, w.origin});
                }
                break;
            }
        }
    }
}

void EarleyState::reset() {
    items_.clear();
    set_begin_.assign(1, 0);
    tainted_.assign(1, 0);
    floor_ = 0;
    ++stamp_;
    in_set_ = 0;
    add({g_.start_pos, 0});
    closure(0);
}

bool EarleyState::advance(uint8_t byte) {
    const size_t prev = set_begin_.back(), prev_end = items_.size();
    const uint8_t parent_taint = tainted_.back();
    set_begin_.push_back(static_cast<uint32_t>(prev_end));
    tainted_.push_back(parent_taint);
    ++stamp_;
    in_set_ = 0;
    for (size_t i = prev; i < prev_end; ++i) {
        const Item it = items_[i];
        const Element& e = g_.program[it.pos];
        if (e.kind == Element::kBytes && g_.byte_sets[e.arg].has(byte)) add({e.star ? it.pos : it.pos + 1, it.origin});
    }
    if (items_.size() == prev_end) {
        set_begin_.pop_back();
        tainted_.pop_back();
        return false;
    }
    closure(prev_end);
    return true;
}

void EarleyState::truncate(size_t n) {
    PAGODA_CHECK(n >= 1 && n <= set_begin_.size());
    if (n == set_begin_.size()) return;
    items_.resize(set_begin_[n]);
    set_begin_.resize(n);
    tainted_.resize(n);
}

bool EarleyState::can_end() const {
    const size_t last = set_begin_.size() - 1;
    const Item* d = set_data(last);
    for (size_t i = 0, n = set_size(last); i < n; ++i)
        if (d[i].pos == g_.accept_pos && d[i].origin == 0) return true;
    return false;
}

bool EarleyState::can_continue() const {
    const size_t last = set_begin_.size() - 1;
    const Item* d = set_data(last);
    for (size_t i = 0, n = set_size(last); i < n; ++i)
        if (g_.program[d[i].pos].kind == Element::kBytes) return true;
    return false;
}

void EarleyState::set_floor(size_t floor) {
    floor_ = floor;
    tainted_.back() = 0;
}

}  // namespace pagoda::grammar
