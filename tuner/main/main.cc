// Entry point of the `tune` executable: daemon subcommands go to server/, the rest to tuner/.
#include "server/cli.h"
#include "tuner/cli.h"

int main(int argc, char** argv) {
  if (tune::server::IsServerCommand(argc, argv)) return tune::server::RunServerCli(argc, argv);
  return tune::tuner::RunCli(argc, argv);
}
