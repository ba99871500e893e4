#include "grammar/matcher.h"

#include <algorithm>

#include "common/check.h"

namespace pagoda::grammar {

namespace {

// Bounds one grammar's cache (a vocabulary of 152k tokens takes 19 KB of bits per entry: about 800 entries).
constexpr size_t kCacheMaxBytes = size_t{16} << 20;

uint64_t fold(uint64_t h, uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h;
}

size_t common_prefix(std::string_view a, std::string_view b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n])
        ++n;
    return n;
}

void set_bit(std::span<uint32_t> mask, int32_t t) {
    mask[static_cast<size_t>(t) >> 5] |= 1u << (t & 31);
}

void clear_bit(std::span<uint32_t> mask, int32_t t) {
    mask[static_cast<size_t>(t) >> 5] &= ~(1u << (t & 31));
}

void or_words(std::span<uint32_t> mask, const std::vector<uint32_t>& words) {
    for (size_t w = 0; w < words.size(); ++w)
        mask[w] |= words[w];
}

// A key element: the item's program position, its count (or the class of the probed repetition's count) and its
// origin renumbered by distance.
constexpr uint32_t kBelowMin = 0xFFFE, kBetween = 0xFFFF;

uint64_t key_element(uint32_t pos, uint32_t count, uint32_t rel) {
    PAGODA_CHECK(pos < (1u << 24) && count < (1u << 16) && rel < (1u << 24));
    return (static_cast<uint64_t>(pos) << 40) | (static_cast<uint64_t>(count) << 24) | rel;
}

}  // namespace

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab,
                                 int64_t cache_min_walked_bytes)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), cache_min_walked_bytes_(cache_min_walked_bytes) {}

std::shared_ptr<const CompiledGrammar::CachedMask> CompiledGrammar::find(uint64_t hash,
                                                                         std::span<const uint64_t> key) const {
    std::lock_guard lock(mu_);
    auto [b, e] = cache_.equal_range(hash);
    for (auto it = b; it != e; ++it)
        if (std::equal(key.begin(), key.end(), it->second->key.begin(), it->second->key.end())) return it->second;
    return nullptr;
}

void CompiledGrammar::insert(uint64_t hash, std::shared_ptr<const CachedMask> mask) const {
    const size_t bytes = mask->words.size() * 4 + mask->dependent.size() * 8 + mask->key.size() * 8 +
                         mask->by_need.size() * 4 + mask->need_end.size() * 4 + mask->budgeted_words.size() * 4;
    std::lock_guard lock(mu_);
    if (cache_bytes_ + bytes > kCacheMaxBytes) return;
    auto [b, e] = cache_.equal_range(hash);
    for (auto it = b; it != e; ++it)
        if (it->second->key == mask->key) return;  // another sequence filled it meanwhile
    cache_.emplace(hash, std::move(mask));
    cache_bytes_ += bytes;
}

size_t CompiledGrammar::cache_entries() const {
    std::lock_guard lock(mu_);
    return cache_.size();
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), state_(grammar_->grammar()) {}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
    const size_t before = state_.num_sets();
    for (unsigned char b : bytes) {
        if (!state_.advance(b)) {
            state_.truncate(before);
            return false;
        }
    }
    return true;
}

bool GrammarMatcher::accept_token(int32_t id) {
    const TokenVocabulary& v = grammar_->vocab();
    if (id < 0 || id >= v.size() || v.bytes(id).empty()) return false;
    return accept_bytes(v.bytes(id));
}

