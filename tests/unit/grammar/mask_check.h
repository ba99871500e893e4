// Checking the matcher's masks against a plain reference, for the grammar tests: at every step of a random walk
// through the grammar, the mask must equal "this token's bytes are accepted from here", checked token by token on an
// Earley state of its own (no vocabulary trie, no cache, no budget probe: the slow full walk).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/earley.h"
#include "grammar/matcher.h"

namespace pagoda::grammar::testing {

// Token 0 is EOS (no bytes, excluded from masks); then every single byte (as byte-level BPE has), then multi-byte
// pieces: tokens that cross JSON structure, tokens that are part of a UTF-8 character, duplicates, and `extra`.
inline std::shared_ptr<const TokenVocabulary> small_vocab(std::vector<std::string> extra = {}) {
    std::vector<std::string> t{""};
    for (int c = 0; c < 256; ++c)
        t.emplace_back(1, static_cast<char>(c));
    for (const char* s : {"{\"",          "\":",      "\",",
                          "\"}",          "\"}]",     "name",
                          "\"name\":\"",  "\xc3\xa9", "\xc3",
                          "\xa9",         "\xe2\x82", "\xac\"",
                          "\xe2\x82\xac", "123",      "true",
                          "null",         "\\n",      "\\u00",
                          "e9",           "ab\"c",    "\",\"",
                          "\":[",         "],\"",     "\n",
                          "\t",           " \"",      "\\\"",
                          "2024-",        "01",       "-0",
                          ".5",           "e+",       "yes",
                          "no",           "no way",   "\"}\"",
                          "{}",           "[]",       "\xf0\x9f\x98\x80",
                          "\x80",         "a\\",      "ok"})
        t.emplace_back(s);
    t.emplace_back("true");  // a duplicate id for the same bytes
    for (std::string& s : extra)
        t.push_back(std::move(s));
    const int32_t eos[] = {0};
    return std::make_shared<TokenVocabulary>(std::move(t), eos);
}

inline std::shared_ptr<const CompiledGrammar> bind_vocab(const Result<GrammarSource>& src,
                                                         std::shared_ptr<const TokenVocabulary> vocab,
                                                         int64_t cache_min_walked_bytes = 0) {
    EXPECT_TRUE(src.ok()) << src.message();
    if (!src.ok()) return nullptr;
    auto g = compile_grammar(*src);
    EXPECT_TRUE(g.ok()) << g.message();
    if (!g.ok()) return nullptr;
    return std::make_shared<CompiledGrammar>(std::move(g).value(), std::move(vocab), cache_min_walked_bytes);
}

struct WalkStats {
    int steps = 0;
    int hits = 0;    // masks from the cache
    int probed = 0;  // masks shared by the counts of a bounded repetition
};

// Random walks (a uniformly drawn allowed token per step, ending now and then where the grammar may end); every
// `check_every`-th mask is compared with the reference for every token.
inline WalkStats check_walks(const std::shared_ptr<const CompiledGrammar>& g, int walks, int max_steps, uint32_t seed,
                             int check_every = 1) {
    WalkStats stats;
    if (!g) return stats;
    const TokenVocabulary& v = g->vocab();
    std::mt19937 rng(seed);
    for (int w = 0; w < walks; ++w) {
        GrammarMatcher m(g);
        EarleyState ref(g->grammar());
        for (int step = 0; step < max_steps; ++step) {
            std::vector<uint32_t> mask(mask_words(v.size()), 0);
            const bool eos = m.fill_mask(mask);
            ++stats.steps;
            stats.hits += m.last_stats().cache_hit;
            stats.probed += m.last_stats().probed;
            std::vector<int32_t> allowed;
            const size_t base = ref.num_sets();
            for (int32_t id = 0; id < v.size(); ++id) {
                const bool bit = (mask[id / 32] >> (id % 32)) & 1;
                if (bit) allowed.push_back(id);
                if (step % check_every != 0) continue;
                bool want = !v.bytes(id).empty();  // EOS and special tokens have no bytes here
                for (unsigned char c : v.bytes(id))
                    if (!(want = ref.advance(c))) break;
                ref.truncate(base);
                if (bit != want) {
                    ADD_FAILURE() << "walk " << w << " step " << step << " token " << id << " '" << v.bytes(id)
                                  << "': mask " << bit << ", reference " << want;
                    return stats;
                }
            }
            EXPECT_EQ(eos, ref.can_end());
            if (allowed.empty()) {
                EXPECT_TRUE(eos) << "a dead end: no token and no EOS";
                break;
            }
            if (eos && rng() % 4 == 0) break;
            const int32_t pick = allowed[rng() % allowed.size()];
            EXPECT_TRUE(m.accept_token(pick));
            for (unsigned char c : v.bytes(pick))
                EXPECT_TRUE(ref.advance(c));
        }
    }
    return stats;
}

}  // namespace pagoda::grammar::testing
