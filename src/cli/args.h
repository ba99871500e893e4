// A small argument parser shared by the subcommands: --flag VALUE, --flag=VALUE, boolean
// switches, repeated flags, positionals, and a generated --help.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pagoda::cli {

class ArgParser {
  public:
    ArgParser(std::string usage, std::string description);

    // Declares options before parse(). `metavar` empty means a boolean switch.
    void add_option(std::string name, std::string metavar, std::string help, bool repeatable = false);
    void add_switch(std::string name, std::string help) { add_option(std::move(name), "", std::move(help)); }
    void add_positional(std::string name, std::string help, bool required = true);

    // Parses; on --help prints help to stdout and sets help_requested(). Errors name the flag.
    Status parse(std::span<const std::string_view> args);
    bool help_requested() const { return help_requested_; }
    std::string help_text() const;

    bool has(std::string_view name) const;                          // switch given or option given
    std::optional<std::string> get(std::string_view name) const;    // last value of an option
    std::vector<std::string> get_all(std::string_view name) const;  // all values of a repeatable option
    std::optional<std::string> positional(std::string_view name) const;

  private:
    struct Option {
        std::string name, metavar, help;
        bool repeatable;
    };
    struct Positional {
        std::string name, help;
        bool required;
    };
    std::string usage_, description_;
    std::vector<Option> options_;
    std::vector<Positional> positionals_;
    std::map<std::string, std::vector<std::string>, std::less<>> values_;
    std::map<std::string, std::string, std::less<>> positional_values_;
    bool help_requested_ = false;
};

// Runs the common prologue of a subcommand: parse, print help or the error (one line on
// stderr, prefixed with the subcommand). Returns nullopt to continue, or the exit status.
std::optional<int> parse_or_exit(ArgParser& parser, std::string_view command, std::span<const std::string_view> args);

// Token ids as users type them: "1 2 3", "1,2,3" or "[1, 2, 3]" (spaces, tabs, newlines, commas and brackets
// separate). Each must be a non-negative 32-bit integer; the error names the bad one and where it is. May be empty.
Result<std::vector<int32_t>> parse_token_ids(std::string_view text);

// Standard input, whole.
std::string read_stdin();

// Batch mode (--jsonl FILE): calls `each` with every non-empty line of FILE ('-' = standard input), in order, and
// stops at the first error, which comes back prefixed with "FILE:LINE: ".
Status for_each_line(const std::string& path, const std::function<Status(std::string_view line)>& each);

// The --help line of --device for the commands that load a model through the engine (serve, generate), as
// executor/create_engine.cpp resolves it: every family runs on CUDA, so auto means the GPU whenever one is usable.
inline constexpr const char* kDeviceHelp =
    "auto | cpu | cuda (auto: cuda when this build has CUDA and a GPU is visible, for every model family; else the "
    "CPU)";

// Prints "pagoda <command>: <message>" on stderr and returns exit status 1.
int fail(std::string_view command, std::string_view message);

}  // namespace pagoda::cli
