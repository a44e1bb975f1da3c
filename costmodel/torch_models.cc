// The LSTM (program sequence) and GNN (program graph) cost models in LibTorch, trained with a pairwise ranking loss per task.
//
// Both models score one lowered kernel from its ProgramGraph (program_graph.h):
//  * lstm: the rows of ProgramGraph::sequence (loops and statements in program order),
//    normalized per feature, a linear embedding + ReLU, a one-layer LSTM (lstm_layer.h), the last and the mean
//    hidden state concatenated, an MLP -> score.
//  * gnn: every node's row normalized and embedded, kGnnRounds rounds of message passing over
//    the typed edges in both directions (a linear map per edge kind and direction, mean over
//    the incoming messages of a kind, residual ReLU update), mean and max pooling over the
//    nodes, an MLP -> score. A minibatch is one big graph: nodes concatenated, edges offset.
// Training (TrainOptions::loss "lambdarank": each pair weighted by its |delta NDCG| under the
// current scores, LambdaRank-style; otherwise plain RankNet): RankNet's pairwise logistic loss (TrainProgress::train_loss: its mean over the
// pairs of a chunk, chunks weighted equally, averaged over the epoch's minibatches [nats]) over the pairs of configs of one task (a chunk
// of at most kChunk configs of one group) whose latencies differ, failed configs (+inf)
// ranked below every ok one; Adam on minibatches of chunks, validation after every epoch
// (ValidationObjective), early stopping keeping the best parameters. Deterministic for a seed
// and a number of minibatch parts, whatever the thread count.
#ifdef TUNE_WITH_TORCH
#include <torch/torch.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>

#include "costmodel/lstm_layer.h"
#include "costmodel/offline_model.h"

namespace tune::costmodel {
namespace {

constexpr int kPayloadVersion = 1;
constexpr char kPayloadMagic[] = "tune-torch-model";
constexpr int kGnnRounds = 3;
constexpr int kChunk = 64;           // configs of one group per loss chunk
constexpr int kBatchConfigs = 256;   // configs per minibatch (whole chunks)
constexpr int kScoreBatch = 1024;    // configs per forward pass when scoring
constexpr int kMaxWorkers = 16;      // threads of a training (parts and Score's passes)
constexpr int kDefaultLstmHidden = 64;
constexpr int kDefaultGnnHidden = 32;  // its cost grows with hidden^2 per node and round (4x the LSTM's per row)
constexpr int kDefaultEpochs = 15;     // 100k GPU records, 2 threads: about 34 s an epoch (gnn), 23 s (lstm)
constexpr int kDefaultPatience = 4;
constexpr double kDefaultLr = 2e-3;
constexpr int kDefaultFineTuneEpochs = 8;
constexpr double kDefaultFineTuneLr = 1e-3;
constexpr int kFineTuneChunk = 16;   // fine-tuning: small chunks, one per step (more steps on one task)

/// Per-feature mean and standard deviation of the training rows; rows are fed as (x - mean) / std.
struct Normalizer {
  std::vector<float> mean = std::vector<float>(kNodeFeatures, 0.0f);
  std::vector<float> inv_std = std::vector<float>(kNodeFeatures, 1.0f);

