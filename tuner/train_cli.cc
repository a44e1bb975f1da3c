// Placeholder: `tune train` is being written.
#include "base/exit_code.h"
#include "tuner/cli_commands.h"

namespace tune::tuner {
int TrainCommand(int argc, char** argv) { return base::Fail("tune train", base::kExitUsage, "not available yet"); }
}  // namespace tune::tuner
