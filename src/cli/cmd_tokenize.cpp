// `pagoda tokenize`: text to token ids with a model directory's tokenizer; --jsonl for batches.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "cli/args.h"
#include "cli/command.h"
#include "common/file.h"
#include "common/json.h"
#include "common/utf8.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace pagoda;

std::string read_stdin() {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

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
    std::string input;
    if (path == "-") {
        input = read_stdin();
    } else {
        auto r = read_file(path);
        if (!r.ok()) return cli::fail("tokenize", r.message());
        input = std::move(*r);
    }
    std::string out;
    std::vector<int32_t> ids;
    size_t pos = 0, line_no = 0;
    while (pos < input.size()) {
        size_t eol = input.find('\n', pos);
        if (eol == std::string::npos) eol = input.size();
        const std::string_view line(input.data() + pos, eol - pos);
        pos = eol + 1;
        ++line_no;
        if (line.empty()) continue;
        auto doc = Json::parse(line);
        if (!doc.ok() || !doc->is_string())
            return cli::fail("tokenize", path + ":" + std::to_string(line_no) + ": expected one JSON string per line" +
                                             (doc.ok() ? std::string() : " (" + doc.message() + ")"));
        ids.clear();
        tokenizer.encode(doc->as_string(), ids, parse_special);
        append_ids(out, ids);
        out += '\n';
    }
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

    const std::string text = parser.has("text") ? *parser.get("text") : read_stdin();
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