  void Apply(const float* row, float* out) const {
    for (int f = 0; f < kNodeFeatures; ++f) out[f] = (row[f] - mean[f]) * inv_std[f];
  }
};

/// The threads a training uses: LibTorch's intra-op threads and the BLAS library's stay at one
/// (these models' operations are a few MFLOP each: OpenMP and OpenBLAS workers spin between
/// them, and 2 intra-op threads trained no faster than one on a 2-core machine); instead the
/// parts of each minibatch (RunEpoch) and Score's forward passes run side by side on up to
/// `threads` threads of our own. Returns that count.
int SetThreads(int threads) {
  at::set_num_threads(1);
  using SetBlasThreads = void (*)(int);
  if (auto* set_blas = reinterpret_cast<SetBlasThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set_blas(1);
  return std::clamp(threads, 1, kMaxWorkers);
}

/// Runs work(0) .. work(n - 1), work(0) on the calling thread and the others on threads of their
/// own; rethrows the first exception (by part) once all have ended.
void RunParts(int n, const std::function<void(int)>& work) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  auto guarded = [&](int i) {
    try {
      work(i);
    } catch (...) {
      errors[static_cast<size_t>(i)] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < n; ++i) threads.emplace_back(guarded, i);
  guarded(0);
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

/// A graph to feed: an empty ModelInput graph reads as one all-zero statement.
const ProgramGraph& GraphOf(const ModelInput* in) {
  static const ProgramGraph kEmpty = [] {
    ProgramGraph g;
    g.num_nodes = 1;
    g.kinds = {NodeKind::kStatement};
    g.features.assign(kNodeFeatures, 0.0f);
    g.sequence = {0};
    return g;
  }();
  return in->graph.num_nodes > 0 && !in->graph.sequence.empty() ? in->graph : kEmpty;
}

/// The network behind a model kind: parameters plus a batched forward pass.
struct ScoringNet : torch::nn::Module {
  /// One score per input, shape [inputs.size()].
  virtual torch::Tensor Forward(const std::vector<const ModelInput*>& inputs, const Normalizer& norm) = 0;
  /// Which node rows the normalization is fitted on: the sequence only, or every node.
  virtual bool SequenceOnly() const = 0;
};

torch::nn::Sequential MakeHead(int in, int hidden) {
  return torch::nn::Sequential(torch::nn::Linear(in, hidden), torch::nn::ReLU(), torch::nn::Linear(hidden, 1));
}

struct LstmNet : ScoringNet {
  explicit LstmNet(int hidden)
      : hidden_(hidden),
        embed(register_module("embed", torch::nn::Linear(kNodeFeatures, hidden))),
        lstm(register_module("lstm", torch::nn::LSTM(torch::nn::LSTMOptions(hidden, hidden).batch_first(true)))),
        head(register_module("head", MakeHead(2 * hidden, hidden))) {}

  bool SequenceOnly() const override { return true; }

  /// The batch sorted longest first, its rows packed step by step (lstm_layer.h) and run
  /// through LstmLastAndMean with the torch::nn::LSTM's own parameters (so artifacts of the
  /// padded torch::nn::LSTM forward load and score the same).
  torch::Tensor Forward(const std::vector<const ModelInput*>& inputs, const Normalizer& norm) override {
    const int64_t b = static_cast<int64_t>(inputs.size());
    std::vector<int64_t> order(static_cast<size_t>(b)), lengths(static_cast<size_t>(b)), unsort(static_cast<size_t>(b));
    std::iota(order.begin(), order.end(), 0);
    auto length = [&](int64_t i) { return static_cast<int64_t>(GraphOf(inputs[i]).sequence.size()); };
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return length(x) > length(y); });
    for (int64_t r = 0; r < b; ++r) {
      lengths[r] = length(order[r]);
      unsort[order[r]] = r;
    }
    const std::vector<int64_t> offsets = PackedStepOffsets(lengths);
    std::vector<float> x(static_cast<size_t>(offsets.back() * kNodeFeatures));
    for (int64_t r = 0; r < b; ++r) {
      const ProgramGraph& g = GraphOf(inputs[order[r]]);
      for (int64_t s = 0; s < lengths[r]; ++s)
        norm.Apply(&g.features[static_cast<size_t>(g.sequence[s]) * kNodeFeatures], &x[(offsets[s] + r) * kNodeFeatures]);
    }
    auto e = torch::relu(embed(torch::from_blob(x.data(), {offsets.back(), kNodeFeatures}, torch::kFloat).clone()));
    auto xw = torch::addmm(Param("bias_ih_l0") + Param("bias_hh_l0"), e, Param("weight_ih_l0").t());
    auto pooled = LstmLastAndMean(xw, Param("weight_hh_l0"), lengths);  // [b, 2 * hidden], sorted
    auto unsort_t = torch::from_blob(unsort.data(), {b}, torch::kLong).clone();
    return head->forward(pooled.index_select(0, unsort_t)).squeeze(1);
  }

  /// The LSTM layer's parameter `name` (weight_ih_l0 [4h, h], weight_hh_l0, bias_ih_l0 [4h], bias_hh_l0).
  torch::Tensor Param(const char* name) const { return *lstm->named_parameters(false).find(name); }

  int hidden_;
  torch::nn::Linear embed;
  torch::nn::LSTM lstm;
  torch::nn::Sequential head;
};

struct GnnNet : ScoringNet {
  /// Per round one linear map gives, for every node, its message along each edge kind and
  /// direction (2 * kNumEdgeKinds blocks of `hidden`) and its self term (the last block).
  static constexpr int kBlocks = 2 * kNumEdgeKinds + 1;

  explicit GnnNet(int hidden)
      : hidden_(hidden),
        embed(register_module("embed", torch::nn::Linear(kNodeFeatures, hidden))),
        head(register_module("head", MakeHead(2 * hidden, hidden))) {
    for (int r = 0; r < kGnnRounds; ++r)
      rounds.push_back(register_module("round" + std::to_string(r), torch::nn::Linear(hidden, kBlocks * hidden)));
  }

  bool SequenceOnly() const override { return false; }

