// parallel_region_bench: what one tune_rt_parallel_for region costs beyond its body's work.
//
// Runs regions back to back on the kernel runtime's thread pool, as a generated kernel does
// (one region per parallel loop, kernel calls one after another), and times samples of
// `--regions` regions each. Bodies: empty (the hand-off to the workers and back, nothing
// else) and compute loops of a given serial duration split over the region's indices (a small
// kernel's parallel loop). `--gap-us` puts serial work of the caller between regions (code
// between two parallel loops, or between two kernel calls). Wall time per region is the median
// of the samples; "overhead" is that minus the body's serial time over the threads (measured
// here, the minimum of several serial runs); CPU time is the process's user + system time per
// region, all threads together. Configurations are interleaved sample by sample, so a loaded
// machine's load falls on all of them alike. One table out.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "base/table.h"
#include "codegen/runtime/runtime.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int threads = 2;
  int64_t regions = 20000;   // regions per timed sample
  int repeats = 9;           // samples per configuration (median reported)
  int64_t indices = 16;      // loop iterations per region
  std::vector<double> work_us = {0, 50};  // serial work per region, microseconds (0 = empty body)
  double gap_us = 0;         // the caller's serial work between regions, microseconds
  int spin_us = -1;          // the pool's busy-wait before it sleeps (-1: the runtime's default)
};

/// The body's state: `iters` steps of a dependent multiply-add per index, written out so the
/// compiler keeps them.
struct Work {
  int64_t iters = 0;
  std::vector<double> out;
};

double Spin(int64_t iters, double x) {
  for (int64_t k = 0; k < iters; ++k) x = x * 0.999999 + 1e-7;
  return x;
}

void Body(int64_t i, void* closure) {
  auto* w = static_cast<Work*>(closure);
  w->out[static_cast<size_t>(i) * 8] = Spin(w->iters, static_cast<double>(i));  // a line per index
}

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

