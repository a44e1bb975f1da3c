// `tune run`: executes a model with its tuned kernels (executor/).
#pragma once

namespace tune::executor {

/// Runs `tune run ...` (argv[1] == "run"); returns the process exit code.
int RunCommand(int argc, char** argv);

}  // namespace tune::executor
