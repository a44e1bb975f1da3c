// `tune export`: a model's tuned kernels written out as a library (exporter/).
#pragma once

namespace tune::exporter {

/// Runs `tune export ...` (argv[1] == "export"); returns the process exit code.
int ExportCommand(int argc, char** argv);

}  // namespace tune::exporter