/// Steps of Spin() per microsecond on this thread: the fastest of several runs (a loaded machine
/// only ever makes a run slower).
double StepsPerMicrosecond() {
  const int64_t steps = 200000;
  double best = 1e30;
  for (int r = 0; r < 20; ++r) {
    const Clock::time_point a = Clock::now();
    volatile double sink = Spin(steps, 1.0);
    (void)sink;
    best = std::min(best, Seconds(a, Clock::now()));
  }
  return static_cast<double>(steps) / (best * 1e6);
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::string Format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s wants a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--threads") {
      o->threads = std::atoi(value());
    } else if (a == "--regions") {
      o->regions = std::atoll(value());
    } else if (a == "--repeats") {
      o->repeats = std::atoi(value());
    } else if (a == "--indices") {
      o->indices = std::atoll(value());
    } else if (a == "--work-us") {
      o->work_us.clear();
      std::string list = value();
      for (size_t p = 0; p <= list.size();) {
        size_t q = list.find(',', p);
        if (q == std::string::npos) q = list.size();
        o->work_us.push_back(std::atof(list.substr(p, q - p).c_str()));
        p = q + 1;
      }
    } else if (a == "--gap-us") {
      o->gap_us = std::atof(value());
    } else if (a == "--spin-us") {
      o->spin_us = std::atoi(value());
    } else if (a == "--help" || a == "-h") {
      std::printf(
          "parallel_region_bench [--threads T=2] [--regions N=20000] [--repeats R=9] [--indices I=16]\n"
          "                      [--work-us U1,U2,...=0,50] [--gap-us G=0] [--spin-us S]\n"
          "Per-region cost of tune_rt_parallel_for: U = the body's serial work per region (0: empty),\n"
          "G = the caller's serial work between regions, S = the pool's busy-wait before it sleeps\n"
          "(default: the runtime's); median of R samples of N regions.\n");
      std::exit(0);
    } else {
      std::fprintf(stderr, "unknown argument %s (--help lists them)\n", a.c_str());
      return false;
    }
  }
  if (o->threads < 1 || o->regions < 1 || o->repeats < 1 || o->indices < 1 || o->gap_us < 0) {
    std::fprintf(stderr, "--threads, --regions, --repeats, --indices must be >= 1, --gap-us >= 0\n");
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) return 2;
  tune::codegen::runtime::SetNumThreads(o.threads);
  if (o.spin_us >= 0) tune::codegen::runtime::SetSpinMicros(o.spin_us);
  const double steps_per_us = StepsPerMicrosecond();
  const int64_t gap_steps = static_cast<int64_t>(o.gap_us * steps_per_us);

  struct Config {
    double work_us;
    Work work;
    double serial_s = 1e30;             // the body's serial time per region (minimum)
    std::vector<double> wall_s, cpu_s;  // per region, one per sample
  };
  std::vector<Config> configs;
  for (double u : o.work_us) {
    Config c;
    c.work_us = u;
    c.work.iters = static_cast<int64_t>(u * steps_per_us / static_cast<double>(o.indices));
    c.work.out.assign(static_cast<size_t>(o.indices) * 8, 0.0);
    configs.push_back(std::move(c));
  }

  double gap_sink = 0;
  auto run_regions = [&](Config& c, int64_t count) {
    for (int64_t r = 0; r < count; ++r) {
      tune_rt_parallel_for(o.indices, Body, &c.work);
      if (gap_steps > 0) gap_sink += Spin(gap_steps, static_cast<double>(r));
    }
  };
  // Warm-up: the pool's threads start, caches and frequencies settle.
  for (Config& c : configs) run_regions(c, std::max<int64_t>(1, o.regions / 10));

  const std::string load_before = LoadAverage();
  for (int rep = 0; rep < o.repeats; ++rep) {
    for (Config& c : configs) {
      // The body alone, serially on this thread (a tenth of the sample's regions).
      const int64_t serial_regions = std::max<int64_t>(1, o.regions / 10);
      Clock::time_point a = Clock::now();
      for (int64_t r = 0; r < serial_regions; ++r) {
        for (int64_t i = 0; i < o.indices; ++i) Body(i, &c.work);
      }
      c.serial_s = std::min(c.serial_s, Seconds(a, Clock::now()) / static_cast<double>(serial_regions));

      const double cpu0 = CpuSeconds();
      a = Clock::now();
      run_regions(c, o.regions);
      const double wall = Seconds(a, Clock::now());
      const double cpu = CpuSeconds() - cpu0;
      c.wall_s.push_back(wall / static_cast<double>(o.regions));
      c.cpu_s.push_back(cpu / static_cast<double>(o.regions));
    }
  }
  const double gap_s = static_cast<double>(gap_steps) / steps_per_us * 1e-6;

  std::printf("parallel_region_bench: tune_rt_parallel_for, %d threads, %lld indices a region, %lld regions a sample,\n"
              "median of %d samples (configurations interleaved); %u logical CPUs; load average %s before, %s after\n",
              o.threads, static_cast<long long>(o.indices), static_cast<long long>(o.regions), o.repeats,
              std::thread::hardware_concurrency(), load_before.c_str(), LoadAverage().c_str());
  std::printf("caller's serial work between regions: %.1f us; the pool's busy-wait: %d us\n\n", gap_s * 1e6,
              tune::codegen::runtime::SpinMicros());
  std::vector<std::vector<std::string>> rows;
  for (const Config& c : configs) {
    const double wall = Median(c.wall_s);
    const double ideal = c.serial_s / o.threads + gap_s;
    const auto [lo, hi] = std::minmax_element(c.wall_s.begin(), c.wall_s.end());
    rows.push_back({Format("%.1f", c.work_us), Format("%.2f", c.serial_s * 1e6), Format("%.2f", wall * 1e6),
                    Format("%.2f", *lo * 1e6) + " - " + Format("%.2f", *hi * 1e6),
                    Format("%.2f", (wall - ideal) * 1e6), Format("%.2f", Median(c.cpu_s) * 1e6)});
  }
  tune::base::TableStyle style;
  style.markdown = true;
  tune::base::PrintTable({"work us", "serial us", "wall us/region", "min - max", "overhead us", "CPU us/region"},
                         rows, style);
  return gap_sink == 12345.0 ? 1 : 0;  // keeps the gap's work
}
