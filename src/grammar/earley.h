// An Earley recognizer over bytes for a Grammar: one item set per input position, kept so that the input can be
// extended byte by byte and rolled back (the mask search walks token prefixes and undoes them). Starred elements
// loop in place, so repetition keeps sets small; nullable rules are handled when predicted (Aycock & Horspool).
//
// For the matcher's cache it also reports whether advancing consulted any set before a chosen "floor" position: a
// completion that reaches into older sets depends on the context below the floor; one that does not depends only on
// the floor's set.
//
// A budget probe lets one mask serve every count of a bounded repetition: the probed repetition (one item of the
// floor's set, inside a counted element) ignores its maximum, and each item records the fewest iterations still
// allowed ("budget") that it needs to exist; with the real bound an item exists exactly when its need fits the
// budget left. Where that is not one number (an item reached twice with different needs after it was expanded, or
// through leaving the repetition below its minimum) the set is marked tainted, as context-dependent sets are, and
// the matcher walks those tokens again with the real bound.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "grammar/grammar.h"

namespace pagoda::grammar {

struct Item {
    uint32_t pos = 0;     // the element after the dot, in Grammar::program
    uint32_t origin = 0;  // the set where the item's rule started
    uint32_t count = 0;   // iterations done of a counted element after the dot
    // Under a budget probe only (otherwise 0): the budget this item needs, and whether it left the probed
    // repetition below its minimum (so it depends on the count, not only on the budget).
    uint16_t need = 0;
    bool below_min = false;

    // The item's identity (need and below_min are what is known about it, not part of it).
    bool same(const Item& o) const { return pos == o.pos && origin == o.origin && count == o.count; }
};

// The repetition a budget probe leaves open: the item at (pos, origin) with `count` iterations done in the floor's set.
struct RepeatProbe {
    uint32_t pos = 0, origin = 0, count = 0;
    bool below_min = false;  // count < the element's min: leaving it is not decided by the budget alone
};

class EarleyState {
  public:
    explicit EarleyState(const Grammar& grammar);

    // Back to the empty input.
    void reset();
    // Extends the input by `byte`; false (and nothing changed) when the grammar does not allow it here.
    bool advance(uint8_t byte);
    // Number of sets (input bytes + 1), and dropping sets back to `n` (n >= 1).
    size_t num_sets() const { return set_begin_.size(); }
    void truncate(size_t n);

    // The input so far is a whole sentence of the grammar.
    bool can_end() const;
    // Some byte may follow.
    bool can_continue() const;

    // The items of set `i` (the last: num_sets() - 1).
    const Item* set_data(size_t i) const { return items_.data() + set_begin_[i]; }
    size_t set_size(size_t i) const {
        return (i + 1 < set_begin_.size() ? set_begin_[i + 1] : items_.size()) - set_begin_[i];
    }

    // Context tracking: sets at or above `floor` are local; advance() marks the new set tainted when it (or a set
    // it was built from, at or above the floor) completed an item whose origin is below the floor.
    void set_floor(size_t floor);
    bool tainted() const { return tainted_.back() != 0; }

    // Starts (or with nullptr, ends) a budget probe for the sets built from now on.
    void set_probe(const RepeatProbe* probe);
    // The fewest remaining iterations of the probed repetition under which the last set is not empty (0 without a
    // probe); exact unless tainted().
    uint16_t need() const;

    const Grammar& grammar() const { return g_; }

  private:
    // The steps come in two builds: kProbe false is the plain recognizer (the hot path of every mask walk), true
    // tracks needs for a budget probe.
    template <bool kProbe>
    bool advance_as(uint8_t byte);
    template <bool kProbe>
    void closure(size_t begin);
    template <bool kProbe>
    void complete(const Item& done, uint32_t here);
    void add(Item it);
    void grow_table();
    void merge(size_t existing, const Item& it);

    template <bool kProbe>
    bool probed(const Item& it) const {
        return kProbe && it.pos == probe_.pos && it.origin == probe_.origin;
    }
    template <bool kProbe>
    bool may_repeat(const Item& it, const Element& e) const {
        return !e.counted() || it.count < e.max || probed<kProbe>(it);
    }
    template <bool kProbe>
    bool may_leave(const Item& it, const Element& e) const {
        if (e.star) return true;
        if (e.counted()) return it.count >= e.min || probed<kProbe>(it);
        return e.kind == Element::kRule && g_.nullable[e.arg];
    }
    // The item after one more match of `it`'s element (a byte or a completed rule) that needed `need`. (Without a
    // probe need and below_min are 0: spelled out so that the plain build does not carry them.)
    template <bool kProbe>
    static Item matched(const Item& it, const Element& e, uint16_t need) {
        const bool below = kProbe && it.below_min;
        if (e.counted()) return {it.pos, it.origin, it.count + 1, need, below};
        return {e.star ? it.pos : it.pos + 1, it.origin, 0, need, below};
    }
    // The item after skipping `it`'s element (starred, counted past its minimum, or a nullable rule).
    template <bool kProbe>
    Item left(const Item& it) const {
        if (!kProbe) return {it.pos + 1, it.origin};
        return {it.pos + 1, it.origin, 0, it.need, it.below_min || (probed<kProbe>(it) && probe_.below_min)};
    }
    // The need of an iteration of `it`'s element: under a probe, one more than the probed iterations done
    // (saturated).
    template <bool kProbe>
    uint16_t iteration_need(const Item& it) const {
        if (!kProbe) return 0;
        if (!probed<kProbe>(it)) return it.need;
        const uint32_t n = std::min<uint32_t>(it.count - probe_.count + 1, 0xFFFF);
        return std::max(it.need, static_cast<uint16_t>(n));
    }

    const Grammar& g_;
    std::vector<Item> items_;
    std::vector<uint32_t> set_begin_;
    std::vector<uint8_t> tainted_;  // per set
    size_t floor_ = 0;
    RepeatProbe probe_;
    bool probing_ = false;
    // Duplicate detection for the set being built: open addressing keyed by (pos, origin) and count, each slot
    // naming its item, cleared by bumping the stamp.
    std::vector<uint64_t> keys_;
    std::vector<uint32_t> counts_;
    std::vector<uint32_t> slots_;
    std::vector<uint32_t> stamps_;
    uint32_t stamp_ = 0;
    size_t in_set_ = 0;
    size_t unexpanded_ = 0;  // items of the set being built from here on have not been expanded by closure yet
};

}  // namespace pagoda::grammar
