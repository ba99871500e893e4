// Subcommand registry: each `cmd_<name>.cpp` registers itself with PAGODA_COMMAND, so adding a
// subcommand never touches main.cpp.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::cli {

// A subcommand receives its own arguments (without the program and subcommand names) and
// returns the process exit status.
using CommandFn = int (*)(std::span<const std::string_view> args);

struct Command {
    std::string_view name;
    std::string_view summary;  // one line for `pagoda --help`
    CommandFn run;
};

const std::vector<Command>& commands();
bool register_command(Command command);

}  // namespace pagoda::cli

#define PAGODA_COMMAND(name, summary, fn) \
    static const bool pagoda_command_registered_##fn = ::pagoda::cli::register_command({name, summary, fn})