const RepeatProbe* GrammarMatcher::find_probe(uint32_t& remaining) {
    const size_t p = state_.num_sets() - 1;
    const Item* items = state_.set_data(p);
    const size_t n = state_.set_size(p);
    const std::vector<Element>& program = grammar_->grammar().program;
    const Item* found = nullptr;
    for (size_t i = 0; i < n; ++i) {
        if (!program[items[i].pos].counted() || items[i].count == 0) continue;
        if (found) return nullptr;  // two counts that move together: keyed exactly (ambiguous grammars only)
        found = &items[i];
    }
    if (!found) return nullptr;
    // At its maximum the count is one value (the maximum) that an exact key shares as well; a probe there would only
    // walk the iterations the maximum forbids.
    const Element& e = program[found->pos];
    if (found->count >= e.max) return nullptr;
    // The same repetition at another count as well (it began twice at the same place): keyed exactly.
    for (size_t i = 0; i < n; ++i)
        if (&items[i] != found && items[i].pos == found->pos && items[i].origin == found->origin) return nullptr;
    probe_ = {found->pos, found->origin, found->count, found->count < e.min};
    remaining = e.max - found->count;
    return &probe_;
}

uint64_t GrammarMatcher::relative_key(std::vector<uint64_t>& key, const RepeatProbe* probe) {
    const size_t p = state_.num_sets() - 1;
    const Item* items = state_.set_data(p);
    const size_t n = state_.set_size(p);
    const std::vector<Element>& program = grammar_->grammar().program;
    // Completed items were fully processed when the set was built and take no part in what follows (scans read
    // byte elements, completions look for rule elements): leaving them out lets "after a 3-byte character" and
    // "after an ASCII one" share a key. Older origins are numbered by distance (nearest first), so the same shape
    // at another depth gets the same key.
    std::vector<int32_t>& origins = origins_;
    origins.clear();
    for (size_t i = 0; i < n; ++i)
        if (items[i].origin < p && program[items[i].pos].kind != Element::kEnd)
            origins.push_back(static_cast<int32_t>(items[i].origin));
    std::sort(origins.begin(), origins.end(), std::greater<>());
    origins.erase(std::unique(origins.begin(), origins.end()), origins.end());
    key.clear();
    for (size_t i = 0; i < n; ++i) {
        if (program[items[i].pos].kind == Element::kEnd) continue;
        uint32_t rel = 0xFFFFFFu;
        if (items[i].origin < p) {
            auto it = std::lower_bound(origins.begin(), origins.end(), static_cast<int32_t>(items[i].origin),
                                       std::greater<>());
            rel = static_cast<uint32_t>(it - origins.begin());
        }
        uint32_t count = items[i].count;
        if (probe && items[i].pos == probe->pos && items[i].origin == probe->origin)
            count = probe->below_min ? kBelowMin : kBetween;
        key.push_back(key_element(items[i].pos, count, rel));
    }
    std::sort(key.begin(), key.end());
    uint64_t h = key.size();
    for (uint64_t k : key)
        h = fold(h, k);
    return h;
}

template <typename Found>
void GrammarMatcher::walk(std::span<const IndexRange> ranges, Found&& found) {
    const TokenVocabulary& v = grammar_->vocab();
    const size_t base = state_.num_sets();
    size_t depth = 0;         // bytes of `pushed` on the state
    std::string_view pushed;  // a token whose first `depth` bytes are pushed
    for (const IndexRange r : ranges) {
        for (int32_t k = r.begin; k < r.end;) {
            const std::string_view tok = v.sorted_bytes(k);
            const size_t shared = common_prefix(pushed.substr(0, depth), tok);
            if (shared < depth) {
                state_.truncate(base + shared);
                depth = shared;
            }
            pushed = tok;
            bool ok = true;
            while (depth < tok.size()) {
                ++stats_.walked_bytes;
                if (!state_.advance(static_cast<uint8_t>(tok[depth]))) {
                    ok = false;
                    break;
                }
                ++depth;
            }
            if (ok) {
                found(k, k + 1, true, state_.tainted());
                ++k;
                continue;
            }
            // Every token that shares the first depth + 1 bytes fails at the same byte: they are contiguous in the
            // sorted order, and a binary search finds where they end.
            const std::string_view failed = tok.substr(0, depth + 1);
            int32_t lo = k + 1, hi = r.end;
            while (lo < hi) {
                const int32_t mid = lo + (hi - lo) / 2;
                if (v.sorted_bytes(mid).starts_with(failed))
                    lo = mid + 1;
                else
                    hi = mid;
            }
            found(k, lo, false, state_.tainted());
            k = lo;
        }
    }
    state_.truncate(base);
}

