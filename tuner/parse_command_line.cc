// ParseCommandLine: help and usage errors of every `tune` subcommand, printed the same way.
#include "tuner/parse_command_line.h"

#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "base/exit_code.h"

namespace tune::tuner {

std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::printf("%s", app.help("", CLI::AppFormatMode::All).c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    return base::Fail("tune", base::kExitUsage, std::string(e.what()) + " (see " + app.get_name() + " --help)");
  }
  return std::nullopt;
}

}  // namespace tune::tuner
