// Placeholder: `tune tasks` is being written.
#include "base/exit_code.h"
#include "tuner/cli_commands.h"

namespace tune::tuner {
int TasksCommand(int argc, char** argv) { return base::Fail("tune tasks", base::kExitUsage, "not available yet"); }
}  // namespace tune::tuner
