// `tune train`: trains an offline cost model on a dataset with held-out networks, or evaluates trained ones side by side.
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/exit_code.h"
#include "base/table.h"
#include "costmodel/artifact.h"
#include "costmodel/ensemble_model.h"
#include "costmodel/features.h"
#include "costmodel/offline_model.h"
#include "costmodel/ranking_metrics.h"
#include "nlohmann/json.hpp"
#include "tuner/cli_commands.h"
#include "tuner/cli_format.h"
#include "tuner/cli_support.h"
#include "tuner/parse_command_line.h"
#include "tuner/training_data.h"

namespace tune::tuner {
namespace {

constexpr char kWho[] = "tune train";
constexpr char kDefaultNetworks[] = "data/networks";

/// One row of the held-out table: a network (or "overall") as one model ranks it.
struct MetricRow {
  std::string name;
  int tasks = 0;
  int64_t configs = 0;
  std::optional<double> top1, top5, pairwise, kendall;
};

std::optional<double> MeanOf(const std::vector<std::optional<double>>& values) {
  double sum = 0;
  int n = 0;
  for (const auto& v : values) {
    if (v) sum += *v, ++n;
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

/// The held-out metrics of `model` on data.test: one row per held-out network, then "overall"
/// (top-k: the mean over networks, as TenSet reports it; pairwise and Kendall: the mean over
/// every test task).
std::vector<MetricRow> HeldOutRows(const costmodel::OfflineModel& model, const TrainingData& data) {
  std::vector<costmodel::RankedTask> ranked;
  ranked.reserve(data.test.size());
  for (const costmodel::TrainGroup& g : data.test) {
    std::vector<const costmodel::ModelInput*> in;
    in.reserve(g.inputs.size());
    for (const costmodel::ModelInput& x : g.inputs) in.push_back(&x);
    costmodel::RankedTask t;
    t.latencies_s = g.latencies_s;
    t.scores = model.Score(in);
    for (double& s : t.scores)
      if (!std::isfinite(s)) s = -1e30;
    ranked.push_back(std::move(t));
  }
  std::vector<MetricRow> rows;
  std::vector<costmodel::Network> networks;
  for (const TestNetwork& tn : data.test_networks) {
    MetricRow r;
    r.name = tn.name;
    r.tasks = static_cast<int>(tn.network.tasks.size());
    std::vector<std::optional<double>> pair, tau;
    for (const costmodel::WeightedTask& w : tn.network.tasks) {
      r.configs += static_cast<int64_t>(ranked[w.task].latencies_s.size());
      pair.push_back(costmodel::PairwiseAccuracy(ranked[w.task]));
      tau.push_back(costmodel::KendallTau(ranked[w.task]));
    }
    if (!tn.network.tasks.empty()) {
      r.top1 = costmodel::TopKScore(ranked, tn.network, 1);
      r.top5 = costmodel::TopKScore(ranked, tn.network, 5);
      networks.push_back(tn.network);
    }
    r.pairwise = MeanOf(pair);
    r.kendall = MeanOf(tau);
    rows.push_back(std::move(r));
  }
  MetricRow all;
  all.name = "overall";
  all.tasks = static_cast<int>(ranked.size());
  std::vector<std::optional<double>> pair, tau;
  for (const costmodel::RankedTask& t : ranked) {
    all.configs += static_cast<int64_t>(t.latencies_s.size());
    pair.push_back(costmodel::PairwiseAccuracy(t));
    tau.push_back(costmodel::KendallTau(t));
  }
  all.top1 = costmodel::TopKScores(ranked, networks, 1).mean;
  all.top5 = costmodel::TopKScores(ranked, networks, 5).mean;
  all.pairwise = MeanOf(pair);
  all.kendall = MeanOf(tau);
  rows.push_back(std::move(all));
  return rows;
}

std::string Fixed(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", *v);
  return buf;
}

/// The ensemble's members normalised per Score call instead of by their fitted scales: a
/// z-score or the rank (ties share their mean rank) among the call's inputs, averaged. Only for
/// comparing normalisations on the held-out tasks, where each call holds one task's configs;
/// the search compares scores across calls, where this is unsound (costmodel/ensemble_model.h).
class PerCallNormalisedEnsemble final : public costmodel::OfflineModel {
 public:
  PerCallNormalisedEnsemble(const costmodel::EnsembleModel& ensemble, bool rank) : e_(ensemble), rank_(rank) {}
  std::string kind() const override { return "ensemble"; }
  costmodel::InputNeeds needs() const override { return e_.needs(); }
  bool trained() const override { return e_.trained(); }
  absl::Status Train(const std::vector<costmodel::TrainGroup>&, const std::vector<costmodel::TrainGroup>&,
                     const costmodel::TrainOptions&) override {
    return absl::UnimplementedError("evaluation only");
  }
  std::vector<double> Score(const std::vector<const costmodel::ModelInput*>& inputs) const override {
    std::vector<double> out(inputs.size(), 0.0);
    for (std::vector<double> s : e_.MemberScores(inputs)) {
      if (rank_) {
        std::vector<size_t> order(s.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s[a] < s[b]; });
        std::vector<double> r(s.size());
        for (size_t i = 0; i < order.size();) {
          size_t j = i;
          while (j + 1 < order.size() && s[order[j + 1]] == s[order[i]]) ++j;
          for (size_t k = i; k <= j; ++k) r[order[k]] = (static_cast<double>(i) + static_cast<double>(j)) / 2;
          i = j + 1;
        }
        s = std::move(r);
      } else {
        double mean = 0, var = 0;
        for (double v : s) mean += v;
        mean /= static_cast<double>(std::max<size_t>(s.size(), 1));
        for (double v : s) var += (v - mean) * (v - mean);
        const double sd = s.size() > 1 ? std::sqrt(var / static_cast<double>(s.size())) : 0;
        for (double& v : s) v = sd > 1e-12 ? (v - mean) / sd : 0;
      }
      for (size_t i = 0; i < out.size(); ++i) out[i] += s[i];
    }
    return out;
  }
  absl::StatusOr<std::string> SavePayload() const override { return absl::UnimplementedError("evaluation only"); }
  absl::Status LoadPayload(const std::string&) override { return absl::UnimplementedError("evaluation only"); }

 private:
  const costmodel::EnsembleModel& e_;
  bool rank_;
};

nlohmann::json RowJson(const MetricRow& r) {
  auto value = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"tasks", r.tasks},         {"configs", r.configs},         {"top1", value(r.top1)},
          {"top5", value(r.top5)},    {"pairwise", value(r.pairwise)}, {"kendall", value(r.kendall)}};
}

nlohmann::json EvalJson(const costmodel::EvalMetrics& m) {
  return {{"groups", m.groups},     {"configs", m.configs}, {"top1", m.top1},     {"top5", m.top5},
          {"pairwise", m.pairwise}, {"kendall", m.kendall}, {"spearman", m.spearman},
          {"objective", costmodel::ValidationObjective(m)}};
}

/// The table of one or more models' rows (same networks, same order), one column group per model.
void PrintMetricTable(const std::vector<std::string>& labels, const std::vector<std::vector<MetricRow>>& per_model,
                      bool markdown) {
  std::vector<std::string> header = {"network", "tasks", "configs"};
  for (const std::string& label : labels) {
    for (const char* m : {"top-1", "top-5", "pairwise", "kendall"}) header.push_back(label + " " + m);
  }
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < per_model[0].size(); ++i) {
    const MetricRow& first = per_model[0][i];
    std::vector<std::string> row = {first.name, std::to_string(first.tasks), std::to_string(first.configs)};
    for (const auto& model_rows : per_model) {
      const MetricRow& r = model_rows[i];
      for (const auto& v : {r.top1, r.top5, r.pairwise, r.kendall}) row.push_back(Fixed(v));
    }
    rows.push_back(std::move(row));
  }
  if (!markdown) {
    base::PrintTable(header, rows);
    return;
  }
  auto line = [](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (const std::string& c : cells) out += " " + base::EscapeControl(c) + " |";
    return out + "\n";
  };
  std::string out = line(header) + "|";
  for (size_t i = 0; i < header.size(); ++i) out += i == 0 ? " --- |" : " ---: |";
  out += "\n";
  for (const auto& row : rows) out += line(row);
  std::fputs(out.c_str(), stdout);
}

double PeakRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

/// The data-loading progress line: featurized records so far.
std::function<void(int64_t, int64_t)> LoadProgress(LiveLine* line, std::chrono::steady_clock::time_point start) {
  return [line, start, last = int64_t{-1}](int64_t done, int64_t total) mutable {
    if (done == last) return;
    if (!line->tty() && done != total && done - last < std::max<int64_t>(total / 10, 1)) return;
    last = done;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    char buf[256];
    std::snprintf(buf, sizeof(buf), "featurizing records %lld/%lld (%.0f%%)  elapsed %s",
                  static_cast<long long>(done), static_cast<long long>(total),
                  total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0,
                  FormatSeconds(s).c_str());
    line->Show(buf);
  };
}

std::string DataLine(const TrainingData& d) {
  auto count = [](const std::vector<costmodel::TrainGroup>& groups) {
    int64_t n = 0;
    for (const auto& g : groups) n += static_cast<int64_t>(g.inputs.size());
    return absl::StrCat(groups.size(), " tasks / ", n, " records");
  };
  return absl::StrCat("data: ", d.records, " records on ", d.target_key, " (train ", count(d.train), ", valid ",
                      count(d.valid), ", test ", count(d.test), "); ", d.skipped, " skipped");
}

/// Why records were left out: the first few tasks' reasons, and how many more tasks lost some.
void PrintSkipReasons(const TrainingData& d) {
  constexpr size_t kShown = 5;
  for (size_t i = 0; i < d.skip_reasons.size() && i < kShown; ++i) {
    std::fprintf(stderr, "tune: left out %s\n", base::EscapeControl(d.skip_reasons[i]).c_str());
  }
  if (d.skip_reasons.size() > kShown) {
    std::fprintf(stderr, "tune: ... and records of %zu more tasks\n", d.skip_reasons.size() - kShown);
  }
}

