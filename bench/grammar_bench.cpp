// Structured output: the time to compute one token mask (GrammarMatcher::fill_mask) per decoding step, over the real
// Qwen3 vocabulary (151,665 tokens), along the tokens of a valid answer to a JSON schema. "warm" reuses one compiled
// grammar (its mask cache filled by an earlier pass, as when requests share a schema); "cold" compiles the grammar
// afresh every pass (the first request with a new schema). The counter mask_time is seconds per step. Two schemas:
// a 7-property object (nested object, array, enum, integer bounds, email, pattern) and an object of three strings
// with maxLength 64 (bounded repetition; one answer string runs to the limit). Skips, saying why, when the
// vocabulary is absent.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace pagoda;
using namespace pagoda::grammar;

constexpr const char* kMixedSchema = R"({"type":"object","properties":{
  "name":{"type":"string"},
  "age":{"type":"integer","minimum":0,"maximum":150},
  "email":{"type":"string","format":"email"},
  "address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"},
             "zip":{"type":"string","pattern":"^[0-9]{5}$"}},"required":["street","city"]},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":8},
  "role":{"enum":["admin","user","guest"]},
  "notes":{"type":["string","null"]}},
  "required":["name","age","address","tags","role"]})";

constexpr const char* kMixedAnswer =
    R"json({"name":"Ada Lovelace, Countess of Lovelace","age":36,"email":"ada@example.org","address":{"street":"12 St James's Square","city":"London","zip":"12345"},"tags":["mathematics","analytical engine","poetry (of science)"],"role":"admin","notes":"Wrote the first published algorithm \"for\" a machine; née Byron."})json";

// Three strings of at most 64 characters each; "c" is 64 characters long, so its last steps have almost no budget.
constexpr const char* kMaxLengthSchema = R"({"type":"object","properties":{
  "a":{"type":"string","maxLength":64},"b":{"type":"string","maxLength":64},"c":{"type":"string","maxLength":64}},
  "required":["a","b","c"]})";

constexpr const char* kMaxLengthAnswer =
    R"json({"a":"Ada Lovelace","b":"née Byron, \"Enchantress of Numbers\"","c":"The Analytical Engine weaves algebraic patterns like a loom does"})json";

struct Case {
    Grammar grammar;
    std::vector<int32_t> answer;
};

struct Setup {
    std::shared_ptr<const TokenVocabulary> vocab;
    Case mixed, max_length;
};

const Setup* setup() {
    static const std::optional<Setup> s = []() -> std::optional<Setup> {
        const char* env = std::getenv("PAGODA_SHARED_DIR");
        auto tok = Tokenizer::load_from_dir(std::string(env ? env : PAGODA_SHARED_DIR) + "/qwen-tokenizers/qwen3-4b");
        if (!tok.ok()) return std::nullopt;
        Setup out;
        std::vector<std::string> bytes(static_cast<size_t>(tok->vocab_size()));
        std::vector<int32_t> excluded;
        for (int32_t id = 0; id < tok->vocab_size(); ++id) {
            if (tok->is_special(id)) excluded.push_back(id);
            bytes[id] = std::string(tok->token_bytes(id));
        }
        out.vocab = std::make_shared<TokenVocabulary>(std::move(bytes), excluded);
        auto make_case = [&](const char* schema_text, const char* answer) -> std::optional<Case> {
            auto schema = Json::parse(schema_text);
            if (!schema.ok()) return std::nullopt;
            auto src = json_schema_grammar(*schema);
            if (!src.ok()) return std::nullopt;
            auto g = compile_grammar(*src);
            if (!g.ok()) return std::nullopt;
            return Case{std::move(g).value(), tok->encode(answer, /*parse_special=*/false)};
        };
        auto mixed = make_case(kMixedSchema, kMixedAnswer);
        auto max_length = make_case(kMaxLengthSchema, kMaxLengthAnswer);
        if (!mixed || !max_length) return std::nullopt;
        out.mixed = std::move(*mixed);
        out.max_length = std::move(*max_length);
        return out;
    }();
    return s ? &*s : nullptr;
}

// One pass over the answer: a mask per step, then the step's token. Returns the steps.
int64_t pass(const Case& c, const std::shared_ptr<const CompiledGrammar>& g, std::vector<uint32_t>& mask,
             int64_t& hits) {
    GrammarMatcher m(g);
    for (int32_t token : c.answer) {
        std::fill(mask.begin(), mask.end(), 0u);
        m.fill_mask(mask);
        hits += m.last_stats().cache_hit;
        if (!((mask[token / 32] >> (token % 32)) & 1) || !m.accept_token(token)) std::abort();  // the answer is valid
    }
    std::fill(mask.begin(), mask.end(), 0u);
    if (!m.fill_mask(mask)) std::abort();  // and complete
    return static_cast<int64_t>(c.answer.size()) + 1;
}

void run(benchmark::State& state, Case Setup::*which, bool warm) {
    const Setup* s = setup();
    if (!s) {
        state.SkipWithError("the Qwen3 vocabulary (../shared/qwen-tokenizers/qwen3-4b) is not available");
        return;
    }
    const Case& c = s->*which;
    std::vector<uint32_t> mask(mask_words(s->vocab->size()));
    auto shared = std::make_shared<const CompiledGrammar>(c.grammar, s->vocab);
    int64_t hits = 0, steps = 0;
    if (warm) pass(c, shared, mask, hits);
    hits = 0;
    for (auto _ : state) {
        auto g = warm ? shared : std::make_shared<const CompiledGrammar>(c.grammar, s->vocab);
        steps += pass(c, g, mask, hits);
    }
    state.counters["steps"] = static_cast<double>(c.answer.size() + 1);
    state.counters["cache_hit_rate"] = steps ? static_cast<double>(hits) / static_cast<double>(steps) : 0.0;
    state.counters["mask_time"] =
        benchmark::Counter(static_cast<double>(steps), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_JsonSchemaMaskWarm(benchmark::State& state) {
    run(state, &Setup::mixed, true);
}
void BM_JsonSchemaMaskCold(benchmark::State& state) {
    run(state, &Setup::mixed, false);
}
void BM_MaxLengthMaskWarm(benchmark::State& state) {
    run(state, &Setup::max_length, true);
}
void BM_MaxLengthMaskCold(benchmark::State& state) {
    run(state, &Setup::max_length, false);
}
BENCHMARK(BM_JsonSchemaMaskWarm)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_JsonSchemaMaskCold)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_MaxLengthMaskWarm)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaxLengthMaskCold)->Unit(benchmark::kMillisecond)->Iterations(2);

}  // namespace

BENCHMARK_MAIN();
