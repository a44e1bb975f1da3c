// `tune dataset split` (being written).
#include <cstdio>

#include "tuner/cli_commands.h"

namespace tune::tuner {

int DatasetSplitCommand(int argc, char** argv) {
  std::fprintf(stderr, "tune: 'tune dataset split' is not available in this build\n");
  return 2;
}

}  // namespace tune::tuner
