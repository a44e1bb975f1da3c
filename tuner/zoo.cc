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
    Workload w;
    w.op = OpKind::kDense;
    w.m = m;
    w.n = n;
    w.k = k;
    w.bias = true;
    w.relu = relu;
    Add(name, w, count);
  }

  /// out[B,M,N] = a[B,M,K] * b[B,K,N], no epilogue.
  void BatchMatmul(const std::string& name, int64_t b, int64_t m, int64_t n, int64_t k, int count) {
    Workload w;
    w.op = OpKind::kBatchMatmul;
    w.batch = b;
    w.m = m;
    w.n = n;
    w.k = k;
    Add(name, w, count);
  }

  ZooModel Finish() { return std::move(model_); }

 private:
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

ZooModel ResNet18() {
  ModelBuilder b("resnet-18",
                 "ResNet-18 (torchvision), 224x224, batch 1, fp32. Batch norm folded into "
                 "conv bias; the second conv of each basic block (before the residual add) and "
                 "the 1x1 downsample convs have bias without relu. Pooling and adds omitted.");
  int64_t extent = ResNetStem(b);
  int64_t in_c = 64;
  const int64_t widths[] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t width = widths[stage];
    for (int block = 0; block < 2; ++block) {
      const std::string prefix = absl::StrCat("layer", stage + 1, ".", block, ".");
      const int64_t stride = (stage > 0 && block == 0) ? 2 : 1;
      const int64_t out = b.Conv(prefix + "conv1", in_c, extent, width, 3, stride, 1, true);
      b.Conv(prefix + "conv2", width, out, width, 3, 1, 1, /*relu=*/false);
      if (stride != 1 || in_c != width) {
        b.Conv(prefix + "downsample", in_c, extent, width, 1, stride, 0, /*relu=*/false);
      }
      in_c = width;
      extent = out;
    }
  }
  b.Dense("fc", 1, 1000, 512, /*relu=*/false, 1);
  return b.Finish();
}

ZooModel ResNet50() {
  ModelBuilder b("resnet-50",
                 "ResNet-50 v1.5 (torchvision: stride on the 3x3 conv of the bottleneck), "
                 "224x224, batch 1, fp32. Batch norm folded into conv bias; the last 1x1 conv "
                 "of each bottleneck (before the residual add) and the 1x1 downsample convs "
                 "have bias without relu. Pooling and adds omitted.");
  int64_t extent = ResNetStem(b);
  int64_t in_c = 64;
  const int64_t widths[] = {64, 128, 256, 512};
  const int blocks[] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t width = widths[stage];
    const int64_t out_c = width * 4;
    for (int block = 0; block < blocks[stage]; ++block) {
      const std::string prefix = absl::StrCat("layer", stage + 1, ".", block, ".");
      const int64_t stride = (stage > 0 && block == 0) ? 2 : 1;
      b.Conv(prefix + "conv1", in_c, extent, width, 1, 1, 0, true);
      const int64_t out = b.Conv(prefix + "conv2", width, extent, width, 3, stride, 1, true);
      b.Conv(prefix + "conv3", width, out, out_c, 1, 1, 0, /*relu=*/false);
      if (stride != 1 || in_c != out_c) {
        b.Conv(prefix + "downsample", in_c, extent, out_c, 1, stride, 0, /*relu=*/false);
      }
      in_c = out_c;
      extent = out;
    }
  }
  b.Dense("fc", 1, 1000, 2048, /*relu=*/false, 1);
  return b.Finish();
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
