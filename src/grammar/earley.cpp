#include "grammar/earley.h"

#include <algorithm>

#include "common/check.h"

namespace pagoda::grammar {

namespace {

// The table's key; the count is kept beside it.
uint64_t key_of(const Item& it) {
    return (static_cast<uint64_t>(it.pos) << 32) | it.origin;
}

// Field by field: an item is written field by field (add), and reading the freshly written one as a whole would
// stall on store forwarding.
Item copy_of(const Item& it) {
    Item out;
    out.pos = it.pos, out.origin = it.origin, out.count = it.count, out.need = it.need, out.below_min = it.below_min;
    return out;
}

uint64_t hash_of(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
}

}  // namespace

EarleyState::EarleyState(const Grammar& grammar) : g_(grammar), keys_(256), counts_(256), slots_(256), stamps_(256, 0) {
    reset();
}

void EarleyState::grow_table() {
    const size_t begin = set_begin_.back();
    keys_.assign(keys_.size() * 2, 0);
    counts_.assign(counts_.size() * 2, 0);
    slots_.assign(slots_.size() * 2, 0);
    stamps_.assign(stamps_.size() * 2, 0);
    ++stamp_;
    in_set_ = 0;
    for (size_t i = begin; i < items_.size(); ++i) {
        const uint64_t k = key_of(items_[i]);
        size_t h = hash_of(k) & (keys_.size() - 1);
        while (stamps_[h] == stamp_)
            h = (h + 1) & (keys_.size() - 1);
        stamps_[h] = stamp_, keys_[h] = k, counts_[h] = items_[i].count, slots_[h] = static_cast<uint32_t>(i);
        ++in_set_;
    }
}

void EarleyState::add(Item it) {
    if ((in_set_ + 1) * 2 > keys_.size()) grow_table();  // keep the table at most half full
    const uint64_t k = key_of(it);
    size_t h = hash_of(k) & (keys_.size() - 1);
    while (stamps_[h] == stamp_) {
        if (keys_[h] == k && counts_[h] == it.count) {
            if (probing_) merge(slots_[h], it);  // without a probe every need is 0
            return;
        }
        h = (h + 1) & (keys_.size() - 1);
    }
    stamps_[h] = stamp_, keys_[h] = k, counts_[h] = it.count, slots_[h] = static_cast<uint32_t>(items_.size());
    ++in_set_;
    // Field by field, as copy_of.
    Item& slot = items_.emplace_back();
    slot.pos = it.pos, slot.origin = it.origin, slot.count = it.count, slot.need = it.need;
    slot.below_min = it.below_min;
}

void EarleyState::merge(size_t existing, const Item& it) {
    Item& old = items_[existing];
    if (it.need >= old.need && it.below_min >= old.below_min) return;  // no cheaper way to it
    if (it.need <= old.need && it.below_min <= old.below_min && existing >= unexpanded_) {
        old.need = it.need;  // not expanded yet: what follows from it gets the cheaper need
        old.below_min = it.below_min;
        return;
    }
    // Its consequences already carry the dearer need, or the two ways are not comparable: the tokens through here
    // are walked again with the real bound.
    tainted_.back() = 1;
}

template <bool kProbe>
void EarleyState::complete(const Item& done, uint32_t here) {
    if (done.origin == here) return;  // an empty match: the nullable rule was skipped when predicted
    if (done.origin < floor_) tainted_.back() = 1;
    const uint32_t rule = g_.program[done.pos].arg;
    const size_t ob = set_begin_[done.origin], oe = set_begin_[done.origin + 1];
    for (size_t j = ob; j < oe; ++j) {
        const Element& we = g_.program[items_[j].pos];
        if (we.kind != Element::kRule || we.arg != rule) continue;
        const Item w = copy_of(items_[j]);
        if (!may_repeat<kProbe>(w, we)) continue;
        if (!kProbe) {
            add(matched<kProbe>(w, we, 0));
            continue;
        }
        Item next = matched<kProbe>(w, we, std::max(iteration_need<kProbe>(w), done.need));
        next.below_min = next.below_min || done.below_min;
        add(next);
    }
}

template <bool kProbe>
void EarleyState::closure(size_t begin) {
    const uint32_t here = static_cast<uint32_t>(set_begin_.size() - 1);
    for (size_t i = begin; i < items_.size(); ++i) {
        if (kProbe) unexpanded_ = i + 1;  // only a probe merges needs
        const Item it = copy_of(items_[i]);
        const Element& e = g_.program[it.pos];
        if (e.kind == Element::kEnd) {
            complete<kProbe>(it, here);
            continue;
        }
        if (e.kind == Element::kRule && may_repeat<kProbe>(it, e)) {
            const uint16_t need = iteration_need<kProbe>(it);
            const bool below = kProbe && it.below_min;
            for (uint32_t a : g_.rule_alts[e.arg])
                add({a, here, 0, need, below});
        }
        if (may_leave<kProbe>(it, e)) add(left<kProbe>(it));
    }
}

void EarleyState::reset() {
    items_.clear();
    set_begin_.assign(1, 0);
    tainted_.assign(1, 0);
    floor_ = 0;
    probing_ = false;
    ++stamp_;
    in_set_ = 0;
    unexpanded_ = 0;
    add({g_.start_pos, 0});
    closure<false>(0);
}

bool EarleyState::advance(uint8_t byte) {
    return probing_ ? advance_as<true>(byte) : advance_as<false>(byte);
}

template <bool kProbe>
bool EarleyState::advance_as(uint8_t byte) {
    const size_t prev = set_begin_.back(), prev_end = items_.size();
    const uint8_t parent_taint = tainted_.back();
    set_begin_.push_back(static_cast<uint32_t>(prev_end));
    tainted_.push_back(parent_taint);
    ++stamp_;
    in_set_ = 0;
    unexpanded_ = prev_end;
    for (size_t i = prev; i < prev_end; ++i) {
        const Element& e = g_.program[items_[i].pos];
        if (e.kind != Element::kBytes || !g_.byte_sets[e.arg].has(byte)) continue;
        const Item it = copy_of(items_[i]);
        if (may_repeat<kProbe>(it, e)) add(matched<kProbe>(it, e, iteration_need<kProbe>(it)));
    }
    if (items_.size() == prev_end) {
        set_begin_.pop_back();
        tainted_.pop_back();
        return false;
    }
    // A byte taken by an item that left the probed repetition below its minimum: whether it is allowed depends on
    // the count, which the budget does not say.
    if (kProbe)
        for (size_t i = prev_end; i < items_.size(); ++i)
            if (items_[i].below_min) tainted_.back() = 1;
    closure<kProbe>(prev_end);
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
    for (size_t i = 0, n = set_size(last); i < n; ++i) {
        const Element& e = g_.program[d[i].pos];
        if (e.kind == Element::kBytes && (probing_ ? may_repeat<true>(d[i], e) : may_repeat<false>(d[i], e)))
            return true;
    }
    return false;
}

void EarleyState::set_floor(size_t floor) {
    floor_ = floor;
    tainted_.back() = 0;
}

void EarleyState::set_probe(const RepeatProbe* probe) {
    probing_ = probe != nullptr;
    if (probe) probe_ = *probe;
}

uint16_t EarleyState::need() const {
    if (!probing_) return 0;
    const size_t last = set_begin_.size() - 1;
    const Item* d = set_data(last);
    uint16_t n = 0xFFFF;
    for (size_t i = 0, size = set_size(last); i < size; ++i)
        n = std::min(n, d[i].need);
    return n;
}

}  // namespace pagoda::grammar
