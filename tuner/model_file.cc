// Loading models from the zoo or from JSON model files, and task extraction.
#include "tuner/model_file.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "codegen/templates.h"
#include "graph/layout.h"
#include "graph/onnx_import.h"
#include "graph/tasks.h"
#include "nlohmann/json.hpp"

namespace tune::tuner {

absl::StatusOr<ZooModel> LoadModelFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("cannot read model file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return ParseModelJson(text.str(), path);
}

namespace {

constexpr int64_t kMaxLayerCount = 1000000;  // "count" of one layer
constexpr int64_t kMaxMergedCount = std::numeric_limits<int>::max();  // counts of one workload, added

absl::StatusOr<ZooModel> ParseModelJsonOrThrow(const std::string& text, const std::string& path) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError("malformed model file '" + path + "': " + why);
  };
  if (j.is_discarded()) return bad("not valid JSON");
  if (!j.is_object()) return bad("expected an object with a non-empty \"layers\" array");
  const auto layers = j.find("layers");
  if (layers == j.end() || !layers->is_array() || layers->empty()) {
    return bad("expected an object with a non-empty \"layers\" array");
  }
  ZooModel model;
  model.name = std::filesystem::path(path).stem().string();
  if (const auto name = j.find("name"); name != j.end()) {
    if (!name->is_string()) return bad("\"name\" must be a string");
    model.name = name->get<std::string>();
  }
  model.description = "model file " + path;
  std::map<std::string, size_t> by_key;
  std::vector<int64_t> counts;  // of model.layers, added up in 64 bits
  int index = 0;
  for (const auto& layer : *layers) {
    std::string where = "layer " + std::to_string(index++);
    if (!layer.is_object()) return bad(where + " is not an object");
    absl::StatusOr<codegen::Workload> w;
    if (const auto key = layer.find("key"); key != layer.end()) {
      if (!key->is_string()) return bad(where + ": \"key\" must be a string");
      w = codegen::Workload::FromKey(key->get<std::string>());
      if (w.ok()) {
        if (absl::Status st = w->Validate(); !st.ok()) w = st;
      }
      if (!w.ok()) return bad(where + ": " + std::string(w.status().message()));
    } else {
      const auto op_field = layer.find("op");
      if (op_field == layer.end() || !op_field->is_string()) return bad(where + ": missing string \"op\"");
      const auto shape = layer.find("shape");
      if (shape == layer.end() || !shape->is_string()) return bad(where + ": missing string \"shape\"");
      auto op = codegen::ParseOpName(op_field->get<std::string>());
      if (!op.ok()) return bad(where + ": " + std::string(op.status().message()));
      w = codegen::Workload::Parse(*op, shape->get<std::string>());
      if (!w.ok()) return bad(where + ": " + std::string(w.status().message()));
    }
    for (auto [flag, field] : {std::pair{"bias", &codegen::Workload::bias}, std::pair{"relu", &codegen::Workload::relu},
                               std::pair{"relu6", &codegen::Workload::relu6}}) {
      const auto value = layer.find(flag);
      if (value == layer.end()) continue;
      if (!value->is_boolean()) return bad(where + ": \"" + flag + "\" must be true or false");
      (*w).*field = value->get<bool>();
    }
    if (w->relu && w->relu6) return bad(where + ": \"relu\" and \"relu6\" are exclusive");
    int64_t count = 1;
    if (const auto c = layer.find("count"); c != layer.end()) {
      // A number_unsigned above int64's range is not a number_integer that fits: read it as
      // unsigned first so it is rejected, never wrapped.
      const bool fits = c->is_number_unsigned() ? c->get<uint64_t>() <= static_cast<uint64_t>(kMaxLayerCount)
                                                : c->is_number_integer();
      if (!fits || c->get<int64_t>() < 1 || c->get<int64_t>() > kMaxLayerCount) {
        return bad(where + ": \"count\" must be an integer from 1 to " + std::to_string(kMaxLayerCount));
      }
      count = c->get<int64_t>();
    }
    std::string name = where;
    if (const auto n = layer.find("name"); n != layer.end()) {
      if (!n->is_string()) return bad(where + ": \"name\" must be a string");
      name = n->get<std::string>();
    }
    auto it = by_key.find(w->Key());
    if (it != by_key.end()) {
      int64_t& sum = counts[it->second];
      if (sum > kMaxMergedCount - count) {
        return bad(where + ": the counts of the layers with workload " + w->Label() + " add up to more than " +
                   std::to_string(kMaxMergedCount));
      }
      sum += count;
      model.layers[it->second].count = static_cast<int>(sum);
      continue;
    }
    by_key[w->Key()] = model.layers.size();
    counts.push_back(count);
    model.layers.push_back({name, *w, static_cast<int>(count)});
  }
  return model;
}

}  // namespace

absl::StatusOr<ZooModel> ParseModelJson(const std::string& text, const std::string& path) {
  // Every field's type is checked before it is read, so nothing below throws; a JSON library
  // error that slips through anyway is a malformed file, never an abort.
  try {
    return ParseModelJsonOrThrow(text, path);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError("malformed model file '" + path + "': " + e.what());
  }
}

bool IsOnnxModel(const std::string& path) {
  if (absl::EndsWithIgnoreCase(path, ".onnx")) return true;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec) || ec) return false;
  std::ifstream in(path, std::ios::binary);
  char head[64] = {};
  in.read(head, sizeof(head));
  return graph::LooksLikeOnnx(std::string(head, static_cast<size_t>(in.gcount())));
}