  torch::Tensor Forward(const std::vector<const ModelInput*>& inputs, const Normalizer& norm) override {
    const int64_t b = static_cast<int64_t>(inputs.size());
    int64_t n = 0, max_nodes = 1;
    for (const ModelInput* in : inputs) {
      n += GraphOf(in).num_nodes;
      max_nodes = std::max<int64_t>(max_nodes, GraphOf(in).num_nodes);
    }
    std::vector<float> x(static_cast<size_t>(n * kNodeFeatures)), inv_count(static_cast<size_t>(b));
    std::vector<int64_t> graph_of(static_cast<size_t>(n)), dense_pos(static_cast<size_t>(n));
    // Messages: row (node * kBlocks + block) of the round's output goes to `target`, scaled by
    // 1 / (the target's count of incoming edges of that kind and direction): a mean per kind.
    std::vector<int64_t> source_row, target;
    std::vector<int32_t> slot;  // index into `degree` of each message
    std::vector<float> degree(static_cast<size_t>(n * 2 * kNumEdgeKinds), 0.0f);
    int64_t offset = 0;
    for (int64_t i = 0; i < b; ++i) {
      const ProgramGraph& g = GraphOf(inputs[i]);
      for (int v = 0; v < g.num_nodes; ++v) {
        norm.Apply(&g.features[static_cast<size_t>(v) * kNodeFeatures], &x[(offset + v) * kNodeFeatures]);
        graph_of[offset + v] = i;
        dense_pos[offset + v] = i * max_nodes + v;
      }
      for (size_t e = 0; e < g.edge_kinds.size(); ++e) {
        const int k = static_cast<int>(g.edge_kinds[e]);
        const int64_t s = offset + g.edge_src[e], d = offset + g.edge_dst[e];
        for (int dir = 0; dir < 2; ++dir) {
          const int64_t from = dir == 0 ? s : d, to = dir == 0 ? d : s;
          const int block = 2 * k + dir;
          source_row.push_back(from * kBlocks + block);
          target.push_back(to);
          slot.push_back(static_cast<int32_t>(to * 2 * kNumEdgeKinds + block));
          degree[to * 2 * kNumEdgeKinds + block] += 1;
        }
      }
      inv_count[i] = 1.0f / static_cast<float>(g.num_nodes);
      offset += g.num_nodes;
    }
    std::vector<float> scale(slot.size());
    for (size_t m = 0; m < slot.size(); ++m) scale[m] = 1.0f / degree[slot[m]];
    auto long_tensor = [](std::vector<int64_t>& v) {
      return torch::from_blob(v.data(), {static_cast<int64_t>(v.size())}, torch::kLong).clone();
    };
    auto h = torch::relu(embed(torch::from_blob(x.data(), {n, kNodeFeatures}, torch::kFloat).clone()));
    const bool any_edge = !source_row.empty();
    torch::Tensor src_t, dst_t, scale_t;
    if (any_edge) {
      src_t = long_tensor(source_row);
      dst_t = long_tensor(target);
      scale_t = torch::from_blob(scale.data(), {static_cast<int64_t>(scale.size()), 1}, torch::kFloat).clone();
    }
    for (int r = 0; r < kGnnRounds; ++r) {
      auto all = rounds[r](h);  // [n, kBlocks * hidden]
      auto m = all.narrow(1, (kBlocks - 1) * hidden_, hidden_);
      if (any_edge) {
        auto rows = all.view({n * kBlocks, hidden_});
        m = m + torch::zeros({n, hidden_}).index_add(0, dst_t, rows.index_select(0, src_t) * scale_t);
      }
      h = h + torch::relu(m);
    }
    auto graph_index = long_tensor(graph_of);
    auto mean = torch::zeros({b, hidden_}).index_add(0, graph_index, h) *
                torch::from_blob(inv_count.data(), {b, 1}, torch::kFloat).clone();
    auto dense = torch::full({b * max_nodes, hidden_}, -1e9f).index_copy(0, long_tensor(dense_pos), h);
    auto max = std::get<0>(dense.view({b, max_nodes, hidden_}).max(1));
    return head->forward(torch::cat({mean, max}, 1)).squeeze(1);
  }

