// `tune run` (being written).
#include "executor/run_cli.h"

#include <cstdio>

namespace tune::executor {

int RunCommand(int argc, char** argv) {
  std::fprintf(stderr, "tune: 'tune run' is not available in this build\n");
  return 2;
}

}  // namespace tune::executor
