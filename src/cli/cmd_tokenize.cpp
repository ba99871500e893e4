// `pagoda tokenize`: text to token ids with a model directory's tokenizer; --jsonl for batches.
#include <cstdio>
#include <string>

#include "cli/args.h"
#include "cli/command.h"
#include "common/json.h"
#include "common/utf8.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace pagoda;

void append_ids(std::string& out, const std::vector<int32_t>& ids) {
    out += '[';
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i) out += ',';
        out += std::to_string(ids[i]);
    }
    out += ']';
}

// One JSON string per input line in, one JSON list of ids per line out: one process per corpus.
int run_jsonl(const Tokenizer& tokenizer, const std::string& path, bool parse_special) {
    std::string out;
    std::vector<int32_t> ids;
    const Status s = cli::for_each_line(path, [&](std::string_view line) -> Status {
        auto doc = Json::parse(line);
        if (!doc.ok() || !doc->is_string())
            return Status::error("expected one JSON string per line" +
                                 (doc.ok() ? std::string() : " (" + doc.message() + ")"));
        ids.clear();
        tokenizer.encode(doc->as_string(), ids, parse_special);
        append_ids(out, ids);
        out += '\n';
        return ok_status();
    });
    if (!s.ok()) return cli::fail("tokenize", s.message());
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
}

int run_tokenize(std::span<const std::string_view> args) {
    cli::ArgParser parser(
        "pagoda tokenize --model DIR [--text TEXT | --jsonl FILE] [--json] [--no-special]",
        "Prints the token ids of TEXT (or of standard input, taken exactly as given, newline included).\n"
        "DIR holds tokenizer.json, or vocab.json + merges.txt (+ tokenizer_config.json).");
    parser.add_option("model", "DIR", "model or tokenizer directory");
    parser.add_option("text", "TEXT", "the text to tokenize (default: read standard input)");
    parser.add_switch("json", "print {\"ids\": [...]} instead of ids separated by spaces");
    parser.add_switch("no-special", "treat special-token text such as <|im_start|> as plain text");
    parser.add_option("jsonl", "FILE",
                      "batch mode: one JSON string per line in FILE ('-' for stdin), one JSON id list per line out");
    if (auto exit = cli::parse_or_exit(parser, "tokenize", args)) return *exit;

    const auto model = parser.get("model");
    if (!model) return cli::fail("tokenize", "--model DIR is required");
    auto tokenizer = Tokenizer::load_from_dir(*model);
    if (!tokenizer.ok()) return cli::fail("tokenize", tokenizer.message());
    const bool parse_special = !parser.has("no-special");
    if (auto jsonl = parser.get("jsonl")) return run_jsonl(*tokenizer, *jsonl, parse_special);

    const std::string text = parser.has("text") ? *parser.get("text") : cli::read_stdin();
    if (size_t bad = utf8_find_invalid(text); bad != std::string::npos)
        return cli::fail("tokenize", "the input text is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
    const std::vector<int32_t> ids = tokenizer->encode(text, parse_special);
    std::string out;
    if (parser.has("json")) {
        out = "{\"ids\":";
        append_ids(out, ids);
        out += "}\n";
    } else {
        for (size_t i = 0; i < ids.size(); ++i) {
            if (i) out += ' ';
            out += std::to_string(ids[i]);
        }
        out += '\n';
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
}

}  // namespace

PAGODA_COMMAND("tokenize", "print the token ids of a text", run_tokenize);
