// Entry point of the `tune` executable: daemon subcommands go to server/, `tune run` to
// executor/, `tune export` to exporter/, the rest to tuner/.
#include <string>

#include "executor/run_cli.h"
#include "exporter/export_cli.h"
#include "server/cli.h"
#include "tuner/cli.h"

int main(int argc, char** argv) {
  if (tune::server::IsServerCommand(argc, argv)) return tune::server::RunServerCli(argc, argv);
  const std::string command = argc >= 2 ? argv[1] : "";
  if (command == "run") return tune::executor::RunCommand(argc, argv);
  if (command == "export") return tune::exporter::ExportCommand(argc, argv);
  return tune::tuner::RunCli(argc, argv);
}
