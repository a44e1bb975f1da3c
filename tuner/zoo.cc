// Built-in model zoo: layer-by-layer shapes of ResNet-18/50, MobileNet-V2 and BERT-base.
#include "tuner/zoo.h"

#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tune::tuner {
namespace {

using codegen::OpKind;
using codegen::Workload;

// Collects a model's layers in network order, merging identical workloads (same Key()).
class ModelBuilder {
 public:
  ModelBuilder(std::string name, std::string description) {
    model_.name = std::move(name);
    model_.description = std::move(description);
  }

  /// A batch-1 NCHW conv2d with square kernel, stride and padding; `in` is the square input
  /// extent. Returns the output extent.
  int64_t Conv(const std::string& name, int64_t in_c, int64_t in, int64_t out_c, int64_t kernel,
               int64_t stride, int64_t pad, bool relu, int64_t groups = 1) {
    Workload w;
    w.op = OpKind::kConv2d;
    w.batch = 1;
    w.in_c = in_c;
    w.in_h = w.in_w = in;
    w.out_c = out_c;
    w.kernel_h = w.kernel_w = kernel;
    w.stride_h = w.stride_w = stride;
    w.pad_h = w.pad_w = pad;
    w.groups = groups;
    w.bias = true;  // every conv here is followed by batch norm, folded into a bias
    w.relu = relu;
    Add(name, w, 1);
    return w.out_h();
  }

  /// out[M,N] = data[M,K] * weight[N,K]^T + bias, optionally relu.
  void Dense(const std::string& name, int64_t m, int64_t n, int64_t k, bool relu, int count) {
    Matmul(name, OpKind::kDense, 1, m, n, k, /*bias=*/true, relu, count);
  }

  /// out[B,M,N] = a[B,M,K] * b[B,K,N], no epilogue.
  void BatchMatmul(const std::string& name, int64_t b, int64_t m, int64_t n, int64_t k, int count) {
    Matmul(name, OpKind::kBatchMatmul, b, m, n, k, /*bias=*/false, /*relu=*/false, count);
  }

  ZooModel Finish() { return std::move(model_); }

 private:
  // A matrix product of `op` (dense, batch_matmul) with `batch` x [m, n, k].
  void Matmul(const std::string& name, OpKind op, int64_t batch, int64_t m, int64_t n, int64_t k, bool bias,
              bool relu, int count) {
    Workload w;
    w.op = op;
    w.batch = batch;
    w.m = m;
    w.n = n;
    w.k = k;
    w.bias = bias;
    w.relu = relu;
    Add(name, w, count);
  }

  void Add(const std::string& name, const Workload& w, int count) {
    auto [it, inserted] = index_.emplace(w.Key(), model_.layers.size());
    if (inserted) {
      model_.layers.push_back({name, w, count});
    } else {
      model_.layers[it->second].count += count;
    }
  }

  ZooModel model_;
  std::map<std::string, size_t> index_;  // Key() -> position in model_.layers
};

// torchvision resnet stem: conv 7x7/2 (3 -> 64) + bn + relu, then a 3x3/2 max pool.
// Returns the spatial extent after the pool (56 for 224).
int64_t ResNetStem(ModelBuilder& b) {
  const int64_t after_conv = b.Conv("conv1", 3, 224, 64, 7, 2, 3, /*relu=*/true);  // 112
  return (after_conv + 2 * 1 - 3) / 2 + 1;                                         // 56
}

// Where one residual block of a ResNet stage sits: its layer-name prefix ("layer2.0."), input
// channels and extent, stage width and stride (2 on the first block of stages 2-4).
struct ResNetBlock {
  std::string prefix;
  int64_t in_c, extent, width, stride;
};
// Adds a block's convs (the downsample aside) and returns its output extent.
using BlockFn = int64_t (*)(ModelBuilder&, const ResNetBlock&);

// The stem and the four stages of widths 64..512 with `blocks[s]` blocks each, whose outputs
// have `expansion` times the width in channels; a 1x1 downsample conv (bias, no relu) follows
// the block wherever its stride or channels change.
void ResNetBody(ModelBuilder& b, const int (&blocks)[4], int64_t expansion, BlockFn block) {
  int64_t extent = ResNetStem(b);
  int64_t in_c = 64;
  const int64_t widths[] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t width = widths[stage];
    const int64_t out_c = width * expansion;
    for (int i = 0; i < blocks[stage]; ++i) {
      const ResNetBlock at{absl::StrCat("layer", stage + 1, ".", i, "."), in_c, extent, width,
                           (stage > 0 && i == 0) ? 2 : 1};
      const int64_t out = block(b, at);
      if (at.stride != 1 || in_c != out_c) {
        b.Conv(at.prefix + "downsample", in_c, extent, out_c, 1, at.stride, 0, /*relu=*/false);
      }
      in_c = out_c;
      extent = out;
    }
  }
}