std::shared_ptr<CompiledGrammar::CachedMask> GrammarMatcher::compute(const RepeatProbe* probe,
                                                                     std::span<uint32_t> mask) {
    const TokenVocabulary& v = grammar_->vocab();
    auto entry = std::make_shared<CompiledGrammar::CachedMask>();
    entry->key = key_;
    entry->words.assign(mask_words(v.size()), 0);
    std::vector<std::pair<uint16_t, int32_t>> budgeted;  // (need, token)
    state_.set_probe(probe);
    const IndexRange everything{0, v.num_sorted()};
    walk(std::span(&everything, 1), [&](int32_t begin, int32_t end, bool ok, bool tainted) {
        if (ok && !probe) set_bit(mask, v.sorted(begin));  // a walk without a probe is the real one
        if (tainted) {
            if (!entry->dependent.empty() && entry->dependent.back().end == begin)
                entry->dependent.back().end = end;
            else
                entry->dependent.push_back({begin, end});
        } else if (ok) {
            const uint16_t need = state_.need();
            if (need == 0)
                set_bit(entry->words, v.sorted(begin));
            else
                budgeted.push_back({need, v.sorted(begin)});
        }
    });
    state_.set_probe(nullptr);
    if (budgeted.empty()) return entry;
    std::stable_sort(budgeted.begin(), budgeted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    entry->need_end.assign(static_cast<size_t>(budgeted.back().first) + 1, 0);
    entry->budgeted_words.assign(mask_words(v.size()), 0);
    for (const auto& [need, id] : budgeted) {
        entry->by_need.push_back(id);
        ++entry->need_end[need];
        set_bit(entry->budgeted_words, id);
    }
    for (size_t n = 1; n < entry->need_end.size(); ++n)
        entry->need_end[n] += entry->need_end[n - 1];
    return entry;
}

void GrammarMatcher::apply(const CompiledGrammar::CachedMask& entry, uint32_t remaining, std::span<uint32_t> mask) {
    const TokenVocabulary& v = grammar_->vocab();
    or_words(mask, entry.words);
    if (!entry.by_need.empty()) {
        const size_t total = entry.by_need.size();
        const size_t fit = entry.need_end[std::min<size_t>(remaining, entry.need_end.size() - 1)];
        if (fit == total) {
            or_words(mask, entry.budgeted_words);
        } else if (fit <= total / 2) {
            for (size_t i = 0; i < fit; ++i)
                set_bit(mask, entry.by_need[i]);
        } else {
            // Most fit: all of them less the few that need more (cleared on a copy: `mask` may hold other bits).
            scratch_ = entry.budgeted_words;
            for (size_t i = fit; i < total; ++i)
                clear_bit(scratch_, entry.by_need[i]);
            or_words(mask, scratch_);
        }
    }
    walk(entry.dependent, [&](int32_t begin, int32_t, bool ok, bool) {
        if (ok) set_bit(mask, v.sorted(begin));
    });
}

bool GrammarMatcher::fill_mask(std::span<uint32_t> mask) {
    const TokenVocabulary& v = grammar_->vocab();
    PAGODA_CHECK(mask.size() >= mask_words(v.size()));
    stats_ = {};
    state_.set_floor(state_.num_sets() - 1);
    uint32_t remaining = UINT32_MAX;
    const RepeatProbe* probe = find_probe(remaining);
    stats_.probed = probe != nullptr;
    const uint64_t hash = relative_key(key_, probe);
    if (auto entry = grammar_->find(hash, key_)) {
        stats_.cache_hit = true;
        apply(*entry, remaining, mask);
    } else {
        auto fresh = compute(probe, mask);
        if (stats_.walked_bytes >= grammar_->cache_min_walked_bytes()) grammar_->insert(hash, fresh);
        if (probe) apply(*fresh, remaining, mask);
    }
    return state_.can_end();
}

}  // namespace pagoda::grammar
