// Round-robin, gradient (Ansor) and UCB task schedulers.
#include "search/task_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "search/space.h"

namespace tune::search {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Latency to reason with before a task has a measured kernel: its default schedule, or a
/// large finite value so the task gets attention.
double Latency(const TaskProgress& t) {
  double b = t.best();
  if (std::isfinite(b)) return b;
  if (std::isfinite(t.default_s)) return t.default_s;
  return 1.0;
}

/// Tasks that have not had a batch yet come first, in order (every scheduler warms up so).
int FirstUnstarted(const std::vector<TaskProgress>& tasks) {
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (!tasks[i].done && tasks[i].best_history.empty()) return static_cast<int>(i);
  }
  return -1;
}

class RoundRobin : public TaskScheduler {
 public:
  int Next(const std::vector<TaskProgress>& tasks) override {
    int n = static_cast<int>(tasks.size());
    for (int k = 1; k <= n; ++k) {
      int i = (last_ + k) % n;
      if (!tasks[i].done) return last_ = i;
    }
    return -1;
  }

 private:
  int last_ = -1;
};

/// Ansor's task scheduler (Zheng et al., OSDI 2020, sec. 6): minimize f = sum_i w_i g_i(t_i)
/// by giving the next batch to the task with the most negative estimated gradient
///   dg_i/dt ~ alpha * (g_i(t) - g_i(t - dt)) / dt + (1 - alpha) * (-g_i(t) / t),
/// weighted by w_i; with probability epsilon a random unfinished task instead.
class Gradient : public TaskScheduler {
 public:
  explicit Gradient(uint64_t seed) : rng_(seed) {}
  int Next(const std::vector<TaskProgress>& tasks) override {
    int first = FirstUnstarted(tasks);
    if (first >= 0) return first;
    std::vector<int> open;
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (!tasks[i].done) open.push_back(static_cast<int>(i));
    }
    if (open.empty()) return -1;
    if (search::UniformBelow(rng_, 1000) < kEpsilonPermille) {
      return open[search::UniformBelow(rng_, open.size())];
    }
    int best = open[0];
    double best_grad = kInf;
    for (int i : open) {
      const TaskProgress& t = tasks[i];
      const auto& h = t.best_history;
      double g = Latency(t);
      double backward = 0;
      if (h.size() >= 2 && std::isfinite(h[h.size() - 2]) && std::isfinite(h.back())) {
        backward = h.back() - h[h.size() - 2];  // per batch, <= 0
      } else if (h.size() >= 2 && !std::isfinite(h[h.size() - 2]) && std::isfinite(h.back())) {
        backward = -g;  // first success
      }
      double optimistic = -g / static_cast<double>(h.size());
      double grad = t.weight * (kAlpha * backward + (1 - kAlpha) * optimistic);
      if (grad < best_grad) {
        best_grad = grad;
        best = i;
      }
    }
    return best;
  }

 private:
  static constexpr double kAlpha = 0.2;
  static constexpr uint64_t kEpsilonPermille = 50;
  std::mt19937_64 rng_;
};

/// Upper confidence bound on the weighted latency reduction the next batch brings: the mean
/// of the task's recent per-batch reductions (relative to its latency, times weight x
/// latency) plus c * weight x latency * sqrt(ln N / n_i), in the spirit of DynaTune.
class Ucb : public TaskScheduler {
 public:
  int Next(const std::vector<TaskProgress>& tasks) override {
    int first = FirstUnstarted(tasks);
    if (first >= 0) return first;
    double total = 0;
    for (const auto& t : tasks) total += static_cast<double>(t.best_history.size());
    int best = -1;
    double best_score = -kInf;
    for (size_t i = 0; i < tasks.size(); ++i) {
      const TaskProgress& t = tasks[i];
      if (t.done) continue;
      const auto& h = t.best_history;
      double g = Latency(t);
      // Mean relative reduction over the last kWindow batches.
      double gain = 0;
      int count = 0;
      for (size_t j = h.size() > kWindow ? h.size() - kWindow : 1; j < h.size(); ++j) {
        double before = std::isfinite(h[j - 1]) ? h[j - 1] : (std::isfinite(t.default_s) ? t.default_s : h[j]);
        if (std::isfinite(before) && std::isfinite(h[j]) && before > 0) gain += (before - h[j]) / before;
        ++count;
      }
      double mean_gain = count ? gain / count : 0;
      double n = std::max<double>(1, static_cast<double>(h.size()));
      double score = t.weight * g * (mean_gain + kC * std::sqrt(std::log(std::max(2.0, total)) / n));
      if (score > best_score) {
        best_score = score;
        best = static_cast<int>(i);
      }
    }
    return best;
  }

 private:
  static constexpr size_t kWindow = 3;
  static constexpr double kC = 0.1;
};

}  // namespace

double TaskProgress::best() const { return best_history.empty() ? kInf : best_history.back(); }

absl::StatusOr<std::unique_ptr<TaskScheduler>> TaskScheduler::Create(const std::string& name, uint64_t seed) {
  if (name == "round-robin") return std::unique_ptr<TaskScheduler>(new RoundRobin());
  if (name == "gradient") return std::unique_ptr<TaskScheduler>(new Gradient(seed));
  if (name == "ucb") return std::unique_ptr<TaskScheduler>(new Ucb());
  return absl::InvalidArgumentError("unknown task scheduler '" + name + "' (round-robin, gradient, ucb)");
}

std::vector<std::string> TaskScheduler::Names() { return {"round-robin", "gradient", "ucb"}; }

}  // namespace tune::search