/// --networks as given, or the default folder when a holdout needs networks and none are named.
absl::StatusOr<std::vector<std::string>> NetworksOrDefault(std::vector<std::string> networks) {
  if (!networks.empty()) return networks;
  std::error_code ec;
  if (!std::filesystem::is_directory(kDefaultNetworks, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("--networks not given and ", kDefaultNetworks,
                                                   " does not exist: name the dataset's networks"));
  }
  return std::vector<std::string>{kDefaultNetworks};
}

int Evaluate(const std::vector<std::string>& paths, TrainingDataOptions data_options, bool markdown) {
  std::vector<costmodel::Artifact> artifacts;
  costmodel::InputNeeds needs;
  for (const std::string& path : paths) {
    auto a = costmodel::ReadArtifactFile(path);
    if (!a.ok()) return base::Fail("tune", base::kExitUsage, std::string(a.status().message()));
    if (!artifacts.empty() && a->info.target_family != artifacts[0].info.target_family) {
      return base::Fail("tune", base::kExitUsage,
                        absl::StrCat(path, " is a ", a->info.target_family, " model, ", paths[0], " a ",
                                     artifacts[0].info.target_family, " one"));
    }
    needs.ast = needs.ast || a->model->needs().ast;
    needs.graph = needs.graph || a->model->needs().graph;
    artifacts.push_back(*std::move(a));
  }
  if (data_options.target.empty()) data_options.target = artifacts[0].info.target_family;
  data_options.needs = needs;
  LiveLine line;
  const auto start = std::chrono::steady_clock::now();
  auto data = LoadTrainingData(data_options, LoadProgress(&line, start));
  line.Finish();
  if (!data.ok()) return base::Fail("tune", data.status());
  if (data->target_family != artifacts[0].info.target_family) {
    return base::Fail("tune", base::kExitUsage,
                      absl::StrCat(paths[0], " is a ", artifacts[0].info.target_family, " model; the records are of ",
                                   data->target_key));
  }
  std::fprintf(stderr, "tune: %s\n", DataLine(*data).c_str());
  PrintSkipReasons(*data);
  std::map<std::string, int> kinds;
  for (const auto& a : artifacts) ++kinds[a.info.kind];
  std::vector<std::string> labels;
  std::vector<std::vector<MetricRow>> per_model;
  for (size_t i = 0; i < artifacts.size(); ++i) {
    const auto& a = artifacts[i];
    for (const auto& [name, version] : a.info.template_versions) {
      auto it = data->template_versions.find(name);
      if (it != data->template_versions.end() && it->second != version) {
        std::fprintf(stderr, "tune: %s was trained on template %s v%d; the records are of v%d\n", paths[i].c_str(),
                     name.c_str(), version, it->second);
      }
    }
    labels.push_back(kinds[a.info.kind] > 1 ? std::filesystem::path(paths[i]).stem().string() : a.info.kind);
    per_model.push_back(HeldOutRows(*a.model, *data));
  }
  PrintMetricTable(labels, per_model, markdown);
  return 0;
}

