// Fuzzes the structured-output front ends (GBNF, regex, JSON Schema) and the matcher: any bytes must give a grammar
// or an error, never a crash or a hang; a grammar that compiles is then walked for a few steps over a small
// byte-level vocabulary, and every token its mask allows must be accepted (the mask and the matcher agree).
// The first input byte picks the front end; the rest is its text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"

namespace {

using namespace pagoda;
using namespace pagoda::grammar;

std::shared_ptr<const TokenVocabulary> vocab() {
    static const auto v = [] {
        std::vector<std::string> t;
        for (int c = 0; c < 256; ++c)
            t.emplace_back(1, static_cast<char>(c));
        for (const char* s : {"{\"", "\":", "\",", "ab", "\xc3\xa9", "\xe2\x82", "true", "\\n", "12"})
            t.emplace_back(s);
        return std::make_shared<const TokenVocabulary>(std::move(t), std::span<const int32_t>());
    }();
    return v;
}

void walk(const GrammarSource& src) {
    auto g = compile_grammar(src);
    if (!g.ok()) return;
    auto compiled = std::make_shared<const CompiledGrammar>(std::move(g).value(), vocab(), 0);
    GrammarMatcher m(compiled);
    std::vector<uint32_t> mask(mask_words(vocab()->size()));
    for (int step = 0; step < 4; ++step) {
        std::fill(mask.begin(), mask.end(), 0u);
        m.fill_mask(mask);
        int32_t pick = -1;
        for (int32_t t = 0; t < vocab()->size(); ++t) {
            if (!((mask[t / 32] >> (t % 32)) & 1)) continue;
            GrammarMatcher probe = m;
            if (!probe.accept_token(t)) std::abort();  // the mask allowed a token the matcher refuses
            if (pick < 0 || t % 7 == step) pick = t;
        }
        if (pick < 0 || !m.accept_token(pick)) break;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    switch (data[0] % 3) {
        case 0:
            if (auto src = parse_gbnf(text); src.ok()) walk(*src);
            break;
        case 1:
            if (auto src = regex_grammar(text); src.ok()) walk(*src);
            break;
        case 2:
            if (auto schema = Json::parse(text, 64); schema.ok())
                if (auto src = json_schema_grammar(*schema); src.ok()) walk(*src);
            break;
    }
    return 0;
}
