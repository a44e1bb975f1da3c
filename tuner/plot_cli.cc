// `tune plot` (being written).
#include <cstdio>

#include "tuner/cli_commands.h"

namespace tune::tuner {

int PlotCommand(int argc, char** argv) {
  std::fprintf(stderr, "tune: 'tune plot' is not available in this build\n");
  return 2;
}

}  // namespace tune::tuner
