// `pagoda demo-model DIR`: writes the small random-weight Qwen3.5-architecture demo model (model/demo_model.h).
#include <cstdio>
#include <string>

#include "cli/args.h"
#include "cli/command.h"
#include "model/demo_model.h"

namespace {

using namespace pagoda;

int run_demo_model(std::span<const std::string_view> args) {
    cli::ArgParser parser(
        "pagoda demo-model DIR [--tokenizer TOKDIR | --byte-level]",
        "Writes a small deterministic model of the Qwen3.5 architecture with RANDOM weights (its words\n"
        "are random) into DIR: config.json, model.safetensors, tokenizer files, chat template, README.\n"
        "The tokenizer is a real Qwen one when available ($PAGODA_SHARED_DIR/qwen-tokenizers/qwen3-4b\n"
        "or --tokenizer), else a byte-level one.");
    parser.add_positional("DIR", "output directory (created if needed; files in it are overwritten)");
    parser.add_option("tokenizer", "TOKDIR", "directory with vocab.json + merges.txt (+ tokenizer_config.json)");
    parser.add_switch("byte-level", "write the byte-level tokenizer even when a Qwen tokenizer is available");
    if (auto exit = cli::parse_or_exit(parser, "demo-model", args)) return *exit;

    model::DemoModelOptions options;
    if (parser.has("byte-level")) {
        options.tokenizer_dir.clear();
    } else if (auto tok = parser.get("tokenizer")) {
        options.tokenizer_dir = *tok;
    } else {
        options.tokenizer_dir = model::default_demo_tokenizer_dir();
    }
    const std::string dir = *parser.positional("DIR");
    Status s = model::write_demo_model(dir, options);
    if (!s.ok()) return cli::fail("demo-model", s.message());
    std::printf("wrote the demo model (random weights, %s tokenizer) to %s\n",
                options.tokenizer_dir.empty() ? "byte-level" : "Qwen", dir.c_str());
    return 0;
}

}  // namespace

PAGODA_COMMAND("demo-model", "write a small random-weight Qwen3.5-architecture model for trying pagoda",
               run_demo_model);