// ResNet-18/34 basic block: two 3x3 convs, the second (before the residual add) without relu.
int64_t BasicBlock(ModelBuilder& b, const ResNetBlock& at) {
  const int64_t out = b.Conv(at.prefix + "conv1", at.in_c, at.extent, at.width, 3, at.stride, 1, true);
  b.Conv(at.prefix + "conv2", at.width, out, at.width, 3, 1, 1, /*relu=*/false);
  return out;
}

// ResNet-50 v1.5 bottleneck: 1x1 reduce, 3x3 with the stride, 1x1 expand to 4x the width
// (before the residual add, without relu).
int64_t Bottleneck(ModelBuilder& b, const ResNetBlock& at) {
  b.Conv(at.prefix + "conv1", at.in_c, at.extent, at.width, 1, 1, 0, true);
  const int64_t out = b.Conv(at.prefix + "conv2", at.width, at.extent, at.width, 3, at.stride, 1, true);
  b.Conv(at.prefix + "conv3", at.width, out, at.width * 4, 1, 1, 0, /*relu=*/false);
  return out;
}

// A torchvision ResNet at 224x224: the stem, the stages of `blocks` and the classifier on the
// last stage's 512 * expansion channels. `title` names the network; `linear_conv` says which
// conv of a block precedes the residual add (and so has no relu).
ZooModel ResNet(std::string name, const std::string& title, const std::string& linear_conv, const int (&blocks)[4],
                int64_t expansion, BlockFn block) {
  ModelBuilder b(std::move(name),
                 absl::StrCat(title, ", 224x224, batch 1, fp32. Batch norm folded into conv bias; ", linear_conv,
                              " (before the residual add) and the 1x1 downsample convs have bias without relu. "
                              "Pooling and adds omitted."));
  ResNetBody(b, blocks, expansion, block);
  b.Dense("fc", 1, 1000, 512 * expansion, /*relu=*/false, 1);
  return b.Finish();
}

ZooModel ResNet18() {
  return ResNet("resnet-18", "ResNet-18 (torchvision)", "the second conv of each basic block", {2, 2, 2, 2},
                /*expansion=*/1, &BasicBlock);
}

ZooModel ResNet50() {
  return ResNet("resnet-50", "ResNet-50 v1.5 (torchvision: stride on the 3x3 conv of the bottleneck)",
                "the last 1x1 conv of each bottleneck", {3, 4, 6, 3}, /*expansion=*/4, &Bottleneck);
}