absl::StatusOr<ZooModel> LoadOnnxModel(const std::string& path, const std::vector<std::string>& inputs,
                                       int64_t layout_block) {
  graph::ImportOptions options;
  for (const std::string& text : inputs) {
    if (absl::Status st = graph::ParseInputShape(text, &options); !st.ok()) return st;
  }
  absl::StatusOr<graph::Graph> g = graph::ImportOnnx(path, options);
  if (!g.ok()) return g.status();
  if (layout_block > 0) {
    if (absl::Status st = graph::PlanBlockedLayout(*g, layout_block); !st.ok()) return st;
  }
  const graph::GraphTasks tasks = graph::ExtractGraphTasks(*g);
  if (tasks.tasks.empty()) {
    return absl::InvalidArgumentError(path + ": no Conv, Gemm or MatMul node that tune can tune");
  }
  ZooModel model;
  model.name = std::filesystem::path(path).stem().string();
  model.description = "ONNX model " + path;
  for (const graph::GraphTask& t : tasks.tasks) model.layers.push_back({t.name, t.workload, t.count});
  model.summary = absl::StrCat(path, ": ", tasks.tuned_nodes, " tuned nodes in ", tasks.tasks.size(), " tasks");
  if (const std::string untuned = graph::UntunedSummary(tasks); !untuned.empty()) {
    absl::StrAppend(&model.summary, "; ", untuned);
  }
  return model;
}

absl::StatusOr<int64_t> LayoutBlock(const std::string& layout, const std::string& target) {
  if (layout == "nchw") return 0;
  if (layout != "nchwc") return absl::InvalidArgumentError("--layout " + layout + ": expected nchw or nchwc");
  const std::string kind(absl::StripAsciiWhitespace(target));
  if (kind.rfind("cuda", 0) == 0) {
    return absl::InvalidArgumentError("--layout nchwc is for CPU targets (--target llvm): the channel-blocked "
                                      "convolutions have no CUDA kernels; target " + kind + " takes --layout nchw");
  }
  return codegen::HostCpuLimits().vector_lanes;
}

ZooModel BlockLayers(ZooModel model, int64_t lanes) {
  for (ZooLayer& layer : model.layers) {
    if (const int64_t block = graph::ConvLayoutBlock(layer.workload, lanes); block > 0) {
      layer.workload = graph::BlockedConv(layer.workload, block);
    }
  }
  return model;
}

absl::StatusOr<ZooModel> LoadModel(const std::string& model, const std::vector<std::string>& inputs,
                                   int64_t layout_block) {
  if (IsOnnxModel(model)) return LoadOnnxModel(model, inputs, layout_block);
  if (layout_block > 0) {
    auto layers = LoadModel(model, inputs);
    if (!layers.ok()) return layers.status();
    return BlockLayers(*std::move(layers), layout_block);
  }
  if (!inputs.empty()) {
    return absl::InvalidArgumentError("--input " + inputs[0] + ": --input applies only to ONNX models, not '" + model +
                                      "'");
  }
  auto zoo = GetZooModel(model);
  if (zoo.ok()) return zoo;
  // The error_code overloads: a path that cannot be examined (too long, no permission) is not
  // a model file, and the zoo's error says what the names are.
  std::error_code ec;
  if (std::filesystem::exists(model, ec) && !std::filesystem::is_directory(model, ec) && !ec) return LoadModelFile(model);
  return zoo.status();
}

std::string ModelToJson(const ZooModel& model) {
  nlohmann::json layers = nlohmann::json::array();
  for (const ZooLayer& layer : model.layers) {
    const codegen::Workload& w = layer.workload;
    nlohmann::json j = {{"name", layer.name}, {"count", layer.count}};
    std::string shape;
    switch (w.op) {
      case codegen::OpKind::kDense:
      case codegen::OpKind::kMatmul:
        shape = absl::StrCat(w.m, ",", w.n, ",", w.k);
        break;
      case codegen::OpKind::kBatchMatmul:
        shape = absl::StrCat(w.batch, ",", w.m, ",", w.n, ",", w.k);
        break;
      case codegen::OpKind::kConv2d:
        if (w.stride_h == w.stride_w && w.pad_h == w.pad_w && w.dilation_h == w.dilation_w) {
          shape = absl::StrCat(w.batch, ",", w.in_c, ",", w.in_h, ",", w.in_w, ",", w.out_c, ",", w.kernel_h, ",",
                               w.kernel_w, ",", w.stride_h, ",", w.pad_h, ",", w.dilation_h, ",", w.groups);
          if (w.layout_block > 0) absl::StrAppend(&shape, ",nchw", w.layout_block, "c");
        }
        break;
    }
    if (shape.empty()) {
      j["key"] = w.Key();
    } else {
      j["op"] = codegen::OpName(w.op);
      j["shape"] = shape;
    }
    j["bias"] = w.bias;
    j["relu"] = w.relu;
    if (w.relu6) j["relu6"] = true;
    layers.push_back(std::move(j));
  }
  return nlohmann::json{{"name", model.name}, {"layers", layers}}.dump();
}

std::vector<TuneTask> ExtractTasks(const ZooModel& model) {
  std::vector<TuneTask> tasks;
  for (const auto& layer : model.layers) tasks.push_back({layer.name, layer.workload, layer.count});
  return tasks;
}

}  // namespace tune::tuner
