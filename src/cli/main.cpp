// pagoda: every user-facing action is `pagoda <subcommand>`; subcommands register themselves.
#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "cli/command.h"
#include "dist/nccl_communicator.h"

namespace {

void print_usage() {
    std::printf("pagoda %s: serves Qwen-family language models\n\nusage: pagoda <command> [options]\n\ncommands:\n",
                PAGODA_VERSION);
    auto commands = pagoda::cli::commands();
    std::sort(commands.begin(), commands.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    for (const auto& c : commands)
        std::printf("  %-12.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                    static_cast<int>(c.summary.size()), c.summary.data());
    std::printf("\n`pagoda <command> --help` describes each command.\n");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        print_usage();
        return 2;
    }
    const std::string_view first = argv[1];
    if (first == "--help" || first == "-h" || first == "help") {
        print_usage();
        return 0;
    }
    if (first == "--version" || first == "-V" || first == "version") {
        std::printf("pagoda %s\n", PAGODA_VERSION);
        return 0;
    }
    pagoda::set_nccl_environment();  // before any thread starts: setenv races with getenv
    std::vector<std::string_view> args(argv + 2, argv + argc);
    for (const auto& c : pagoda::cli::commands())
        if (c.name == first) return c.run(args);
    std::fprintf(stderr, "pagoda: unknown command '%s' (run `pagoda --help` for the list)\n", argv[1]);
    return 2;
}
