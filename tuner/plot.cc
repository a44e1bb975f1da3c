// Plots of the record database: data files and gnuplot scripts per plot, gnuplot run with a timeout.
#include "tuner/plot.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "codegen/ir/workload.h"

extern char** environ;

namespace tune::tuner {
namespace {

// A task's short name for titles and bar labels: the workload's label with its epilogue
// ("conv2d 1x64x56x56 k3 s1 oc64 bias_relu"), or the key itself when it does not parse.
std::string TaskLabel(const std::string& workload_key) {
  absl::StatusOr<codegen::Workload> w = codegen::Workload::FromKey(workload_key);
  if (!w.ok()) return workload_key;
  const std::vector<std::string> parts = absl::StrSplit(workload_key, '/');
  return parts.size() == 4 && parts[2] != "none" ? absl::StrCat(w->Label(), " ", parts[2]) : w->Label();
}

// A target's short name: its kind and device ("llvm|icelake-client", "cuda|sm_90|NVIDIA H100").
std::string TargetLabel(const std::string& target_key) {
  const std::vector<std::string> parts = absl::StrSplit(target_key, '|');
  if (parts.size() < 3) return target_key;
  return parts[0] == "cuda" ? absl::StrCat(parts[0], "|", parts[1], "|", parts[2]) : absl::StrCat(parts[0], "|", parts[1]);
}

constexpr double kInf = std::numeric_limits<double>::infinity();

// A number for a data file (10 significant digits are more than a plot shows); NaN when not finite.
std::string Num(double v) {
  if (!std::isfinite(v)) return "NaN";
  char text[40];
  std::snprintf(text, sizeof(text), "%.10g", v);
  return text;
}

absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  return absl::OkStatus();
}

// The terminal line of a script writing `image` in `format`.
std::string Terminal(const std::string& format, int width, int height) {
  if (format == "png") {
    return absl::StrCat("set terminal pngcairo size ", width, ",", height, " noenhanced font 'sans,10'\n");
  }
  return absl::StrCat("set terminal svg size ", width, ",", height,
                      " noenhanced font 'sans,11' background rgb 'white'\n");
}

// Splits one CSV line into fields (double-quoted fields may hold commas and "" for a quote).
absl::StatusOr<std::vector<std::string>> SplitCsv(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"' && fields.back().empty()) {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  if (quoted) return absl::InvalidArgumentError("a quoted field is not closed");
  return fields;
}

struct Curve {
  std::string strategy;
  std::vector<std::pair<int, double>> points;  // trial number, best-so-far ms
};

}  // namespace

std::string GnuplotQuote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "''";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string SanitizeFileName(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 60)) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '_' || c == '-';
    out += safe ? c : '_';
  }
  if (out.empty() || out[0] == '.') out.insert(0, "_");
  return out;
}

