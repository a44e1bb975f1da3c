// `tune dataset collect` (being written).
#include <cstdio>

#include "tuner/cli_commands.h"

namespace tune::tuner {

int DatasetCollectCommand(int argc, char** argv) {
  std::fprintf(stderr, "tune: 'tune dataset collect' is not available in this build\n");
  return 2;
}

}  // namespace tune::tuner
