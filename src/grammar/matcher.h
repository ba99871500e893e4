// CompiledGrammar (a Grammar bound to a vocabulary, shared by every request that uses it) and GrammarMatcher (one
// per generated sequence): the matcher advances on each accepted token's bytes and, per step, fills the mask of the
// tokens that may come next.
//
// The mask search walks the vocabulary's sorted byte strings (a flat trie) through the Earley state, undoing each
// prefix as it goes, and never descends below a prefix the grammar rejects. What makes it cheap in steady state is a
// cache inspired by XGrammar's context-independent tokens: a token whose walk never completes an item that started
// before the current position is accepted or rejected by the current item set alone, whatever lies below it. So a
// mask is cached under the current set with origins renamed relative to the position; on a hit, only the tokens that
// did reach below ("context-dependent": in a JSON string, those that close the string) are walked again.
//
// Inside a bounded repetition (a string's maxLength, a regex {m,n}) the sets at different counts differ only in the
// count, so the key leaves the count out (keeping only whether it is below the minimum; at the maximum it is exact)
// and the mask is computed under a budget probe (earley.h): the walk ignores the maximum and records, per accepted
// token, how many iterations it needs. A step then takes the tokens whose need fits the iterations left: a string
// with maxLength 64 costs one vocabulary walk in all, not one per character.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/earley.h"
#include "grammar/grammar.h"
#include "grammar/token_vocabulary.h"

namespace pagoda::grammar {

// A mask is cached only when computing it walked this many bytes: cheap positions (after '{' only a few first
// bytes are viable) are recomputed rather than kept.
inline constexpr int64_t kCacheMinWalkedBytes = 2048;

// Indices [begin, end) into TokenVocabulary's sorted order.
struct IndexRange {
    int32_t begin = 0, end = 0;
};

class CompiledGrammar {
  public:
    CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab,
                    int64_t cache_min_walked_bytes = kCacheMinWalkedBytes);

    const Grammar& grammar() const { return grammar_; }
    const TokenVocabulary& vocab() const { return *vocab_; }

    struct CachedMask {
        std::vector<uint64_t> key;    // the item set, origins relative to the position
        std::vector<uint32_t> words;  // tokens accepted whatever the context (and the count of a repetition)
        // Tokens accepted whatever the context that need `n` more iterations of the probed repetition: ids by
        // ascending need, need_end[n] = how many need at most n, and the bits of them all.
        std::vector<int32_t> by_need;
        std::vector<uint32_t> need_end;
        std::vector<uint32_t> budgeted_words;
        std::vector<IndexRange> dependent;  // sorted-vocabulary indices that need the context, ascending
    };
    std::shared_ptr<const CachedMask> find(uint64_t hash, std::span<const uint64_t> key) const;
    void insert(uint64_t hash, std::shared_ptr<const CachedMask> mask) const;
    size_t cache_entries() const;
    int64_t cache_min_walked_bytes() const { return cache_min_walked_bytes_; }

  private:
    Grammar grammar_;
    std::shared_ptr<const TokenVocabulary> vocab_;
    int64_t cache_min_walked_bytes_;
    mutable std::mutex mu_;  // guards the cache: requests on other engines may share a grammar
    mutable std::unordered_multimap<uint64_t, std::shared_ptr<const CachedMask>> cache_;
    mutable size_t cache_bytes_ = 0;
};

// Words of a token mask over `vocab_size` tokens (bit t of word t / 32).
inline size_t mask_words(int32_t vocab_size) {
    return (static_cast<size_t>(vocab_size) + 31) / 32;
}

class GrammarMatcher {
  public:
    explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

    // Advances on token `id`'s bytes; false (and no change) when the grammar does not allow them here.
    bool accept_token(int32_t id);
    bool accept_bytes(std::string_view bytes);

    // Sets the bits of the tokens (of the vocabulary; EOS and special tokens excluded) that may come next in
    // `mask`, which must hold at least mask_words(vocab size) words and is not cleared first. Returns whether the
    // grammar may end here, i.e. whether EOS is allowed; when no bit was set and it returns true, only EOS is.
    bool fill_mask(std::span<uint32_t> mask);

    bool can_end() const { return state_.can_end(); }
    // Nothing but the end is possible.
    bool must_end() const { return !state_.can_continue(); }

    // Statistics of the latest fill_mask, for tests and benchmarks.
    struct Stats {
        bool cache_hit = false;
        bool probed = false;       // the mask came from (or went into) an entry shared by a repetition's counts
        int64_t walked_bytes = 0;  // advances tried
    };
    const Stats& last_stats() const { return stats_; }

  private:
    // Walks the sorted-vocabulary indices in `ranges` (ascending) from the current position, calling
    // found(begin, end, accepted, tainted) for an accepted token (end = begin + 1) or a run of rejected ones.
    template <typename Found>
    void walk(std::span<const IndexRange> ranges, Found&& found);
    // The one bounded repetition of the current set with iterations done and more allowed (nullptr when there is
    // none, or more than one), and the iterations it has left.
    const RepeatProbe* find_probe(uint32_t& remaining);
    // The current item set with origins relative to the position, sorted; the probed repetition's count is reduced
    // to its class (below the minimum or not). Returns the key's hash.
    uint64_t relative_key(std::vector<uint64_t>& key, const RepeatProbe* probe);
    // Walks the whole vocabulary from the current position into a new entry: under `probe` when given, otherwise
    // setting the bits of `mask` on the way (that walk is the real one).
    std::shared_ptr<CompiledGrammar::CachedMask> compute(const RepeatProbe* probe, std::span<uint32_t> mask);
    // Sets the bits of the tokens `entry` allows with `remaining` iterations left, walking its dependent tokens.
    void apply(const CompiledGrammar::CachedMask& entry, uint32_t remaining, std::span<uint32_t> mask);

    std::shared_ptr<const CompiledGrammar> grammar_;
    EarleyState state_;
    Stats stats_;
    RepeatProbe probe_;
    std::vector<uint64_t> key_;
    std::vector<int32_t> origins_;
    std::vector<uint32_t> scratch_;
};

}  // namespace pagoda::grammar