ZooModel MobileNetV2() {
  ModelBuilder b("mobilenet-v2",
                 "MobileNet-V2 1.0 (torchvision), 224x224, batch 1, fp32. Batch norm folded "
                 "into conv bias; relu6 approximated as relu. Depthwise convs are grouped convs "
                 "with groups == channels; the 1x1 projection convs (linear bottlenecks) have no "
                 "relu. Includes the final 1x1 conv to 1280 channels and the classifier dense; "
                 "pooling, dropout and residual adds omitted.");
  int64_t extent = b.Conv("features.0", 3, 224, 32, 3, 2, 1, true);  // 112
  int64_t in_c = 32;
  // (expand ratio t, output channels c, repeats n, first stride s), as in the paper.
  const int settings[][4] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                             {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int feature = 1;
  for (const auto& [t, c, n, s] : settings) {
    for (int i = 0; i < n; ++i, ++feature) {
      const std::string prefix = absl::StrCat("features.", feature, ".");
      const int64_t stride = i == 0 ? s : 1;
      const int64_t hidden = in_c * t;
      if (t != 1) b.Conv(prefix + "expand", in_c, extent, hidden, 1, 1, 0, true);
      const int64_t out =
          b.Conv(prefix + "depthwise", hidden, extent, hidden, 3, stride, 1, true, hidden);
      b.Conv(prefix + "project", hidden, out, c, 1, 1, 0, /*relu=*/false);
      in_c = c;
      extent = out;
    }
  }
  b.Conv(absl::StrCat("features.", feature), in_c, extent, 1280, 1, 1, 0, true);
  b.Dense("classifier", 1, 1000, 1280, /*relu=*/false, 1);
  return b.Finish();
}

ZooModel BertBase() {
  ModelBuilder b("bert-base",
                 "BERT-base encoder (12 layers, hidden 768, 12 heads of 64, FFN 3072), "
                 "sequence length 128, batch 1, fp32. GELU approximated as relu. Q, K, V and "
                 "attention-output projections are separate dense layers; the attention "
                 "score and context products are per-head batch_matmuls. Embeddings, softmax, "
                 "scaling, layer norm, residual adds and the pooler omitted.");
  constexpr int kLayers = 12;
  constexpr int64_t kSeq = 128, kHidden = 768, kHeads = 12, kHeadDim = 64, kFfn = 3072;
  b.Dense("encoder.attention.query", kSeq, kHidden, kHidden, false, kLayers);
  b.Dense("encoder.attention.key", kSeq, kHidden, kHidden, false, kLayers);
  b.Dense("encoder.attention.value", kSeq, kHidden, kHidden, false, kLayers);
  // scores[h] = Q[h] (128x64) * K[h]^T (64x128); context[h] = P[h] (128x128) * V[h] (128x64).
  b.BatchMatmul("encoder.attention.scores", kHeads, kSeq, kSeq, kHeadDim, kLayers);
  b.BatchMatmul("encoder.attention.context", kHeads, kSeq, kHeadDim, kSeq, kLayers);
  b.Dense("encoder.attention.output", kSeq, kHidden, kHidden, false, kLayers);
  b.Dense("encoder.intermediate", kSeq, kFfn, kHidden, /*relu=*/true, kLayers);
  b.Dense("encoder.output", kSeq, kHidden, kFfn, false, kLayers);
  return b.Finish();
}

using ModelFn = ZooModel (*)();
const std::vector<std::pair<std::string, ModelFn>>& Registry() {
  static const auto* registry = new std::vector<std::pair<std::string, ModelFn>>{
      {"resnet-18", &ResNet18},
      {"resnet-50", &ResNet50},
      {"mobilenet-v2", &MobileNetV2},
      {"bert-base", &BertBase},
  };
  return *registry;
}

}  // namespace

absl::StatusOr<ZooModel> GetZooModel(const std::string& name) {
  for (const auto& [model_name, fn] : Registry()) {
    if (model_name == name) return fn();
  }
  return absl::NotFoundError(absl::StrCat(
      "unknown model '", name, "'; built-in models: ", absl::StrJoin(ZooModelNames(), ", ")));
}

std::vector<std::string> ZooModelNames() {
  std::vector<std::string> names;
  for (const auto& [model_name, fn] : Registry()) names.push_back(model_name);
  return names;
}

}  // namespace tune::tuner
