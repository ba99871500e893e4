// Tokenizer speed: encode MB/s on one thread over mixed text (bench/tokenizer_bench_text.txt) with the
// real Qwen3 vocabulary, then, when the HF oracle is installed, HF tokenizers' MB/s on the same text
// (tools/bench_tokenizer_hf.py). Skips, saying why, when the vocabulary is absent.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "common/file.h"
#include "tokenizer/tokenizer.h"

namespace {

using pagoda::Tokenizer;

std::string shared_dir() {
    const char* env = std::getenv("PAGODA_SHARED_DIR");
    return env ? env : PAGODA_SHARED_DIR;
}

std::string tokenizer_dir() {
    return shared_dir() + "/qwen-tokenizers/qwen3-4b";
}
std::string text_path() {
    return std::string(PAGODA_SOURCE_DIR) + "/bench/tokenizer_bench_text.txt";
}

const Tokenizer* tokenizer() {
    static const std::optional<Tokenizer> tok = []() -> std::optional<Tokenizer> {
        auto t = Tokenizer::load_from_dir(tokenizer_dir());
        if (!t.ok()) return std::nullopt;
        return std::move(*t);
    }();
    return tok ? &*tok : nullptr;
}

const std::string* text() {
    static const std::optional<std::string> t = []() -> std::optional<std::string> {
        auto r = pagoda::read_file(text_path());
        if (!r.ok()) return std::nullopt;
        return std::move(*r);
    }();
    return t ? &*t : nullptr;
}

bool ready(benchmark::State& state) {
    if (!tokenizer()) {
        state.SkipWithError(("Qwen3 vocabulary not found in " + tokenizer_dir()).c_str());
        return false;
    }
    if (!text()) {
        state.SkipWithError(("bench text not found: " + text_path()).c_str());
        return false;
    }
    return true;
}

void BM_EncodeMixed(benchmark::State& state) {
    if (!ready(state)) return;
    std::vector<int32_t> ids;
    for (auto _ : state) {
        ids.clear();
        tokenizer()->encode(*text(), ids);
        benchmark::DoNotOptimize(ids.data());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text()->size()));
    state.counters["tokens"] = static_cast<double>(ids.size());
}
BENCHMARK(BM_EncodeMixed)->Unit(benchmark::kMillisecond);

// Each line on its own, as requests arrive: measures the per-call overhead too.
void BM_EncodeMixedPerLine(benchmark::State& state) {
    if (!ready(state)) return;
    std::vector<std::string_view> lines;
    std::string_view rest = *text();
    while (!rest.empty()) {
        const size_t eol = rest.find('\n');
        lines.push_back(rest.substr(0, eol == std::string_view::npos ? rest.size() : eol + 1));
        rest.remove_prefix(lines.back().size());
    }
    std::vector<int32_t> ids;
    for (auto _ : state) {
        for (std::string_view line : lines) {
            ids.clear();
            tokenizer()->encode(line, ids);
            benchmark::DoNotOptimize(ids.data());
        }
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text()->size()));
}
BENCHMARK(BM_EncodeMixedPerLine)->Unit(benchmark::kMillisecond);

void BM_DecodeStream(benchmark::State& state) {
    if (!ready(state)) return;
    const std::vector<int32_t> ids = tokenizer()->encode(*text());
    std::string out;
    for (auto _ : state) {
        out.clear();
        pagoda::IncrementalDecoder decoder(*tokenizer());
        for (int32_t id : ids)
            benchmark::DoNotOptimize(decoder.push(id, out));
        decoder.finish(out);
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(ids.size()));
}
BENCHMARK(BM_DecodeStream)->Unit(benchmark::kMillisecond);

// Prints HF tokenizers' number for the same text, when its Python environment is there.
void run_hf_reference() {
    if (std::getenv("PAGODA_BENCH_NO_HF")) return;
    const std::string python = std::string(PAGODA_SOURCE_DIR) + "/.venv/bin/python";
    if (!pagoda::file_exists(python)) {
        std::printf("HF tokenizers reference: skipped (%s not found)\n", python.c_str());
        return;
    }
    const std::string cmd = "TOKENIZERS_PARALLELISM=false '" + python + "' '" + PAGODA_SOURCE_DIR +
                            "/tools/bench_tokenizer_hf.py' --model '" + tokenizer_dir() + "' --text '" + text_path() +
                            "'";
    std::fflush(stdout);
    if (std::system(cmd.c_str()) != 0) std::printf("HF tokenizers reference: the script failed\n");
}

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    run_hf_reference();
    return 0;
}
