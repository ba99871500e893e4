// Structured output: the time to compute one token mask (GrammarMatcher::fill_mask) per decoding step, over the real
// Qwen3 vocabulary (151,665 tokens), along the tokens of a valid answer to a JSON schema. "warm" reuses one compiled
// grammar (its mask cache filled by an earlier pass, as when requests share a schema); "cold" compiles the grammar
// afresh every pass (the first request with a new schema). The counter mask_time is seconds per step. Skips, saying
// why, when the vocabulary is absent.
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

constexpr const char* kSchema = R"({"type":"object","properties":{
  "name":{"type":"string"},
  "age":{"type":"integer","minimum":0,"maximum":150},
  "email":{"type":"string","format":"email"},
  "address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"},
             "zip":{"type":"string","pattern":"^[0-9]{5}$"}},"required":["street","city"]},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":8},
  "role":{"enum":["admin","user","guest"]},
  "notes":{"type":["string","null"]}},
  "required":["name","age","address","tags","role"]})";

constexpr const char* kAnswer =
    R"json({"name":"Ada Lovelace, Countess of Lovelace","age":36,"email":"ada@example.org","address":{"street":"12 St James's Square","city":"London","zip":"12345"},"tags":["mathematics","analytical engine","poetry (of science)"],"role":"admin","notes":"Wrote the first published algorithm \"for\" a machine; née Byron."})json";

struct Setup {
    std::optional<Tokenizer> tokenizer;
    std::shared_ptr<const TokenVocabulary> vocab;
    Grammar grammar;
    std::vector<int32_t> answer;
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
        auto schema = Json::parse(kSchema);
        auto src = json_schema_grammar(*schema);
        auto g = compile_grammar(*src);
        if (!g.ok()) return std::nullopt;
        out.grammar = std::move(g).value();
        out.answer = tok->encode(kAnswer, /*parse_special=*/false);
        out.tokenizer = std::move(*tok);
        return out;
    }();
    return s ? &*s : nullptr;
}

// One pass over the answer: a mask per step, then the step's token. Returns the steps.
int64_t pass(const std::shared_ptr<const CompiledGrammar>& g, std::vector<uint32_t>& mask, int64_t& hits) {
    const Setup& s = *setup();
    GrammarMatcher m(g);
    for (int32_t token : s.answer) {
        std::fill(mask.begin(), mask.end(), 0u);
        m.fill_mask(mask);
        hits += m.last_stats().cache_hit;
        if (!((mask[token / 32] >> (token % 32)) & 1) || !m.accept_token(token)) std::abort();  // the answer is valid
    }
    std::fill(mask.begin(), mask.end(), 0u);
    if (!m.fill_mask(mask)) std::abort();  // and complete
    return static_cast<int64_t>(s.answer.size()) + 1;
}

void run(benchmark::State& state, bool warm) {
    const Setup* s = setup();
    if (!s) {
        state.SkipWithError("the Qwen3 vocabulary (../shared/qwen-tokenizers/qwen3-4b) is not available");
        return;
    }
    std::vector<uint32_t> mask(mask_words(s->vocab->size()));
    auto shared = std::make_shared<const CompiledGrammar>(s->grammar, s->vocab);
    int64_t hits = 0, steps = 0;
    if (warm) pass(shared, mask, hits);
    hits = 0;
    for (auto _ : state) {
        auto g = warm ? shared : std::make_shared<const CompiledGrammar>(s->grammar, s->vocab);
        steps += pass(g, mask, hits);
    }
    state.counters["steps"] = static_cast<double>(s->answer.size() + 1);
    state.counters["cache_hit_rate"] = steps ? static_cast<double>(hits) / static_cast<double>(steps) : 0.0;
    state.counters["mask_time"] =
        benchmark::Counter(static_cast<double>(steps), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_JsonSchemaMaskWarm(benchmark::State& state) {
    run(state, true);
}
void BM_JsonSchemaMaskCold(benchmark::State& state) {
    run(state, false);
}
BENCHMARK(BM_JsonSchemaMaskWarm)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_JsonSchemaMaskCold)->Unit(benchmark::kMillisecond)->Iterations(2);

}  // namespace

BENCHMARK_MAIN();