absl::StatusOr<std::vector<VendorTime>> ReadVendorCsv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  std::vector<VendorTime> rows;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", number, ": ", why));
    };
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[0] == '#') continue;
    absl::StatusOr<std::vector<std::string>> fields = SplitCsv(line);
    if (!fields.ok()) return bad(std::string(fields.status().message()));
    if (number == 1 && fields->size() == 4 && (*fields)[0] == "workload_key") continue;  // the header
    if (fields->size() != 4) {
      return bad(absl::StrCat("expected 4 fields (workload_key,target_key,vendor,seconds), got ", fields->size()));
    }
    VendorTime row{(*fields)[0], (*fields)[1], (*fields)[2], 0};
    if (row.workload_key.empty() || row.target_key.empty() || row.vendor.empty()) return bad("an empty field");
    const std::string& text = (*fields)[3];
    char* end = nullptr;
    errno = 0;
    row.seconds = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || errno != 0 || !std::isfinite(row.seconds) ||
        row.seconds <= 0) {
      return bad(absl::StrCat("seconds must be a number > 0, not '", text, "'"));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

absl::StatusOr<PlotFiles> WritePlotFiles(const dataset::RecordDatabase& db, const PlotOptions& options) {
  std::error_code ec;
  std::filesystem::create_directories(options.out_dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", options.out_dir, ": ", ec.message()));
  auto tasks = db.Tasks();
  if (!tasks.ok()) return tasks.status();
  auto targets = db.Targets();
  if (!targets.ok()) return targets.status();
  auto selected = [](const std::vector<int64_t>& ids, int64_t id) {
    return ids.empty() || std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  const std::string ext = options.format == "png" ? "png" : "svg";
  PlotFiles files;
  auto path = [&](const std::string& name) { return (std::filesystem::path(options.out_dir) / name).string(); };

  struct Bar {
    std::string label;
    double speedup = 0;
    std::map<std::string, double> vendor;  // vendor -> speed-up
  };
  std::vector<Bar> bars;
  std::set<std::string> vendors;

  for (const dataset::TaskInfo& task : *tasks) {
    if (!selected(options.task_ids, task.id)) continue;
    for (const dataset::TargetInfo& target : *targets) {
      if (!selected(options.target_ids, target.id)) continue;
      auto records = db.Records(task.id, target.id);
      if (!records.ok()) return records.status();
      if (records->empty()) continue;

      // The curves: per strategy, in commit order.
      std::vector<Curve> curves;
      std::map<std::string, size_t> curve_of;
      std::map<std::string, int> trials;
      std::map<std::string, double> best_of;
      double default_s = kInf, best_s = kInf;
      for (const dataset::Record& r : *records) {
        const double s = r.result.ok() ? r.result.Median() : kInf;
        best_s = std::min(best_s, s);
        if (r.strategy == "default") {
          default_s = std::min(default_s, s);
          continue;
        }
        if (r.strategy == "finalist") continue;
        const int trial = ++trials[r.strategy];
        auto [it, added] = best_of.emplace(r.strategy, kInf);
        it->second = std::min(it->second, s);
        if (!std::isfinite(it->second)) continue;
        auto [c, fresh] = curve_of.emplace(r.strategy, curves.size());
        if (fresh) curves.push_back(Curve{r.strategy, {}});
        curves[c->second].points.emplace_back(trial, it->second * 1e3);
      }
      const std::string base = absl::StrCat("task-", task.id, "-", SanitizeFileName(task.op), "-target-", target.id);
      std::string data = absl::StrCat("# tuning curve of task ", task.id, " (", task.workload_key, ") on target ",
                                      target.id, " (", target.key, ")\n",
                                      "# per strategy (blocks in gnuplot's index order): trial, best-so-far ms\n");
      double lo = kInf, hi = 0;
      for (size_t i = 0; i < curves.size(); ++i) {
        absl::StrAppend(&data, i == 0 ? "" : "\n\n", "# strategy ", curves[i].strategy, "\n");
        for (const auto& [trial, ms] : curves[i].points) {
          absl::StrAppend(&data, trial, " ", Num(ms), "\n");
          lo = std::min(lo, ms);
          hi = std::max(hi, ms);
        }
      }
      if (std::isfinite(default_s)) {
        lo = std::min(lo, default_s * 1e3);
        hi = std::max(hi, default_s * 1e3);
      }
      if (curves.empty()) {
        files.notes.push_back(absl::StrCat("task ", task.id, " on target ", target.id,
                                           ": no ok record of a search strategy, no tuning curve"));
      } else {
        const std::string title =
            absl::StrCat(TaskLabel(task.workload_key), " (task ", task.id, ") on ", TargetLabel(target.key));
        std::string script = Terminal(options.format, 900, 540);
        absl::StrAppend(&script, "set output ", GnuplotQuote(base + "." + ext), "\n", "set title ",
                        GnuplotQuote(title), "\n",
                        "set xlabel 'trial (per strategy, in the order measured)'\n"
                        "set ylabel 'best-so-far latency (ms)'\n"
                        "set key top right\nset grid\n",
                        hi > 10 * lo ? "set logscale y\n" : "", "plot ");
        for (size_t i = 0; i < curves.size(); ++i) {
          absl::StrAppend(&script, i == 0 ? "" : ", \\\n     ", GnuplotQuote(base + ".dat"), " index ", i,
                          " using 1:2 with steps linewidth 2 title ", GnuplotQuote(curves[i].strategy));
        }
        if (std::isfinite(default_s)) {
          absl::StrAppend(&script, ", \\\n     ", Num(default_s * 1e3),
                          " with lines dashtype 2 linecolor rgb 'gray40' title 'default'");
        }
        absl::StrAppend(&script, "\n");
        if (absl::Status s = WriteTextFile(path(base + ".dat"), data); !s.ok()) return s;
        if (absl::Status s = WriteTextFile(path(base + ".gp"), script); !s.ok()) return s;
        files.data.push_back(path(base + ".dat"));
        files.data.push_back(path(base + ".gp"));
        files.scripts.push_back(PlotScript{base + ".gp", base + "." + ext});
      }

      // The speed-up bar of this task and target.
      if (!std::isfinite(default_s) || !std::isfinite(best_s)) {
        files.notes.push_back(absl::StrCat("task ", task.id, " on target ", target.id,
                                           std::isfinite(default_s) ? ": no ok record" : ": no ok default record",
                                           ", no speed-up bar"));
        continue;
      }
      Bar bar{absl::StrCat(task.id, ": ", TaskLabel(task.workload_key),
                           targets->size() > 1 ? absl::StrCat(" @", target.id) : ""),
              default_s / best_s,
              {}};
      for (const VendorTime& v : options.vendor) {
        if (v.workload_key == task.workload_key && (v.target_key == "*" || v.target_key == target.key)) {
          bar.vendor[v.vendor] = default_s / v.seconds;
          vendors.insert(v.vendor);
        }
      }
      bars.push_back(std::move(bar));
    }
  }

  if (bars.empty()) {
    files.notes.push_back("no task has an ok default record and an ok best record: no speed-up chart");
    return files;
  }
  std::string data = absl::StrCat("# speed-up over the default schedule: label, tune",
                                  vendors.empty() ? "" : ", ", absl::StrJoin(vendors, ", "),
                                  " (- : no time recorded)\n");
  for (const Bar& bar : bars) {
    absl::StrAppend(&data, "\"", absl::StrReplaceAll(bar.label, {{"\"", "'"}}), "\" ", Num(bar.speedup));
    for (const std::string& v : vendors) {
      auto it = bar.vendor.find(v);
      absl::StrAppend(&data, " ", it == bar.vendor.end() ? "-" : Num(it->second));
    }
    absl::StrAppend(&data, "\n");
  }
  const int width = std::max(700, 140 + static_cast<int>(bars.size() * (vendors.size() + 1)) * 32);
  std::string script = Terminal(options.format, width, 640);
  absl::StrAppend(&script, "set output ", GnuplotQuote("speedup." + ext), "\n",
                  "set title 'speed-up of the best record over the default schedule'\n"
                  "set ylabel 'speed-up (default / best)'\n"
                  "set datafile missing '-'\n"
                  "set style data histograms\nset style histogram clustered gap 1\n"
                  "set style fill solid 0.8 border -1\nset boxwidth 0.9\n"
                  "set xtics rotate by 90 right\nset grid ytics\nset yrange [0:*]\n"
                  "set key top left\n",
                  "plot 'speedup.dat' using 2:xtic(1) title 'tune'");
  int column = 3;
  for (const std::string& v : vendors) {
    absl::StrAppend(&script, ", \\\n     '' using ", column++, " title ", GnuplotQuote(v));
  }
  absl::StrAppend(&script, "\n");
  if (absl::Status s = WriteTextFile(path("speedup.dat"), data); !s.ok()) return s;
  if (absl::Status s = WriteTextFile(path("speedup.gp"), script); !s.ok()) return s;
  files.data.push_back(path("speedup.dat"));
  files.data.push_back(path("speedup.gp"));
  files.scripts.push_back(PlotScript{"speedup.gp", "speedup." + ext});
  return files;
}

absl::StatusOr<std::string> FindProgram(const std::string& name) {
  const char* env = std::getenv("PATH");
  std::stringstream dirs(env != nullptr ? env : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + name;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return absl::NotFoundError(absl::StrCat(name, " not found"));
}

absl::Status RunGnuplot(const std::string& dir, const std::string& script, double timeout_s) {
  absl::StatusOr<std::string> gnuplot = FindProgram("gnuplot");
  if (!gnuplot.ok()) return absl::NotFoundError("gnuplot not found (apt install gnuplot-nox)");
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  posix_spawn_file_actions_addchdir_np(&actions, dir.c_str());
  std::vector<std::string> args = {*gnuplot, script};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, gnuplot->c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(err_pipe[1]);
  if (spawned != 0) {
    ::close(err_pipe[0]);
    return absl::InternalError(absl::StrCat("cannot run ", *gnuplot, ": ", std::strerror(spawned)));
  }
  std::string err;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  pollfd fd{err_pipe[0], POLLIN, 0};
  while (fd.fd >= 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      timed_out = true;
      break;
    }
    const int n = ::poll(&fd, 1, 100);
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    char buf[4096];
    const ssize_t got = ::read(fd.fd, buf, sizeof(buf));
    if (got > 0) {
      if (err.size() < 64 * 1024) err.append(buf, static_cast<size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(err_pipe[0]);
  int status = 0;
  // gnuplot closed its stderr: it is ending. Wait, within the deadline, then kill.
  while (true) {
    const pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid || (got < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      timed_out = true;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    ::usleep(10000);
  }
  std::string message = err;
  std::replace(message.begin(), message.end(), '\n', ' ');
  while (!message.empty() && message.back() == ' ') message.pop_back();
  if (timed_out) {
    return absl::InternalError(absl::StrCat("gnuplot ", script, " did not finish within ", timeout_s, " s",
                                            message.empty() ? "" : ": ", message));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("gnuplot ", script, " failed",
                                            WIFEXITED(status) ? absl::StrCat(" (exit ", WEXITSTATUS(status), ")")
                                                              : absl::StrCat(" (signal ", WTERMSIG(status), ")"),
                                            message.empty() ? "" : ": ", message));
  }
  return absl::OkStatus();
}

}  // namespace tune::tuner