/// The ensemble's report: each member alone, the mean over members, and the ensemble with its
/// fitted scales and with per-call normalisations; as table rows (model, top-1, top-5,
/// pairwise, kendall) and as JSON.
nlohmann::json EnsembleReport(const costmodel::EnsembleModel& e, const TrainingData& data,
                              const std::vector<MetricRow>& ensemble_rows, std::vector<std::vector<std::string>>* table_out) {
  std::vector<std::vector<std::string>>& table = *table_out;
  nlohmann::json members = nlohmann::json::array();
  double sum[4] = {0, 0, 0, 0};
  int n[4] = {0, 0, 0, 0};
  auto cells = [](const std::string& name, const MetricRow& r) {
    return std::vector<std::string>{name, Fixed(r.top1), Fixed(r.top5), Fixed(r.pairwise), Fixed(r.kendall)};
  };
  for (size_t i = 0; i < e.member_count(); ++i) {
    const costmodel::EnsembleMemberInfo& info = e.member_info(i);
    const MetricRow overall = HeldOutRows(e.member(i), data).back();
    const std::string name = absl::StrCat("member ", i + 1, ": ", info.kind, " ", info.loss, " seed ", info.seed);
    table.push_back(cells(name, overall));
    nlohmann::json j = RowJson(overall);
    j["kind"] = info.kind;
    j["loss"] = info.loss;
    j["seed"] = info.seed;
    j["source"] = info.source;
    j["scale"] = info.scale;
    members.push_back(std::move(j));
    const std::optional<double> v[4] = {overall.top1, overall.top5, overall.pairwise, overall.kendall};
    for (int k = 0; k < 4; ++k) {
      if (v[k]) sum[k] += *v[k], ++n[k];
    }
  }
  MetricRow mean;
  std::optional<double>* fields[4] = {&mean.top1, &mean.top5, &mean.pairwise, &mean.kendall};
  for (int k = 0; k < 4; ++k) {
    if (n[k] > 0) *fields[k] = sum[k] / n[k];
  }
  table.push_back(cells("members' mean", mean));
  table.push_back(cells("ensemble (fitted scales)", ensemble_rows.back()));
  const MetricRow z = HeldOutRows(PerCallNormalisedEnsemble(e, /*rank=*/false), data).back();
  const MetricRow r = HeldOutRows(PerCallNormalisedEnsemble(e, /*rank=*/true), data).back();
  table.push_back(cells("ensemble (z-score per task)", z));
  table.push_back(cells("ensemble (rank per task)", r));
  return {{"members", members}, {"members_mean", RowJson(mean)}, {"per_task_z", RowJson(z)}, {"per_task_rank", RowJson(r)}};
}

}  // namespace

