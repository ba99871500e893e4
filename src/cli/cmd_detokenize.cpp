// `pagoda detokenize`: token ids back to text, whole or through the streaming detokenizer.
#include <cstdio>
#include <string>

#include "cli/args.h"
#include "cli/command.h"
#include "common/json.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace pagoda;

Result<std::string> detokenize(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool skip_special,
                               bool stream) {
    if (!stream) return tokenizer.decode(ids, skip_special);
    IncrementalDecoder decoder(tokenizer, skip_special);
    std::string text;
    for (int32_t id : ids)
        PAGODA_RETURN_IF_ERROR(decoder.push(id, text));
    decoder.finish(text);
    return text;
}

int run_jsonl(const Tokenizer& tokenizer, const std::string& path, bool skip_special, bool stream) {
    std::string out;
    const Status s = cli::for_each_line(path, [&](std::string_view line) -> Status {
        PAGODA_ASSIGN_OR_RETURN(auto ids, cli::parse_token_ids(line));
        PAGODA_ASSIGN_OR_RETURN(auto text, detokenize(tokenizer, ids, skip_special, stream));
        json_escape_to(out, text);
        out += '\n';
        return ok_status();
    });
    if (!s.ok()) return cli::fail("detokenize", s.message());
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
}

int run_detokenize(std::span<const std::string_view> args) {
    cli::ArgParser parser(
        "pagoda detokenize --model DIR [--ids \"1 2 3\" | --jsonl FILE] [--skip-special-tokens] [--json]",
        "Prints the text of token ids (from --ids or standard input).");
    parser.add_option("model", "DIR", "model or tokenizer directory");
    parser.add_option("ids", "IDS", "token ids separated by spaces or commas (default: read standard input)");
    parser.add_switch("skip-special-tokens", "leave out special tokens such as <|im_end|>");
    parser.add_switch("json", "print {\"text\": \"...\"}");
    parser.add_switch("stream", "decode through the streaming detokenizer, one id at a time (same text)");
    parser.add_option("jsonl", "FILE",
                      "batch mode: one JSON id list per line in FILE ('-' for stdin), one JSON string per line out");
    if (auto exit = cli::parse_or_exit(parser, "detokenize", args)) return *exit;

    const auto model = parser.get("model");
    if (!model) return cli::fail("detokenize", "--model DIR is required");
    auto tokenizer = Tokenizer::load_from_dir(*model);
    if (!tokenizer.ok()) return cli::fail("detokenize", tokenizer.message());
    const bool skip_special = parser.has("skip-special-tokens");
    const bool stream = parser.has("stream");
    if (auto jsonl = parser.get("jsonl")) return run_jsonl(*tokenizer, *jsonl, skip_special, stream);

    std::string input;
    if (auto ids_text = parser.get("ids"))
        input = *ids_text;
    else
        input = cli::read_stdin();
    auto ids = cli::parse_token_ids(input);
    if (!ids.ok()) return cli::fail("detokenize", "--ids: " + ids.message());
    auto text = detokenize(*tokenizer, *ids, skip_special, stream);
    if (!text.ok()) return cli::fail("detokenize", text.message());
    std::string out;
    if (parser.has("json")) {
        out = "{\"text\":";
        json_escape_to(out, *text);
        out += "}\n";
    } else {
        out = *text + "\n";
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
}

}  // namespace

PAGODA_COMMAND("detokenize", "print the text of token ids", run_detokenize);
