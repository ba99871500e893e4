// `pagoda generate`: generates text from a prompt with one request through the engine on the CPU backend (the same
// scheduler, KV pool and sampler the server uses), streaming the text as it comes. Sampling: the engine's sampler
// (temperature, top-p, top-k, min-p, repetition penalty, seeded); stops at an end-of-sequence id or after -n tokens.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/command.h"
#include "common/json.h"
#include "engine/engine.h"
#include "executor/create_engine.h"
#include "model/model_dir.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace pagoda;

Result<double> parse_number(const std::string& flag, const std::string& text, double lo, double hi) {
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0' || !(v >= lo && v <= hi)) {
        return Status::error("--" + flag + ": '" + text + "' is not a number in [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "]");
    }
    return v;
}

int run_generate(std::span<const std::string_view> args) {
    cli::ArgParser parser(
        "pagoda generate --model DIR (--prompt TEXT | --ids \"1 2 3\") [-n N] [--temperature T] [--top-p P] "
        "[--top-k K] [--min-p P] [--repetition-penalty R] [--seed S] [--ignore-eos] [--json]",
        "Generates up to N tokens after the prompt and streams the text (or the ids when the model directory has\n"
        "no tokenizer). Sampling defaults come from generation_config.json (temperature 1, top-p 1 without it;\n"
        "do_sample false means greedy); --temperature 0 is greedy. Runs through the engine and its sampler.\n"
        "The prompt is used as given: no chat template is applied.");
    parser.add_option("model", "DIR", "model directory (config.json + *.safetensors [+ tokenizer])");
    parser.add_option("prompt", "TEXT", "prompt text (needs the model's tokenizer)");
    parser.add_option("ids", "IDS", "prompt token ids separated by spaces or commas");
    parser.add_option("n", "N", "maximum number of new tokens (default 32)");
    parser.add_option("max-tokens", "N", "same as -n");
    parser.add_option("temperature", "T", "sampling temperature, 0 = greedy");
    parser.add_option("top-p", "P", "nucleus sampling mass in (0, 1]");
    parser.add_option("top-k", "K", "keep the K most likely tokens (0 = all)");
    parser.add_option("min-p", "P", "drop tokens below P times the top probability");
    parser.add_option("repetition-penalty", "R", "penalty on tokens of the prompt and output (1 = off)");
    parser.add_option("seed", "S", "random seed (default 0)");
    parser.add_switch("ignore-eos", "do not stop at end-of-sequence tokens");
    parser.add_switch("json", "print one JSON object {\"ids\": [...], \"text\": ...} at the end instead of streaming");
    parser.add_option("threads", "N", "CPU threads (default: all cores)");
    parser.add_option("tensor-parallel-size", "N",
                      "split the model over N ranks, one thread each (-tp; on cuda: GPUs 0..N-1)");
    parser.add_option("device", "DEV", cli::kDeviceHelp);
    parser.add_option("quantization", "METHOD", "fp8: quantize a bf16 checkpoint at load (as serve)");
    // The shared parser knows long flags only; accept the conventional -n too.
    std::vector<std::string_view> fixed(args.begin(), args.end());
    for (auto& a : fixed) {
        if (a == "-n") a = "--n";
        if (a == "-tp") a = "--tensor-parallel-size";
    }
    if (auto exit = cli::parse_or_exit(parser, "generate", fixed)) return *exit;

    const auto dir = parser.get("model");
    if (!dir) return cli::fail("generate", "--model DIR is required");
    if (parser.has("prompt") == parser.has("ids"))
        return cli::fail("generate", "give exactly one of --prompt and --ids");
    int64_t max_new = 32;
    if (auto n = parser.get("n") ? parser.get("n") : parser.get("max-tokens")) {
        auto v = parse_number("n", *n, 0, 1e7);
        if (!v.ok()) return cli::fail("generate", v.message());
        max_new = static_cast<int64_t>(*v);
    }

    auto files = model::ModelDir::open(*dir, /*open_weights=*/false);
    if (!files.ok()) return cli::fail("generate", files.message());
    const model::ModelDir& md = *files;

    std::optional<Tokenizer> tokenizer;
    if (md.files.has_tokenizer()) {
        auto tok = Tokenizer::load_from_dir(*dir);
        if (!tok.ok()) return cli::fail("generate", tok.message());
        tokenizer = std::move(tok).value();
    }
    std::vector<int32_t> prompt;
    if (auto text = parser.get("prompt")) {
        if (!tokenizer) return cli::fail("generate", *dir + " has no tokenizer files; use --ids");
        prompt = tokenizer->encode(*text);
        if (prompt.empty()) return cli::fail("generate", "the prompt encodes to no tokens");
    } else {
        auto ids = cli::parse_token_ids(*parser.get("ids"));
        if (!ids.ok()) return cli::fail("generate", "--ids: " + ids.message());
        if (ids->empty()) return cli::fail("generate", "--ids: no token ids given");
        prompt = std::move(ids).value();
    }

    // Unset values come from generation_config.json through the engine; do_sample false means greedy here.
    engine::Request request;
    request.prompt_tokens = prompt;
    engine::SamplingParams& params = request.params;
    if (md.generation.do_sample.has_value() && !*md.generation.do_sample) params.temperature = 0.0f;
    struct FloatFlag {
        const char* name;
        double lo, hi;
        std::optional<float>* field;
    };
    for (const FloatFlag& f : {FloatFlag{"temperature", 0, 100, &params.temperature},
                               FloatFlag{"top-p", 1e-9, 1, &params.top_p}, FloatFlag{"min-p", 0, 1, &params.min_p},
                               FloatFlag{"repetition-penalty", 1e-6, 100, &params.repetition_penalty}}) {
        if (auto text = parser.get(f.name)) {
            auto v = parse_number(f.name, *text, f.lo, f.hi);
            if (!v.ok()) return cli::fail("generate", v.message());
            *f.field = static_cast<float>(*v);
        }
    }
    if (auto k = parser.get("top-k")) {
        auto v = parse_number("top-k", *k, -1, 1e9);
        if (!v.ok()) return cli::fail("generate", v.message());
        params.top_k = static_cast<int32_t>(*v);
    }
    uint64_t seed = 0;
    if (auto s = parser.get("seed")) {
        auto v = parse_number("seed", *s, 0, 9007199254740992.0);
        if (!v.ok()) return cli::fail("generate", v.message());
        seed = static_cast<uint64_t>(*v);
    }
    params.seed = seed;
    params.ignore_eos = parser.has("ignore-eos");
    if (max_new > 0) params.max_tokens = static_cast<int32_t>(max_new);

    // One request: a KV pool of exactly one sequence, no prefix cache.
    executor::EngineOptions options;
    options.max_model_len = static_cast<int32_t>(
        std::min<int64_t>(static_cast<int64_t>(prompt.size()) + std::max<int64_t>(max_new, 1), INT32_MAX));
    options.max_num_seqs = 1;
    options.block_size = 16;
    options.num_kv_blocks = (options.max_model_len + options.block_size - 1) / options.block_size;
    options.max_state_snapshots = 0;
    options.enable_prefix_caching = false;
    options.seed = seed;
    if (auto threads = parser.get("threads")) options.num_threads = std::atoi(threads->c_str());
    if (auto tp = parser.get("tensor-parallel-size")) {
        auto v = parse_number("tensor-parallel-size", *tp, 1, 1024);
        if (!v.ok()) return cli::fail("generate", v.message());
        if (*v != static_cast<int32_t>(*v)) return cli::fail("generate", "--tensor-parallel-size: not an integer");
        options.tensor_parallel_size = static_cast<int32_t>(*v);
    }
    options.device = parser.get("device").value_or("auto");
    options.quantization = parser.get("quantization").value_or("");
    if (options.device != "auto" && options.device != "cpu" && options.device != "cuda")
        return cli::fail("generate", "--device: '" + options.device + "' is not auto, cpu or cuda");
    auto served = executor::create_engine(*dir, options);
    if (!served.ok()) return cli::fail("generate", served.message());
    engine::Engine& engine = (*served)->engine();

    const bool json = parser.has("json");
    std::optional<IncrementalDecoder> decoder;
    if (tokenizer) decoder.emplace(*tokenizer);
    std::vector<int32_t> generated;
    std::string text, piece;
    const auto start = std::chrono::steady_clock::now();
    auto prefilled = start;
    if (max_new > 0) {
        auto stream = engine.submit(std::move(request));
        if (!stream.ok()) return cli::fail("generate", stream.message());
        engine::StreamChunk chunk;
        while ((*stream)->read(chunk)) {
            if (chunk.choices.empty()) continue;
            const engine::ChoiceDelta& delta = chunk.choices[0];
            if (generated.empty() && !delta.token_ids.empty()) prefilled = std::chrono::steady_clock::now();
            for (size_t i = 0; i < delta.token_ids.size(); ++i) {
                const int32_t next = delta.token_ids[i];
                generated.push_back(next);
                // The EOS that ended the request is part of the ids but is not printed.
                const bool stop = delta.finish_reason == engine::FinishReason::kStop &&
                                  i + 1 == delta.token_ids.size() && next == delta.stop_token_id;
                piece.clear();
                if (decoder) {
                    // Ids past the tokenizer's vocabulary (padding rows of the embedding) have no text.
                    if (tokenizer->is_valid_id(next)) (void)decoder->push(next, piece);
                } else {
                    piece = (generated.size() > 1 ? " " : "") + std::to_string(next);
                }
                text += piece;
                if (!json && !stop) std::fwrite(piece.data(), 1, piece.size(), stdout);
            }
            if (!json) std::fflush(stdout);
            if (delta.finish_reason == engine::FinishReason::kAbort ||
                delta.finish_reason == engine::FinishReason::kRejected)
                return cli::fail("generate", delta.finish_message);
        }
    }
    if (decoder) {
        piece.clear();
        decoder->finish(piece);
        text += piece;
        if (!json) std::fwrite(piece.data(), 1, piece.size(), stdout);
    }
    const auto end = std::chrono::steady_clock::now();
    if (json) {
        std::string out = "{\"prompt_ids\":[";
        for (size_t i = 0; i < prompt.size(); ++i)
            out += (i ? "," : "") + std::to_string(prompt[i]);
        out += "],\"ids\":[";
        for (size_t i = 0; i < generated.size(); ++i)
            out += (i ? "," : "") + std::to_string(generated[i]);
        out += "],\"text\":";
        json_escape_to(out, text);
        out += "}\n";
        std::fwrite(out.data(), 1, out.size(), stdout);
    } else {
        std::fputc('\n', stdout);
        // Reads merge tokens that arrive faster than they are printed, so only the first token's time and the
        // total are measured.
        const double first_s = std::chrono::duration<double>(prefilled - start).count();
        const double total_s = std::chrono::duration<double>(end - start).count();
        std::fprintf(stderr, "[%zu prompt tokens, first token after %.3f s, %zu new tokens in %.3f s (%.1f tok/s)]\n",
                     prompt.size(), first_s, generated.size(), total_s,
                     total_s > 0 ? static_cast<double>(generated.size()) / total_s : 0.0);
    }
    return 0;
}

}  // namespace

PAGODA_COMMAND("generate", "generate text from a prompt (one request through the engine, CPU)", run_generate);
