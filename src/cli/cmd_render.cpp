// `pagoda render`: a conversation through a model's chat template, printed exactly as the model would see it.
#include <cstdio>
#include <string>

#include "chat/chat_template.h"
#include "cli/args.h"
#include "cli/command.h"
#include "common/file.h"
#include "common/json.h"

namespace {

using namespace pagoda;

Result<Json> read_json(const std::string& path, const char* what) {
    auto text = read_file(path);
    if (!text.ok()) return text.status();
    auto doc = Json::parse(*text);
    if (!doc.ok()) return Status::error(std::string(what) + " " + path + ": " + doc.message());
    return doc;
}

int run_render(std::span<const std::string_view> args) {
    cli::ArgParser parser("pagoda render --model DIR --messages FILE.json [options]",
                          "Renders a conversation with the model's chat template (as transformers' "
                          "apply_chat_template does) and prints the prompt text exactly, without a trailing newline.");
    parser.add_option("model", "DIR", "model directory (chat_template.jinja or tokenizer_config.json)");
    parser.add_option("messages", "FILE", "JSON array of chat messages");
    parser.add_option("tools", "FILE", "JSON array of tool definitions");
    parser.add_option("kw", "KEY=VALUE",
                      "extra template variable; VALUE is parsed as JSON when it parses, else a string", true);
    parser.add_option("chat-template", "FILE", "use this template file instead of the model's");
    parser.add_switch("no-generation-prompt", "do not add the assistant generation prompt");
    if (auto exit = cli::parse_or_exit(parser, "render", args)) return *exit;

    auto model = parser.get("model");
    auto messages_path = parser.get("messages");
    auto template_path = parser.get("chat-template");
    if (!messages_path) return cli::fail("render", "--messages FILE is required");
    if (!model && !template_path) return cli::fail("render", "--model DIR (or --chat-template FILE) is required");

    Json kwargs = Json::object();
    for (const auto& kv : parser.get_all("kw")) {
        size_t eq = kv.find('=');
        if (eq == std::string::npos || eq == 0) return cli::fail("render", "--kw expects KEY=VALUE, got '" + kv + "'");
        std::string value = kv.substr(eq + 1);
        auto parsed = Json::parse(value);
        kwargs.set(kv.substr(0, eq), parsed.ok() ? std::move(parsed).value() : Json(value));
    }

    auto messages = read_json(*messages_path, "messages");
    if (!messages.ok()) return cli::fail("render", messages.message());
    Json tools;
    if (auto tools_path = parser.get("tools")) {
        auto t = read_json(*tools_path, "tools");
        if (!t.ok()) return cli::fail("render", t.message());
        tools = std::move(t).value();
    }

    Json config;
    if (model) {
        const std::string config_path = *model + "/tokenizer_config.json";
        if (file_exists(config_path)) {
            auto c = read_json(config_path, "tokenizer config");
            if (!c.ok()) return cli::fail("render", c.message());
            config = std::move(c).value();
        }
    }
    Result<chat::ChatTemplate> tmpl = Status::error("no template");
    if (template_path) {
        auto text = read_file(*template_path);
        if (!text.ok()) return cli::fail("render", text.message());
        tmpl = chat::ChatTemplate::from_string(*text, config);
        if (!tmpl.ok()) return cli::fail("render", *template_path + ": " + tmpl.message());
    } else {
        tmpl = chat::ChatTemplate::from_model_dir(*model);
        if (!tmpl.ok()) return cli::fail("render", tmpl.message());
    }
    auto prompt = tmpl->render(*messages, tools, !parser.has("no-generation-prompt"), kwargs);
    if (!prompt.ok()) {
        std::string message = prompt.message();
        for (auto& c : message)
            if (c == '\n') c = ' ';  // one line on stderr
        return cli::fail("render", message);
    }
    std::fwrite(prompt->data(), 1, prompt->size(), stdout);
    std::fflush(stdout);
    return 0;
}

}  // namespace

PAGODA_COMMAND("render", "render a conversation with the model's chat template", run_render);
