// The subcommands of `tune` that live in their own files, called by RunCli (tuner/cli.cc).
#pragma once

namespace tune::tuner {

/// `tune db ...`: queries of the record database (tuner/db_cli.cc). Returns the exit code.
int DbCommand(int argc, char** argv);

/// `tune plot ...`: tuning curves and speed-up charts from the record database
/// (tuner/plot_cli.cc). Returns the exit code.
int PlotCommand(int argc, char** argv);

/// `tune dataset collect ...`: measures N diverse configs of every task of a list of models
/// into a record database, resumably (tuner/dataset_collect_cli.cc). argv[1] is "dataset",
/// argv[2] "collect". Returns the exit code.
int DatasetCollectCommand(int argc, char** argv);

/// `tune dataset split ...`: splits a dataset's tasks by network into training and held-out
/// sets (tuner/dataset_split_cli.cc). argv[1] is "dataset", argv[2] "split".
int DatasetSplitCommand(int argc, char** argv);

/// `tune train ...`: trains an offline cost model (xgb, lstm, gnn) on a dataset's records and
/// writes a .tcm artifact; `tune train --eval MODEL.tcm ...` prints its metrics on held-out
/// networks (tuner/train_cli.cc).
int TrainCommand(int argc, char** argv);

/// `tune tasks MODEL ...`: the tuning tasks of a model (zoo name, model file, ONNX file) as a
/// table, or as a model file with --json (tuner/tasks_cli.cc).
int TasksCommand(int argc, char** argv);

}  // namespace tune::tuner
