// The `tune` command line: model tuning, single-operator tuning and database queries.
#pragma once

namespace tune::tuner {

/// Runs the command line; returns the process exit code (0 ok, 1 failure, 2 bad usage/input).
int RunCli(int argc, char** argv);

}  // namespace tune::tuner
