#include "cli/args.h"

#include <charconv>
#include <cstdio>
#include <iostream>
#include <iterator>

#include "common/file.h"

namespace pagoda::cli {

ArgParser::ArgParser(std::string usage, std::string description)
    : usage_(std::move(usage)), description_(std::move(description)) {}

void ArgParser::add_option(std::string name, std::string metavar, std::string help, bool repeatable) {
    options_.push_back({std::move(name), std::move(metavar), std::move(help), repeatable});
}

void ArgParser::add_positional(std::string name, std::string help, bool required) {
    positionals_.push_back({std::move(name), std::move(help), required});
}

Status ArgParser::parse(std::span<const std::string_view> args) {
    size_t next_positional = 0;
    for (size_t i = 0; i < args.size(); ++i) {
        std::string_view arg = args[i];
        if (arg == "--help" || arg == "-h") {
            help_requested_ = true;
            return ok_status();
        }
        if (arg.size() > 2 && arg.substr(0, 2) == "--") {
            std::string_view name = arg.substr(2);
            std::optional<std::string_view> inline_value;
            if (auto eq = name.find('='); eq != std::string_view::npos) {
                inline_value = name.substr(eq + 1);
                name = name.substr(0, eq);
            }
            const Option* option = nullptr;
            for (const auto& o : options_)
                if (o.name == name) option = &o;
            if (!option) return Status::error("unknown option --" + std::string(name) + " (see --help)");
            std::string value;
            if (option->metavar.empty()) {
                if (inline_value) return Status::error("option --" + std::string(name) + " takes no value");
            } else if (inline_value) {
                value = std::string(*inline_value);
            } else {
                if (i + 1 >= args.size()) return Status::error("option --" + std::string(name) + " needs a value");
                value = std::string(args[++i]);
            }
            auto& slot = values_[std::string(name)];
            if (!option->repeatable) slot.clear();
            slot.push_back(std::move(value));
            continue;
        }
        if (next_positional >= positionals_.size())
            return Status::error("unexpected argument '" + std::string(arg) + "' (see --help)");
        positional_values_[positionals_[next_positional++].name] = std::string(arg);
    }
    for (size_t p = next_positional; p < positionals_.size(); ++p)
        if (positionals_[p].required) return Status::error("missing argument " + positionals_[p].name);
    return ok_status();
}

std::string ArgParser::help_text() const {
    std::string text = "usage: " + usage_ + "\n\n" + description_ + "\n";
    if (!positionals_.empty()) {
        text += "\narguments:\n";
        for (const auto& p : positionals_)
            text += "  " + p.name + "\n      " + p.help + "\n";
    }
    text += "\noptions:\n";
    for (const auto& o : options_) {
        text += "  --" + o.name + (o.metavar.empty() ? "" : " " + o.metavar) + "\n      " + o.help +
                (o.repeatable ? " (repeatable)" : "") + "\n";
    }
    text += "  --help\n      show this help and exit\n";
    return text;
}

bool ArgParser::has(std::string_view name) const {
    return values_.find(name) != values_.end();
}

std::optional<std::string> ArgParser::get(std::string_view name) const {
    auto it = values_.find(name);
    if (it == values_.end() || it->second.empty()) return std::nullopt;
    return it->second.back();
}

std::vector<std::string> ArgParser::get_all(std::string_view name) const {
    auto it = values_.find(name);
    return it == values_.end() ? std::vector<std::string>{} : it->second;
}

std::optional<std::string> ArgParser::positional(std::string_view name) const {
    auto it = positional_values_.find(name);
    if (it == positional_values_.end()) return std::nullopt;
    return it->second;
}

std::optional<int> parse_or_exit(ArgParser& parser, std::string_view command, std::span<const std::string_view> args) {
    Status status = parser.parse(args);
    if (!status.ok()) return fail(command, status.message());
    if (parser.help_requested()) {
        std::fputs(parser.help_text().c_str(), stdout);
        return 0;
    }
    return std::nullopt;
}

int fail(std::string_view command, std::string_view message) {
    std::fprintf(stderr, "pagoda %.*s: %.*s\n", static_cast<int>(command.size()), command.data(),
                 static_cast<int>(message.size()), message.data());
    return 1;
}

Result<std::vector<int32_t>> parse_token_ids(std::string_view text) {
    auto is_separator = [](char c) {
        return c == ' ' || c == ',' || c == '\t' || c == '\n' || c == '\r' || c == '[' || c == ']';
    };
    std::vector<int32_t> ids;
    size_t pos = 0;
    while (pos < text.size()) {
        if (is_separator(text[pos])) {
            ++pos;
            continue;
        }
        int32_t v = 0;
        const auto [end, ec] = std::from_chars(text.data() + pos, text.data() + text.size(), v);
        const size_t stop = static_cast<size_t>(end - text.data());
        if (ec != std::errc() || v < 0 || (stop < text.size() && !is_separator(text[stop]))) {
            size_t bad_end = pos;
            while (bad_end < text.size() && !is_separator(text[bad_end]))
                ++bad_end;
            return Status::error("'" + std::string(text.substr(pos, bad_end - pos)) + "' (at character " +
                                 std::to_string(pos) +
                                 ") is not a token id (expected non-negative integers separated by spaces or commas)");
        }
        ids.push_back(v);
        pos = stop;
    }
    return ids;
}

std::string read_stdin() {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

Status for_each_line(const std::string& path, const std::function<Status(std::string_view line)>& each) {
    std::string input;
    if (path == "-") {
        input = read_stdin();
    } else {
        PAGODA_ASSIGN_OR_RETURN(input, read_file(path));
    }
    size_t pos = 0, line_no = 0;
    while (pos < input.size()) {
        size_t eol = input.find('\n', pos);
        if (eol == std::string::npos) eol = input.size();
        const std::string_view line(input.data() + pos, eol - pos);
        pos = eol + 1;
        ++line_no;
        if (line.empty()) continue;
        if (Status s = each(line); !s.ok())
            return Status::error(path + ":" + std::to_string(line_no) + ": " + s.message());
    }
    return ok_status();
}

}  // namespace pagoda::cli
