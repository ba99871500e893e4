#include "cli/command.h"

namespace pagoda::cli {

namespace {
std::vector<Command>& registry() {
    static std::vector<Command> commands;  // filled by static initialisers before main()
    return commands;
}
}  // namespace

const std::vector<Command>& commands() { return registry(); }

bool register_command(Command command) {
    registry().push_back(command);
    return true;
}

}  // namespace pagoda::cli
