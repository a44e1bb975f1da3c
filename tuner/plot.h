// Plots of the record database: tuning curves and speed-up charts as data files, gnuplot scripts
// and the images gnuplot makes of them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dataset/record_database.h"

namespace tune::tuner {

/// One time a vendor library took on a workload (a row of `tune plot --vendor FILE`).
struct VendorTime {
  std::string workload_key;  // codegen::Workload::Key()
  std::string target_key;    // measure::Target::Key(), or "*" for every target
  std::string vendor;        // e.g. "openblas", "onednn", "cublas"
  double seconds = 0;        // per call, > 0
};

/// Reads a vendor CSV: one row per line, `workload_key,target_key,vendor,seconds`; fields that
/// hold a comma or a quote are double-quoted (a quote inside doubled, as RFC 4180 has it); a
/// first line `workload_key,target_key,vendor,seconds`, blank lines and lines starting with '#'
/// are skipped. InvalidArgument "PATH:LINE: why" for a bad row; NotFound when it cannot be read.
absl::StatusOr<std::vector<VendorTime>> ReadVendorCsv(const std::string& path);

/// What `tune plot` draws and where.
struct PlotOptions {
  std::string out_dir;                 // created when absent
  std::string format = "svg";          // "svg" or "png" (gnuplot's pngcairo terminal)
  std::vector<int64_t> task_ids;       // tasks to draw; empty: every task
  std::vector<int64_t> target_ids;     // targets to draw; empty: every target
  std::vector<VendorTime> vendor;      // vendor bars of the speed-up chart
};

/// One plot: its gnuplot script and the image the script writes, both in the output directory.
struct PlotScript {
  std::string script;  // file name of the script (relative to the output directory)
  std::string image;   // file name of the image it writes
};

/// What WritePlotFiles wrote.
struct PlotFiles {
  std::vector<std::string> data;      // data and script files, paths under out_dir
  std::vector<PlotScript> scripts;    // the plots to run gnuplot on
  std::vector<std::string> notes;     // what was left out and why (one line each)
};

/// Writes the data files and gnuplot scripts of every plot into `options.out_dir`:
///  - per task and target with records: the tuning curve (task-<ID>-<op>-target-<ID>.dat/.gp):
///    best-so-far median latency (ms) of the ok records against the trial number, one line per
///    strategy. A strategy's trials are its records of that task and target in the order they
///    were committed (timestamp, then id), runs one after the other, so a resumed run continues
///    its curve; "finalist" records (configs measured again) are not trials, and the "default"
///    record is a dashed horizontal line. The latency axis is logarithmic when the curve spans
///    more than a factor of 10.
///  - speedup.dat/.gp: one bar per task and target with an ok default record and an ok best
///    record: default median / best median; with vendor times for the task's workload and the
///    target, one more bar per vendor: default median / vendor seconds.
/// Titles are quoted for gnuplot (noenhanced text, single-quoted strings). Unavailable when a
/// file cannot be written.
absl::StatusOr<PlotFiles> WritePlotFiles(const dataset::RecordDatabase& db, const PlotOptions& options);

/// The path of the program `name` found in $PATH; NotFound when it is not there.
absl::StatusOr<std::string> FindProgram(const std::string& name);

/// Runs `gnuplot script` in directory `dir` (posix_spawn; stdin and stdout on /dev/null), killing
/// it after `timeout_s` seconds. NotFound "gnuplot not found (apt install gnuplot-nox)" when no
/// gnuplot is on $PATH; Internal with gnuplot's stderr (on one line) when it fails or times out.
absl::Status RunGnuplot(const std::string& dir, const std::string& script, double timeout_s = 60);

/// `text` as a gnuplot single-quoted string ('' for a quote; control characters become spaces).
std::string GnuplotQuote(std::string_view text);
/// `text` with every character but letters, digits, '.', '_' and '-' replaced by '_', at most
/// 60 characters: safe in a file name.
std::string SanitizeFileName(std::string_view text);

}  // namespace tune::tuner
