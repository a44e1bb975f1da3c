// The daemon-side `tune` subcommands: serve, worker, workers.
#pragma once

namespace tune::server {

/// True when argv[1] names a subcommand handled here.
bool IsServerCommand(int argc, char** argv);

/// Runs `tune serve ...`, `tune worker ...` or `tune workers ...`; returns the exit code (0 ok, 1 failure,
/// 2 bad usage or input). Errors are one line on stderr.
int RunServerCli(int argc, char** argv);

}  // namespace tune::server
