// Loading models from the zoo or from JSON model files, and task extraction.
#include "tuner/model_file.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "nlohmann/json.hpp"

namespace tune::tuner {

absl::StatusOr<ZooModel> LoadModelFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("cannot read model file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return ParseModelJson(text.str(), path);
}

absl::StatusOr<ZooModel> ParseModelJson(const std::string& text, const std::string& path) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError("malformed model file '" + path + "': " + why);
  };
  if (j.is_discarded()) return bad("not valid JSON");
  if (!j.is_object() || !j.contains("layers") || !j["layers"].is_array() || j["layers"].empty()) {
    return bad("expected an object with a non-empty \"layers\" array");
  }
  ZooModel model;
  model.name = j.value("name", std::filesystem::path(path).stem().string());
  if (!j["name"].is_null() && j.contains("name") && !j["name"].is_string()) return bad("\"name\" must be a string");
  model.description = "model file " + path;
  std::map<std::string, size_t> by_key;
  int index = 0;
  for (const auto& layer : j["layers"]) {
    std::string where = "layer " + std::to_string(index++);
    if (!layer.is_object()) return bad(where + " is not an object");
    if (!layer.contains("op") || !layer["op"].is_string()) return bad(where + ": missing string \"op\"");
    if (!layer.contains("shape") || !layer["shape"].is_string()) return bad(where + ": missing string \"shape\"");
    auto op = codegen::ParseOpName(layer["op"].get<std::string>());
    if (!op.ok()) return bad(where + ": " + std::string(op.status().message()));
    auto w = codegen::Workload::Parse(*op, layer["shape"].get<std::string>());
    if (!w.ok()) return bad(where + ": " + std::string(w.status().message()));
    for (const char* flag : {"bias", "relu"}) {
      if (layer.contains(flag) && !layer[flag].is_boolean()) return bad(where + ": \"" + flag + "\" must be true or false");
    }
    w->bias = layer.value("bias", false);
    w->relu = layer.value("relu", false);
    int count = 1;
    if (layer.contains("count")) {
      if (!layer["count"].is_number_integer() || layer["count"].get<int64_t>() < 1 ||
          layer["count"].get<int64_t>() > 1000000) {
        return bad(where + ": \"count\" must be a positive integer");
      }
      count = layer["count"].get<int>();
    }
    std::string name = layer.contains("name") && layer["name"].is_string() ? layer["name"].get<std::string>() : where;
    auto it = by_key.find(w->Key());
    if (it != by_key.end()) {
      model.layers[it->second].count += count;
      continue;
    }
    by_key[w->Key()] = model.layers.size();
    model.layers.push_back({name, *w, count});
  }
  return model;
}

absl::StatusOr<ZooModel> LoadModel(const std::string& model) {
  auto zoo = GetZooModel(model);
  if (zoo.ok()) return zoo;
  if (std::filesystem::exists(model) && !std::filesystem::is_directory(model)) return LoadModelFile(model);
  return zoo.status();
}

std::vector<TuneTask> ExtractTasks(const ZooModel& model) {
  std::vector<TuneTask> tasks;
  for (const auto& layer : model.layers) tasks.push_back({layer.name, layer.workload, layer.count});
  return tasks;
}

}  // namespace tune::tuner