  int hidden_;
  torch::nn::Linear embed;
  torch::nn::Sequential head;
  std::vector<torch::nn::Linear> rounds;
};

/// One config to train on.
struct Item {
  const ModelInput* input;
  double latency;  // [s]; +inf for a failure
};

/// A loss unit: configs of one group.
using Chunk = std::vector<Item>;

bool HasDistinctLatencies(const TrainGroup& g) {
  if (g.inputs.size() < 2 || g.inputs.size() != g.latencies_s.size()) return false;
  for (size_t i = 1; i < g.latencies_s.size(); ++i)
    if (g.latencies_s[i] != g.latencies_s[0]) return true;
  return false;
}

double CleanLatency(double l) { return std::isnan(l) ? std::numeric_limits<double>::infinity() : l; }

/// Chunks of the groups' configs (each group's configs shuffled, cut into <= chunk_size pieces
/// with at least 2 configs), in shuffled order.
std::vector<Chunk> MakeChunks(const std::vector<const TrainGroup*>& groups, size_t chunk_size, std::mt19937_64& rng) {
  std::vector<Chunk> chunks;
  for (const TrainGroup* g : groups) {
    std::vector<size_t> order(g->inputs.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const size_t pieces = (order.size() + chunk_size - 1) / chunk_size;
    const size_t per = (order.size() + pieces - 1) / pieces;
    for (size_t start = 0; start < order.size(); start += per) {
      Chunk c;
      for (size_t i = start; i < std::min(order.size(), start + per); ++i)
        c.push_back(Item{&g->inputs[order[i]], CleanLatency(g->latencies_s[order[i]])});
      if (c.size() >= 2) chunks.push_back(std::move(c));
    }
  }
  std::shuffle(chunks.begin(), chunks.end(), rng);
  return chunks;
}

/// The model class behind both kinds; `Kind` picks the network.
class TorchModel : public OfflineModel {
 public:
  explicit TorchModel(std::string kind) : kind_(std::move(kind)) {}

  std::string kind() const override { return kind_; }
  InputNeeds needs() const override { return InputNeeds{false, true}; }
  bool trained() const override { return trained_; }

  absl::Status Train(const std::vector<TrainGroup>& train, const std::vector<TrainGroup>& valid,
                     const TrainOptions& options) override {
    std::vector<const TrainGroup*> usable;
    for (const TrainGroup& g : train)
      if (HasDistinctLatencies(g)) usable.push_back(&g);
    if (usable.empty())
      return absl::InvalidArgumentError(kind_ + " training needs a group with two configs of different latency");
    const auto start = std::chrono::steady_clock::now();
    workers_ = SetThreads(options.threads);
    parts_ = options.MinibatchParts();
    std::mt19937_64 rng(options.seed);
    torch::manual_seed(options.seed);

    // Validation: the given groups, else every 10th group (shuffled) held back when there are
    // at least 5, else the training groups themselves.
    std::vector<const TrainGroup*> train_groups = usable, valid_groups;
    if (!valid.empty()) {
      for (const TrainGroup& g : valid) valid_groups.push_back(&g);
    } else if (usable.size() >= 5) {
      std::shuffle(train_groups.begin(), train_groups.end(), rng);
      const size_t held = std::max<size_t>(1, train_groups.size() / 10);
      valid_groups.assign(train_groups.end() - static_cast<std::ptrdiff_t>(held), train_groups.end());
      train_groups.resize(train_groups.size() - held);
    } else {
      valid_groups = train_groups;
    }

    const int hidden = options.hidden > 0 ? options.hidden : (kind_ == "lstm" ? kDefaultLstmHidden : kDefaultGnnHidden);
    auto net = MakeNet(hidden);
    Normalizer norm = FitNormalizer(train_groups, net->SequenceOnly());
    // Scores come from `net_`/`norm_` (EvaluateGroups calls Score): install them now.
    std::shared_ptr<ScoringNet> old_net = net_;
    Normalizer old_norm = norm_;
    const int old_hidden = hidden_;
    const bool old_trained = trained_;
    net_ = net;
    norm_ = norm;
    hidden_ = hidden;
    trained_ = true;

    std::vector<TrainGroup> valid_copy;
    const std::vector<TrainGroup>* valid_ref = &valid;
    if (valid.empty()) {
      for (const TrainGroup* g : valid_groups) valid_copy.push_back(*g);
      valid_ref = &valid_copy;
    }

    const int max_epochs = options.max_epochs > 0 ? options.max_epochs : kDefaultEpochs;
    const int patience = options.patience > 0 ? options.patience : kDefaultPatience;
    const double lr = options.learning_rate > 0 ? options.learning_rate : kDefaultLr;
    torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(lr));
    double best = -1;
    int best_epoch = 0;
    std::vector<torch::Tensor> best_params = Snapshot();
    for (int epoch = 1; epoch <= max_epochs; ++epoch) {
      const double loss = RunEpoch(train_groups, &adam, rng, kChunk, kBatchConfigs, options.loss == "lambdarank");
      if (!std::isfinite(loss)) break;  // diverged: keep the best epoch so far
      const double score = ValidationObjective(EvaluateGroups(*this, *valid_ref));
      if (score > best) {
        best = score;
        best_epoch = epoch;
        best_params = Snapshot();
      }
      if (options.progress) {
        TrainProgress p;
        p.epoch = epoch;
        p.max_epochs = max_epochs;
        p.train_loss = loss;
        p.valid_score = score;
        p.best_valid_score = best;
        p.best_epoch = best_epoch;
        p.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        options.progress(p);
      }
      if (epoch - best_epoch >= patience) break;
    }
    if (best_epoch == 0) {  // not one finite epoch
      net_ = old_net;
      norm_ = old_norm;
      hidden_ = old_hidden;
      trained_ = old_trained;
      return absl::InternalError(kind_ + " training diverged (non-finite loss in the first epoch)");
    }
    Restore(best_params);
    return absl::OkStatus();
  }

  absl::Status FineTune(const TrainGroup& group, const TrainOptions& options) override {
    if (!trained_) return absl::FailedPreconditionError(kind_ + " model is not trained: nothing to fine-tune");
    if (!HasDistinctLatencies(group)) return absl::OkStatus();  // nothing to learn from
    workers_ = SetThreads(options.threads);
    std::mt19937_64 rng(options.seed);
    const int epochs = options.fine_tune_epochs > 0 ? options.fine_tune_epochs : kDefaultFineTuneEpochs;
    const double lr = options.learning_rate > 0 ? options.learning_rate : kDefaultFineTuneLr;
    std::vector<torch::Tensor> before = Snapshot();
    torch::optim::Adam adam(net_->parameters(), torch::optim::AdamOptions(lr));
    for (int e = 0; e < epochs; ++e) {
      if (!std::isfinite(RunEpoch({&group}, &adam, rng, kFineTuneChunk, kFineTuneChunk))) {
        Restore(before);
        return absl::InternalError(kind_ + " fine-tuning diverged; parameters kept");
      }
    }
    return absl::OkStatus();
  }

  std::vector<double> Score(const std::vector<const ModelInput*>& inputs) const override {
    std::vector<double> out(inputs.size(), 0.0);
    if (!trained_ || inputs.empty()) return out;
    // Forward passes of up to kScoreBatch configs, spread over the training's threads.
    const size_t passes = (inputs.size() + kScoreBatch - 1) / kScoreBatch;
    const int parts = static_cast<int>(std::min<size_t>(passes, static_cast<size_t>(workers_)));
    RunParts(parts, [&](int part) {
      torch::NoGradGuard no_grad;  // per thread
      for (size_t pass = static_cast<size_t>(part); pass < passes; pass += static_cast<size_t>(parts)) {
        const size_t start = pass * kScoreBatch, end = std::min(inputs.size(), start + kScoreBatch);
        std::vector<const ModelInput*> batch(inputs.begin() + static_cast<std::ptrdiff_t>(start),
                                             inputs.begin() + static_cast<std::ptrdiff_t>(end));
        auto s = net_->Forward(batch, norm_).contiguous();
        const float* p = s.data_ptr<float>();
        for (size_t i = start; i < end; ++i) out[i] = p[i - start];
      }
    });
    return out;
  }

  absl::StatusOr<std::string> SavePayload() const override {
    if (!trained_) return absl::FailedPreconditionError(kind_ + " model is not trained: nothing to save");
    std::ostringstream os;
    os << kPayloadMagic << ' ' << kind_ << ' ' << kPayloadVersion << ' ' << kGraphFeatureVersion << ' '
       << kNodeFeatures << ' ' << hidden_ << '\n';
    auto put = [&os](const void* p, size_t bytes) { os.write(static_cast<const char*>(p), static_cast<std::streamsize>(bytes)); };
    put(norm_.mean.data(), sizeof(float) * kNodeFeatures);
    put(norm_.inv_std.data(), sizeof(float) * kNodeFeatures);
    auto params = net_->parameters();
    const int64_t count = static_cast<int64_t>(params.size());
    put(&count, sizeof(count));
    for (const auto& p : params) {
      auto t = p.detach().contiguous();
      const int64_t numel = t.numel();
      put(&numel, sizeof(numel));
      put(t.data_ptr<float>(), sizeof(float) * static_cast<size_t>(numel));
    }
    return os.str();
  }

  absl::Status LoadPayload(const std::string& payload) override {
    const size_t eol = payload.find('\n');
    if (eol == std::string::npos) return absl::InvalidArgumentError("not a " + kind_ + " model payload (no header)");
    std::istringstream header(payload.substr(0, eol));
    std::string magic, kind;
    int version = 0, graph_version = 0, features = 0, hidden = 0;
    header >> magic >> kind >> version >> graph_version >> features >> hidden;
    if (!header || magic != kPayloadMagic) return absl::InvalidArgumentError("not a " + kind_ + " model payload");
    if (kind != kind_)
      return absl::InvalidArgumentError("the payload holds a " + kind + " model, not " + kind_);
    if (version != kPayloadVersion || graph_version != kGraphFeatureVersion || features != kNodeFeatures)
      return absl::InvalidArgumentError(
          kind_ + " payload of version " + std::to_string(version) + " (graph features v" +
          std::to_string(graph_version) + ", " + std::to_string(features) + " per node); this build reads version " +
          std::to_string(kPayloadVersion) + " (v" + std::to_string(kGraphFeatureVersion) + ", " +
          std::to_string(kNodeFeatures) + ")");
    if (hidden < 1 || hidden > 4096) return absl::InvalidArgumentError(kind_ + " payload: bad hidden width");
    size_t pos = eol + 1;
    auto get = [&](void* p, size_t bytes) {
      if (payload.size() - pos < bytes) return false;
      std::memcpy(p, payload.data() + pos, bytes);
      pos += bytes;
      return true;
    };
    Normalizer norm;
    int64_t count = 0;
    if (!get(norm.mean.data(), sizeof(float) * kNodeFeatures) || !get(norm.inv_std.data(), sizeof(float) * kNodeFeatures) ||
        !get(&count, sizeof(count)))
      return absl::InvalidArgumentError(kind_ + " payload is truncated");
    auto net = MakeNet(hidden);
    auto params = net->parameters();
    if (count != static_cast<int64_t>(params.size()))
      return absl::InvalidArgumentError(kind_ + " payload has " + std::to_string(count) + " tensors, expected " +
                                        std::to_string(params.size()));
    torch::NoGradGuard no_grad;
    for (auto& p : params) {
      int64_t numel = 0;
      if (!get(&numel, sizeof(numel)) || numel != p.numel())
        return absl::InvalidArgumentError(kind_ + " payload: a tensor of the wrong size");
      std::vector<float> data(static_cast<size_t>(numel));
      if (!get(data.data(), sizeof(float) * data.size())) return absl::InvalidArgumentError(kind_ + " payload is truncated");
      p.copy_(torch::from_blob(data.data(), p.sizes(), torch::kFloat));
    }
    if (pos != payload.size()) return absl::InvalidArgumentError(kind_ + " payload has trailing bytes");
    net_ = net;
    norm_ = norm;
    hidden_ = hidden;
    trained_ = true;
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<ScoringNet> MakeNet(int hidden) const {
    if (kind_ == "lstm") return std::make_shared<LstmNet>(hidden);
    return std::make_shared<GnnNet>(hidden);
  }

  static Normalizer FitNormalizer(const std::vector<const TrainGroup*>& groups, bool sequence_only) {
    std::vector<double> sum(kNodeFeatures, 0.0), sq(kNodeFeatures, 0.0);
    double rows = 0;
    auto add = [&](const float* r) {
      for (int f = 0; f < kNodeFeatures; ++f) {
        sum[f] += r[f];
        sq[f] += static_cast<double>(r[f]) * r[f];
      }
      rows += 1;
    };
    for (const TrainGroup* g : groups) {
      for (const ModelInput& in : g->inputs) {
        const ProgramGraph& graph = GraphOf(&in);
        if (sequence_only) {
          for (int32_t v : graph.sequence) add(&graph.features[static_cast<size_t>(v) * kNodeFeatures]);
        } else {
          for (int v = 0; v < graph.num_nodes; ++v) add(&graph.features[static_cast<size_t>(v) * kNodeFeatures]);
        }
      }
    }
    Normalizer n;
    if (rows == 0) return n;
    for (int f = 0; f < kNodeFeatures; ++f) {
      const double mean = sum[f] / rows;
      const double var = std::max(0.0, sq[f] / rows - mean * mean);
      const double sd = std::sqrt(var);
      n.mean[f] = static_cast<float>(mean);
      n.inv_std[f] = sd > 1e-6 ? static_cast<float>(1.0 / sd) : 1.0f;
    }
    return n;
  }

  /// One pass over the groups' chunks; the mean loss per minibatch.
  /// With `lambdarank`, each pair of a chunk is weighted by |delta NDCG| of swapping it under
  /// the current scores (gain: the chunk's best latency / latency, 0 for a failure), the
  /// weights of a chunk normalized to the same total as RankNet's.
  /// A minibatch's chunks are split into `parts_` parts of about the same number of configs;
  /// the parts' losses and gradients are computed on up to that many threads and the gradients
  /// summed in part order before the step (the loss is a sum over chunks, so the parts'
  /// gradients add up to the whole minibatch's): the same model on any number of threads.
  double RunEpoch(const std::vector<const TrainGroup*>& groups, torch::optim::Adam* adam, std::mt19937_64& rng,
                  size_t chunk_size = kChunk, size_t batch_configs = kBatchConfigs, bool lambdarank = false) {
    std::vector<Chunk> chunks = MakeChunks(groups, chunk_size, rng);
    auto params = net_->parameters();
    double total = 0;
    int batches = 0;
    size_t c = 0;
    while (c < chunks.size()) {
      const size_t first = c;
      size_t configs = 0;
      int chunks_in_batch = 0;  // chunks with at least one pair
      while (c < chunks.size() && (configs == 0 || configs + chunks[c].size() <= batch_configs)) {
        configs += chunks[c].size();
        if (HasPair(chunks[c])) ++chunks_in_batch;
        ++c;
      }
      if (chunks_in_batch == 0) continue;
      // The parts: [bounds[i], bounds[i + 1]) of the chunks, cut where the configs so far
      // reach an equal share; a part may be empty. Their number does not depend on the
      // threads, so neither does the model.
      const int parts = std::min<int>(parts_, static_cast<int>(c - first));
      std::vector<size_t> bounds(static_cast<size_t>(parts) + 1, c);
      bounds[0] = first;
      size_t seen = 0;
      for (size_t k = first, cut = 1; k < c && cut < bounds.size() - 1; ++k) {
        seen += chunks[k].size();
        if (seen * static_cast<size_t>(parts) >= configs * cut) bounds[cut++] = k + 1;
      }
      std::vector<torch::Tensor> losses(static_cast<size_t>(parts));
      std::vector<std::vector<torch::Tensor>> grads(static_cast<size_t>(parts));
      const int threads = std::min(workers_, parts);
      RunParts(threads, [&](int t) {
        for (int i = t; i < parts; i += threads) {
          const auto k = static_cast<size_t>(i);
          losses[k] = PartLoss(chunks, bounds[k], bounds[k + 1], chunks_in_batch, lambdarank);
          if (losses[k].defined()) {
            grads[k] = torch::autograd::grad({losses[k]}, params, {}, /*retain_graph=*/false,
                                             /*create_graph=*/false, /*allow_unused=*/true);
          }
        }
      });
      double loss = 0;
      {
        torch::NoGradGuard no_grad;
        for (size_t p = 0; p < params.size(); ++p) {
          torch::Tensor sum;
          for (int i = 0; i < parts; ++i) {
            const auto& g = grads[static_cast<size_t>(i)];
            if (g.empty() || !g[p].defined()) continue;
            sum = sum.defined() ? sum + g[p] : g[p].clone();
          }
          params[p].mutable_grad() = sum.defined() ? sum : torch::zeros_like(params[p]);
        }
      }
      for (const torch::Tensor& l : losses) {
        if (l.defined()) loss += l.item<double>();
      }
      torch::nn::utils::clip_grad_norm_(params, 5.0);
      adam->step();
      total += loss;
      ++batches;
    }
    return batches ? total / batches : 0;
  }

  /// True when a chunk has two configs of different latency (a pair to learn from).
  static bool HasPair(const Chunk& chunk) {
    for (size_t i = 1; i < chunk.size(); ++i) {
      if (!(chunk[i].latency == chunk[0].latency)) return true;
    }
    return false;
  }

  /// The loss of the chunks [begin, end) of a minibatch whose chunks with pairs number
  /// `chunks_in_batch` (each such chunk's pair weights sum to 1 / chunks_in_batch, whatever its
  /// number of pairs); undefined when these chunks hold no pair.
  torch::Tensor PartLoss(const std::vector<Chunk>& chunks, size_t begin, size_t end, int chunks_in_batch,
                         bool lambdarank) const {
    std::vector<const ModelInput*> inputs;
    std::vector<int64_t> better, worse;
    std::vector<float> weight;
    std::vector<std::pair<size_t, size_t>> spans;    // [first weight, end) per chunk
    std::vector<std::pair<size_t, size_t>> configs;  // [first input, end) per chunk with pairs
    std::vector<double> gain;                        // per input: chunk best latency / latency
    for (size_t c = begin; c < end; ++c) {
      const Chunk& chunk = chunks[c];
      const int64_t base = static_cast<int64_t>(inputs.size());
      const size_t first = weight.size();
      double chunk_best = std::numeric_limits<double>::infinity();
      for (const Item& item : chunk) chunk_best = std::min(chunk_best, item.latency);
      for (const Item& item : chunk) {
        gain.push_back(std::isfinite(item.latency) && item.latency > 0 ? chunk_best / item.latency : 0.0);
      }
      for (size_t i = 0; i < chunk.size(); ++i) {
        inputs.push_back(chunk[i].input);
        for (size_t j = i + 1; j < chunk.size(); ++j) {
          const double a = chunk[i].latency, b = chunk[j].latency;
          if (a == b) continue;
          better.push_back(base + static_cast<int64_t>(a < b ? i : j));
          worse.push_back(base + static_cast<int64_t>(a < b ? j : i));
          weight.push_back(1.0f);
        }
      }
      if (weight.size() > first) {
        spans.emplace_back(first, weight.size());
        configs.emplace_back(static_cast<size_t>(base), inputs.size());
      }
    }
    if (weight.empty()) return torch::Tensor();
    auto scores = net_->Forward(inputs, norm_);
    if (lambdarank) LambdaWeights(scores, gain, better, worse, spans, configs, weight);
    // Every chunk weighs the same whatever its number of pairs.
    for (auto [first, stop] : spans) {
      double sum = 0;
      for (size_t i = first; i < stop; ++i) sum += weight[i];
      for (size_t i = first; i < stop; ++i) {
        weight[i] = sum > 0 ? static_cast<float>(weight[i] / (sum * chunks_in_batch))
                            : 1.0f / static_cast<float>((stop - first) * chunks_in_batch);
      }
    }
    auto bt = torch::from_blob(better.data(), {static_cast<int64_t>(better.size())}, torch::kLong).clone();
    auto wt = torch::from_blob(worse.data(), {static_cast<int64_t>(worse.size())}, torch::kLong).clone();
    auto w = torch::from_blob(weight.data(), {static_cast<int64_t>(weight.size())}, torch::kFloat).clone();
    auto diff = scores.index_select(0, bt) - scores.index_select(0, wt);
    return (torch::softplus(-diff) * w).sum();
  }

  /// LambdaRank's pair weights: for each chunk ([first, end) of `weight`, its configs
  /// [begin, stop) of the inputs), the configs are ranked by their current (detached) scores
  /// and each pair's weight becomes |gain_i - gain_j| * |1/log2(1 + rank_i) - 1/log2(1 + rank_j)|
  /// / IDCG of the chunk (0 when every gain is 0).
  static void LambdaWeights(const torch::Tensor& scores, const std::vector<double>& gain,
                            const std::vector<int64_t>& better, const std::vector<int64_t>& worse,
                            const std::vector<std::pair<size_t, size_t>>& spans,
                            const std::vector<std::pair<size_t, size_t>>& configs, std::vector<float>& weight) {
    auto detached = scores.detach().to(torch::kDouble).contiguous();
    const double* sc = detached.data_ptr<double>();
    std::vector<double> discount(gain.size(), 0.0);
    for (size_t k = 0; k < spans.size(); ++k) {
      const auto [begin, stop] = configs[k];
      std::vector<size_t> order(stop - begin);
      for (size_t i = 0; i < order.size(); ++i) order[i] = begin + i;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sc[a] > sc[b]; });
      for (size_t r = 0; r < order.size(); ++r) discount[order[r]] = 1.0 / std::log2(2.0 + static_cast<double>(r));
      std::vector<double> ideal(gain.begin() + begin, gain.begin() + stop);
      std::sort(ideal.rbegin(), ideal.rend());
      double idcg = 0;
      for (size_t r = 0; r < ideal.size(); ++r) idcg += ideal[r] / std::log2(2.0 + static_cast<double>(r));
      for (size_t p = spans[k].first; p < spans[k].second; ++p) {
        const size_t i = static_cast<size_t>(better[p]), j = static_cast<size_t>(worse[p]);
        weight[p] = idcg > 0 ? static_cast<float>(std::abs(gain[i] - gain[j]) * std::abs(discount[i] - discount[j]) / idcg)
                             : 0.0f;
      }
    }
  }