int TrainCommand(int argc, char** argv) {
  // One training a process: freed tensors stay in the heap for the next batch instead of being
  // unmapped and faulted in (zeroed) again, which took about a fifth of a gnn epoch
  // (docs/BENCHMARKS.md). Allocations up to glibc's largest threshold (32 MiB) come from the heap.
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  CLI::App app{"tune train: train an offline cost model (xgb, lstm, gnn, or an ensemble of them) on a dataset's records, holding out whole "
               "networks, and write it as a .tcm artifact with its held-out metrics (TenSet's top-1/top-5 scores, "
               "pairwise accuracy, Kendall tau); with --eval, the held-out metrics of trained models side by side.\n"
               "usage: tune train --model xgb|lstm|gnn (--db DB | --data FILE) --holdout LIST --out MODEL.tcm "
               "[options]\n"
               "       tune train --model ensemble [--members K] [--member M.tcm ...] (--db DB | --data FILE) "
               "--holdout LIST --out MODEL.tcm [options]\n"
               "       tune train --eval A.tcm [B.tcm ...] (--db DB | --data FILE) --holdout LIST [--markdown]",
               kWho};
  std::string model_kind, out_path;
  std::vector<std::string> eval_paths, member_paths;
  TrainingDataOptions d;
  costmodel::TrainOptions t;
  bool markdown = false;
  d.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  t.threads = d.threads;
  app.add_option("--model", model_kind, "model kind: xgb, lstm, gnn or ensemble");
  CLI::Option* members_opt =
      app.add_option("--members", t.members,
                     "ensemble: xgb members to train, with seeds SEED..SEED+K-1 (default 5; 0 with --member)")
          ->check(CLI::Range(0, 1000));
  app.add_option("--member", member_paths, "ensemble: a trained .tcm model to include as a member (repeatable)");
  app.add_option("--member-loss", t.member_losses,
                 "ensemble: the trained members' losses, taken in turn (comma-separated; default --loss)")
      ->delimiter(',')
      ->check(CLI::IsMember({"pairwise", "lambdarank", "regression"}));
  CLI::Option* splits_opt = app.add_flag(
      "--member-splits,!--no-member-splits", t.member_splits,
      "ensemble: each trained member early-stops on its own draw of validation tasks from the training networks' "
      "tasks and trains on the rest (the default); --no-member-splits: all on the same validation tasks, so that "
      "only --member-loss, --subsample and --colsample make them differ (XGBoost 1.7's pair sampling ignores the seed)");
  app.add_option("--subsample", t.subsample, "xgb: share of rows each tree is grown on (default 1)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--colsample", t.colsample, "xgb: share of feature columns each tree is grown on (default 1)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--eval", eval_paths, "evaluate these .tcm models on the held-out networks instead of training")
      ->expected(1, -1);
  app.add_option("--db", d.db_path, "record database with the dataset (opened read-only)");
  app.add_option("--data", d.data_path, "records file written by tune db export (tune-records/1; .gz for gzip)");
  app.add_option("--target", d.target,
                 "whose records: a target key, a target id, a family (llvm, cuda); default: the most records");
  app.add_option("--networks", d.networks,
                 "the dataset's networks: zoo names, model files, ONNX files or folders of them (comma-separated; "
                 "default data/networks)")
      ->delimiter(',');
  app.add_option("--holdout", d.holdout, "networks held out for testing, never trained on (comma-separated)")
      ->required()
      ->delimiter(',');
  app.add_option("--out", out_path, "the .tcm file to write");
  app.add_option("--seed", t.seed, "random seed (validation split, initialization, shuffles)");
  app.add_option("--epochs", t.max_epochs, "epochs (lstm, gnn) or boosting rounds (xgb); 0: the model's default")
      ->check(CLI::Range(0, 100000));
  app.add_option("--patience", t.patience,
                 "stop after this many epochs (xgb: blocks of 5 rounds) without a better validation score")
      ->check(CLI::Range(0, 100000));
  app.add_option("--lr", t.learning_rate, "learning rate; 0: the model's default")->check(CLI::Range(0.0, 10.0));
  app.add_option("--loss", t.loss,
                 "ranking loss: pairwise (RankNet / rank:pairwise) or lambdarank (pairs weighted by their "
                 "|delta NDCG|; xgb: rank:ndcg); xgb and ensemble also regression (reg:squarederror on the "
                 "per-task normalised throughput)")
      ->check(CLI::IsMember({"pairwise", "lambdarank", "regression"}));
  app.add_option("--hidden", t.hidden, "hidden width (lstm, gnn); 0: the model's default")->check(CLI::Range(0, 65536));
  app.add_option("--threads", t.threads, "threads for featurizing and training (default: all cores)")
      ->check(CLI::Range(1, 256));
  app.add_option("--minibatch-parts", t.minibatch_parts,
                 "lstm, gnn: parts a minibatch's gradient is computed in, summed in order (the threads run "
                 "them side by side; the model depends on the parts, not on the threads); 0: " +
                     std::to_string(costmodel::kDefaultMinibatchParts))
      ->check(CLI::Range(0, 64));
  app.add_option("--max-per-task", d.max_per_task, "at most this many records per task (0: all)")
      ->check(CLI::Range(0, 100000000));
  app.add_option("--valid-share", d.valid_share, "share of the training tasks kept for early stopping")
      ->check(CLI::Range(0.0, 0.9))
      ->capture_default_str();
  app.add_flag("--markdown", markdown, "with --eval: print the table as Markdown");
  if (auto code = ParseCommandLine(app, argc - 1, argv + 1)) return *code;
  d.seed = t.seed;
  d.threads = t.threads;
  if (d.db_path.empty() == d.data_path.empty()) {
    return base::Fail("tune", base::kExitUsage, "give the records as exactly one of --db or --data");
  }
  auto networks = NetworksOrDefault(d.networks);
  if (!networks.ok()) return base::Fail("tune", base::kExitUsage, std::string(networks.status().message()));
  d.networks = *networks;

  if (!eval_paths.empty()) {
    if (!model_kind.empty() || !out_path.empty()) {
      return base::Fail("tune", base::kExitUsage, "--eval takes no --model or --out (it trains nothing)");
    }
    return Evaluate(eval_paths, d, markdown);
  }
  if (markdown) return base::Fail("tune", base::kExitUsage, "--markdown is for --eval");
  if (model_kind.empty()) return base::Fail("tune", base::kExitUsage, "--model is required (xgb, lstm, gnn or ensemble)");
  const bool ensemble = model_kind == "ensemble";
  if (!ensemble && (!member_paths.empty() || members_opt->count() > 0 || !t.member_losses.empty() || splits_opt->count() > 0)) {
    return base::Fail("tune", base::kExitUsage, "--members, --member, --member-loss and --member-splits are for --model ensemble");
  }
  if (t.loss == "regression" && model_kind != "xgb" && !ensemble) {
    return base::Fail("tune", base::kExitUsage, "--loss regression is for xgb models (and ensembles of them)");
  }
  if (members_opt->count() == 0) t.members = member_paths.empty() ? 5 : 0;
  if (out_path.empty()) return base::Fail("tune", base::kExitUsage, "--out MODEL.tcm is required");
  {
    std::error_code ec;
    const std::filesystem::path parent = std::filesystem::path(out_path).parent_path();
    if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
      return base::Fail("tune", base::kExitUsage, "--out: no folder " + parent.string());
    }
    if (std::filesystem::is_directory(out_path, ec)) {
      return base::Fail("tune", base::kExitUsage, "--out: " + out_path + " is a folder");
    }
  }
  auto created = costmodel::CreateOfflineModel(model_kind);
  if (!created.ok()) return base::Fail("tune", base::kExitUsage, std::string(created.status().message()));
  std::unique_ptr<costmodel::OfflineModel> model = *std::move(created);
  if (model == nullptr) {
    return base::Fail("tune", base::kExitUsage, "the " + model_kind + " cost model is not available in this build yet");
  }
  // Members given as files: read (and refused with one line) before any data is loaded.
  std::vector<std::string> member_families;
  if (ensemble) {
    auto* e = static_cast<costmodel::EnsembleModel*>(model.get());
    for (const std::string& path : member_paths) {
      auto a = costmodel::ReadArtifactFile(path);
      if (!a.ok()) return base::Fail("tune", base::kExitUsage, std::string(a.status().message()));
      costmodel::EnsembleMemberInfo info;
      info.source = path;
      info.feature_version = a->info.feature_version;
      info.graph_feature_version = a->info.graph_feature_version;
      const auto opts = nlohmann::json::parse(a->info.options_json, nullptr, false);
      if (opts.is_object()) {
        info.seed = opts.value("seed", uint64_t{0});
        info.loss = opts.value("loss", std::string("pairwise"));
      }
      if (absl::Status st = e->AddMember(std::move(a->model), info); !st.ok()) {
        return base::Fail("tune", base::kExitUsage, path + ": " + std::string(st.message()));
      }
      member_families.push_back(a->info.target_family);
    }
  }
  d.needs = model->needs();

  const auto start = std::chrono::steady_clock::now();
  LiveLine line;
  auto data = LoadTrainingData(d, LoadProgress(&line, start));
  line.Finish();
  if (!data.ok()) return base::Fail("tune", data.status());
  std::fprintf(stderr, "tune: %s; loaded in %s\n", DataLine(*data).c_str(),
               FormatSeconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()).c_str());
  PrintSkipReasons(*data);
  for (size_t i = 0; i < member_families.size(); ++i) {
    if (member_families[i] != data->target_family) {
      return base::Fail("tune", base::kExitUsage,
                        absl::StrCat(member_paths[i], " is a ", member_families[i], " model; the records are of ",
                                     data->target_key));
    }
  }

  const auto train_start = std::chrono::steady_clock::now();
  t.progress = [&line](const costmodel::TrainProgress& p) {
    const double eta = p.epoch > 0 ? p.elapsed_s / p.epoch * (p.max_epochs - p.epoch) : 0;
    char buf[320];
    const std::string member = p.members > 0 ? absl::StrCat("member ", p.member, "/", p.members, " ") : "";
    std::snprintf(buf, sizeof(buf),
                  "%s[%d/%d] train loss %.4f  valid %.4f  best %.4f (%d)  elapsed %s  ETA <= %s", member.c_str(), p.epoch,
                  p.max_epochs, p.train_loss, p.valid_score, p.best_valid_score, p.best_epoch,
                  FormatSeconds(p.elapsed_s).c_str(), FormatSeconds(eta).c_str());
    line.Show(buf, /*end=*/true);
  };
  absl::Status trained = model->Train(data->train, data->valid, t);
  line.Finish();
  if (!trained.ok()) return base::Fail("tune", trained);
  const double train_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - train_start).count();

  const std::vector<MetricRow> rows = HeldOutRows(*model, *data);
  const costmodel::EvalMetrics valid = costmodel::EvaluateGroups(*model, data->valid);
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double rss = PeakRssMiB();

  nlohmann::json metrics;
  metrics["valid"] = EvalJson(valid);
  // Ensemble members that early-stop on their own draws of validation tasks trained on most of
  // `valid`'s tasks: its scores are then in-sample, not an estimate for unseen tasks.
  const bool valid_in_sample = ensemble && t.member_splits && t.members != 0;
  if (valid_in_sample) metrics["valid_in_sample"] = true;
  nlohmann::json per_network = nlohmann::json::object();
  for (size_t i = 0; i + 1 < rows.size(); ++i) per_network[rows[i].name] = RowJson(rows[i]);
  metrics["test"] = {{"networks", per_network}, {"overall", RowJson(rows.back())}};
  std::vector<std::vector<std::string>> ensemble_table;
  if (ensemble) {
    metrics["ensemble"] =
        EnsembleReport(*static_cast<costmodel::EnsembleModel*>(model.get()), *data, rows, &ensemble_table);
  }
  metrics["train_seconds"] = train_s;
  metrics["total_seconds"] = total_s;
  metrics["peak_rss_mib"] = rss;
  nlohmann::json options = {{"model", model_kind},       {"seed", t.seed},
                            {"epochs", t.max_epochs},     {"patience", t.patience},
                            {"learning_rate", t.learning_rate}, {"hidden", t.hidden},
                            {"loss", t.loss.empty() ? "pairwise" : t.loss},
                            {"threads", t.threads},       {"max_per_task", d.max_per_task},
                            {"valid_share", d.valid_share}, {"command", JoinArgs(argc, argv)}};
  if (t.subsample > 0) options["subsample"] = t.subsample;
  if (t.colsample > 0) options["colsample"] = t.colsample;
  if (model_kind == "lstm" || model_kind == "gnn")  // the value used, the default included
    options["minibatch_parts"] = t.MinibatchParts();
  if (ensemble) {
    options["members"] = t.members;
    options["member_files"] = member_paths;
    options["member_losses"] = t.member_losses;
    options["member_splits"] = t.member_splits;
  }
  costmodel::ArtifactInfo info;
  info.kind = model->kind();
  info.feature_version = costmodel::kFeatureVersion;
  info.template_versions = data->template_versions;
  info.target_family = data->target_family;
  info.target_key = data->target_key;
  info.summary_json = data->summary_json;
  info.metrics_json = metrics.dump();
  info.options_json = options.dump();
  if (absl::Status st = costmodel::WriteArtifactFile(out_path, info, *model); !st.ok()) return base::Fail("tune", st);

  std::printf("held-out metrics of the %s model (validation%s objective %.3f, pairwise %.3f, top-1 %.3f):\n",
              model->kind().c_str(), valid_in_sample ? ", in-sample: the members trained on most of its tasks," : "",
              costmodel::ValidationObjective(valid), valid.pairwise, valid.top1);
  PrintMetricTable({model->kind()}, {rows}, /*markdown=*/false);
  if (ensemble) {
    std::printf("held-out overall of each member and of the ensemble normalised otherwise:\n");
    base::PrintTable({"model", "top-1", "top-5", "pairwise", "kendall"}, ensemble_table);
  }
  std::printf("training %s (load + train + evaluate %s), peak RSS %.0f MiB\n", FormatSeconds(train_s).c_str(),
              FormatSeconds(total_s).c_str(), rss);
  std::printf("model written to %s\n", out_path.c_str());
  return 0;
}

}  // namespace tune::tuner
