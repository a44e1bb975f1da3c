// What the exporter tests share: the test model, running `tune`, targets put in a database.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dataset/record_database.h"
#include "gtest/gtest.h"
#include "measure/target.h"
#include "nlohmann/json.hpp"
#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"

namespace tune::exporter_test {

inline const std::string kTuneBinary = std::string(TUNE_BIN_DIR) + "/tune";

/// A model file with the four kinds of kernel the exporter must handle: a dense with bias, a
/// matmul, a conv2d with bias and relu (two layers) and a depthwise conv2d with relu6. The two
/// convolutions share the layer name "conv", so their functions must be told apart.
inline constexpr const char* kMixModel = R"({"name": "export-mix", "layers": [
  {"name": "fc.1", "op": "dense", "shape": "4,24,40", "bias": true},
  {"name": "proj", "op": "matmul", "shape": "8,20,12"},
  {"name": "conv", "op": "conv2d", "shape": "1,3,12,12,8,3,3,1,1", "bias": true, "relu": true, "count": 2},
  {"name": "conv", "op": "conv2d", "shape": "1,8,10,10,8,3,3,1,1,1,8", "relu6": true}]}
)";

/// Runs `tune args...` in `cwd`.
inline test::ProcessResult RunTune(const std::string& cwd, std::vector<std::string> args, double limit_s = 300) {
  args.insert(args.begin(), kTuneBinary);
  return test::RunProcess(args, cwd, limit_s);
}

/// Runs `sh -c command` in `cwd`.
inline test::ProcessResult RunShell(const std::string& cwd, const std::string& command, double limit_s = 300) {
  return test::RunProcess({"/bin/sh", "-c", command}, cwd, limit_s);
}

/// A CPU target as a target key of another machine would describe it.
inline measure::Target CpuTarget(const std::string& cpu, const std::string& features, int threads) {
  measure::Target t;
  t.kind = "llvm";
  t.device_model = "Test CPU " + cpu;
  t.cpu = cpu;
  t.features = features;
  t.toolkit = "llvm-15.0.6";
  t.threads = threads;
  return t;
}

/// An H100 (SXM) as `tune --target cuda` would describe it on a machine with CUDA 13.
inline measure::Target H100Target() {
  measure::Target t;
  t.kind = "cuda";
  t.device = 0;
  t.device_model = "NVIDIA H100 80GB HBM3";
  t.cpu = "sm_90";
  t.features = "132sm";
  t.toolkit = "nvrtc-13.0,driver-13.0";
  t.threads = 1;
  t.max_threads_per_block = 1024;
  t.max_shared_per_block = 232448;
  t.registers_per_block = 65536;
  t.multiprocessors = 132;
  t.l2_bytes = 52428800;
  t.memory_bytes = 85520809984;
  return t;
}

/// Puts `target` into the database at `path` (created when absent); returns its id.
inline int64_t AddTarget(const std::string& path, const measure::Target& target) {
  auto db = dataset::RecordDatabase::Open(path, /*create=*/true);
  EXPECT_TRUE(db.ok()) << db.status();
  if (!db.ok()) return 0;
  auto id = (*db)->UpsertTarget({0, target.Key(), target.ToJson()});
  EXPECT_TRUE(id.ok()) << id.status();
  return id.ok() ? *id : 0;
}

/// The manifest of an exported library.
inline nlohmann::json ReadManifest(const std::string& dir) {
  nlohmann::json j = nlohmann::json::parse(test::ReadFileBytes(dir + "/manifest.json"), nullptr, false);
  EXPECT_TRUE(j.is_object()) << dir << "/manifest.json";
  return j;
}

/// Names of every file under `dir`, relative to it, sorted.
inline std::vector<std::string> TreeOf(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    out.push_back(std::filesystem::relative(it->path(), dir).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace tune::exporter_test