  std::vector<torch::Tensor> Snapshot() const {
    std::vector<torch::Tensor> out;
    for (const auto& p : net_->parameters()) out.push_back(p.detach().clone());
    return out;
  }

  void Restore(const std::vector<torch::Tensor>& saved) {
    torch::NoGradGuard no_grad;
    auto params = net_->parameters();
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(saved[i]);
  }

  std::string kind_;
  std::shared_ptr<ScoringNet> net_ = nullptr;
  Normalizer norm_;
  int hidden_ = 0;
  bool trained_ = false;
  int workers_ = 1;  // threads of a minibatch's parts and of Score (SetThreads)
  int parts_ = kDefaultMinibatchParts;  // parts of a minibatch (TrainOptions::minibatch_parts)
};

}  // namespace

}  // namespace tune::costmodel

/// The module's one entry point (dlsym'ed by CreateOfflineModel, costmodel/offline_model.cc):
/// a new model of `kind` ("lstm" or "gnn") owned by the caller, or null for another kind.
extern "C" __attribute__((visibility("default"))) tune::costmodel::OfflineModel* tune_torch_make_model(
    const char* kind) {
  const std::string k = kind ? kind : "";
  if (k != "lstm" && k != "gnn") return nullptr;
  return new tune::costmodel::TorchModel(k);
}
#endif
