// The subcommands of `tune` that live in their own files, called by RunCli (tuner/cli.cc).
#pragma once

namespace tune::tuner {

/// `tune db ...`: queries of the record database (tuner/db_cli.cc). Returns the exit code.
int DbCommand(int argc, char** argv);

/// `tune plot ...`: tuning curves and speed-up charts from the record database
/// (tuner/plot_cli.cc). Returns the exit code.
int PlotCommand(int argc, char** argv);

}  // namespace tune::tuner
