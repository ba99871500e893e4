// An Earley recognizer over bytes for a Grammar: one item set per input position, kept so that the input can be
// extended byte by byte and rolled back (the mask search walks token prefixes and undoes them). Starred elements
// loop in place, so repetition keeps sets small; nullable rules are handled when predicted (Aycock & Horspool).
//
// For the matcher's cache it also reports whether advancing consulted any set before a chosen "floor" position: a
// completion that reaches into older sets depends on the context below the floor; one that does not depends only on
// the floor's set.
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/grammar.h"

namespace pagoda::grammar {

struct Item {
    uint32_t pos = 0;     // the element after the dot, in Grammar::program
    uint32_t origin = 0;  // the set where the item's rule started
    friend bool operator==(const Item&, const Item&) = default;
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

    const Grammar& grammar() const { return g_; }

  private:
    void add(Item it);
    void closure(size_t begin);

    const Grammar& g_;
    std::vector<Item> items_;
    std::vector<uint32_t> set_begin_;
    std::vector<uint8_t> tainted_;  // per set
    size_t floor_ = 0;
    // Duplicate detection for the set being built: open addressing keyed by item, cleared by bumping the stamp.
    std::vector<uint64_t> keys_;
    std::vector<uint32_t> stamps_;
    uint32_t stamp_ = 0;
    size_t in_set_ = 0;
};

}  // namespace pagoda::grammar
