// `tune export` (being written).
#include "exporter/export_cli.h"

#include <cstdio>

namespace tune::exporter {

int ExportCommand(int argc, char** argv) {
  std::fprintf(stderr, "tune: 'tune export' is not available in this build\n");
  return 2;
}

}  // namespace tune::exporter
