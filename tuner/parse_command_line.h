// ParseCommandLine: one subcommand's CLI11 parse with tune's help and one-line usage errors.
#pragma once

#include <optional>

namespace CLI {
class App;
}  // namespace CLI

namespace tune::tuner {

/// Parses argv[0..argc) (argv[0] being the program or subcommand name) into `app`. nullopt
/// when the command should run; otherwise the exit code to return: 0 after printing the help
/// (--help; --help-all for every subcommand), base::kExitUsage after printing "tune: WHAT (see
/// APP --help)" as one line on stderr, APP being app's name ("tune", "tune op", ...).
std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv);

}  // namespace tune::tuner
