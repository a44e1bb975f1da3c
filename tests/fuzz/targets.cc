// The fuzz targets' registry: names, dictionaries, size caps, and the daemon target's seed inputs.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_targets.h"
#include "tune/v1/tune.pb.h"

namespace tune::fuzz {
namespace {

const std::vector<std::string> kJsonTokens = {
    "{", "}", "[", "]", ",", ":", "\"", "\\u0000", "\\ud800", "null", "true", "false", "{}", "[]", "\"\"",
    "\"a\":", "1e400", "-1", "0", "1e-400", "18446744073709551615", "9223372036854775808", "\xff", "\xc3\xa9"};

std::vector<std::string> With(std::vector<std::string> tokens, const std::vector<std::string>& more) {
  tokens.insert(tokens.end(), more.begin(), more.end());
  return tokens;
}

// One frame of a daemon input: [kind][length, 2 bytes LE][payload].
std::string Frame(int kind, const std::string& payload) {
  std::string out(1, static_cast<char>(kind));
  out.push_back(static_cast<char>(payload.size() & 0xff));
  out.push_back(static_cast<char>((payload.size() >> 8) & 0xff));
  return out + payload;
}

std::string Sub(const v1::WorkerMessage& m) {
  std::string bytes = m.SerializeAsString();
  std::string out;
  out.push_back(static_cast<char>(bytes.size() & 0xff));
  out.push_back(static_cast<char>((bytes.size() >> 8) & 0xff));
  return out + bytes;
}

// The harness's own check: an input "CRASH" aborts, an input "HANG" never returns.
int FuzzSelfTest(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  if (input == "CRASH") std::abort();
  if (input == "HANG") {
    for (volatile bool forever = true; forever;) {
    }
  }
  return 0;
}

}  // namespace

/// The daemon target's seeds (written by `tune_fuzz daemon --write-seeds DIR`).
std::vector<std::string> DaemonSeeds() {
  v1::RegisterRequest reg;
  reg.set_name("w0");
  reg.set_host("host");
  reg.set_target("llvm");
  reg.set_target_key("llvm|generic|cpu|features|llvm-15|t1");
  reg.set_device("cpu");
  reg.set_protocol(1);
  v1::SubmitJobRequest zoo;
  zoo.set_zoo_name("resnet-18");
  zoo.set_target("llvm");
  zoo.set_trials(2);
  zoo.set_strategy("random");
  zoo.set_name("job");
  v1::SubmitJobRequest file = zoo;
  file.set_model_json(R"({"name": "m", "layers": [{"op": "matmul", "shape": "8,8,8", "count": 2}]})");
  file.set_batch(2);
  file.set_seed(3);
  file.set_cost_model("none");
  file.set_task_scheduler("round-robin");
  file.add_strategy_options("eps_greedy=0.1");
  file.set_protocol_json(R"({"repeats": 3, "min_repeat_ms": 1})");
  v1::CancelJobRequest cancel;
  cancel.set_job_id(1);
  v1::WatchJobRequest watch;
  watch.set_job_id(1);
  v1::QueryBestRequest best;
  v1::HeartbeatRequest beat;
  beat.set_worker_id(1);
  v1::WorkerMessage ready, results, release;
  ready.mutable_ready()->set_worker_id(1);
  results.mutable_results()->set_batch_id(1);
  auto* r = results.mutable_results()->add_results();
  r->set_index(0);
  r->set_status("ok");
  r->add_costs_s(1e-3);
  r->add_costs_s(1.1e-3);
  r->set_number(1);
  auto* f = results.mutable_results()->add_results();
  f->set_index(1);
  f->set_status("runtime_error");
  f->set_message("crashed");
  release.mutable_release()->set_batch_id(1);
  const std::string empty;
  return {
      Frame(0, empty) + Frame(5, empty) + Frame(6, empty),
      Frame(1, zoo.SerializeAsString()) + Frame(6, empty) + Frame(3, cancel.SerializeAsString()),
      Frame(1, file.SerializeAsString()) + Frame(2, watch.SerializeAsString()) + Frame(0, empty),
      Frame(7, reg.SerializeAsString()) + Frame(8, beat.SerializeAsString()) + Frame(5, empty),
      Frame(7, reg.SerializeAsString()) + Frame(1, file.SerializeAsString()) +
          Frame(9, Sub(ready) + Sub(results) + Sub(release)) + Frame(6, empty),
      Frame(7, reg.SerializeAsString()) + Frame(9, Sub(results) + Sub(ready)) + Frame(4, best.SerializeAsString()),
      Frame(3, cancel.SerializeAsString()) + Frame(2, watch.SerializeAsString()) + Frame(0xf3, empty),
  };
}

std::string ScratchFolder(const std::string& name) {
  std::error_code ec;
  std::string base;
  if (const char* dir = std::getenv("TUNE_FUZZ_TMP"); dir != nullptr && *dir != '\0') {
    base = dir;
  } else if (std::filesystem::is_directory("/dev/shm", ec) && access("/dev/shm", W_OK) == 0) {
    base = "/dev/shm";
  } else {
    base = std::filesystem::temp_directory_path().string();
  }
  std::string folder = base + "/tune-fuzz-" + name + "-" + std::to_string(getpid());
  std::filesystem::create_directories(folder, ec);
  return folder;
}

const std::vector<FuzzTarget>& Targets() {
  static const std::vector<FuzzTarget> targets = {
      {"model_file", FuzzModelFile,
       With(kJsonTokens, {"\"name\"", "\"layers\"", "\"op\"", "\"shape\"", "\"bias\"", "\"relu\"", "\"count\"",
                          "\"conv2d\"", "\"dense\"", "\"matmul\"", "\"batch_matmul\"", "\"1,3,224,224,64,7,7,2,3\"",
                          "\"8,8,8\"", ",0", ",-1", ",99999999999"}),
       1 << 14, false},
      {"kernel_tuner_cache", FuzzKernelTunerCache,
       With(kJsonTokens, {"\"tune_params_keys\"", "\"tune_params\"", "\"cache\"", "\"time\"", "\"times\"",
                          "\"RuntimeFailedConfig\"", "\"CompilationFailedConfig\"", "\"device_name\"",
                          "\"kernel_name\"", "\"1,1\"", "\"2,4,8\"", "\x1f\x8b"}),
       1 << 15, false},
      {"record_database", FuzzRecordDatabase,
       {"SQLite format 3", "CREATE TABLE", "INTEGER", "TEXT", "records", "tasks", "targets", "runs", "jobs",
        "\xff\xff\xff\xff", "\x0d", "\x05", "\x0a", "\x02", "{\"", "ok", "timeout"},
       1 << 20, true},
      {"daemon", FuzzDaemonRequests,
       {"llvm", "cuda:0", "resnet-18", "random", "grid", "xgb", "ok", "timeout", "wrong_result", "{}",
        "{\"layers\": [{\"op\": \"matmul\", \"shape\": \"99999999999,4,4\"}]}", "\x09", "\x21", "\x10\x01", "\x12\x00"},
       1 << 13, true},
      {"onnx_import", FuzzOnnxImport,
       {"Conv", "Gemm", "MatMul", "Add", "Relu", "Clip", "Reshape", "Transpose", "Concat", "Split", "Slice",
        "Gather", "Pad", "Expand", "Tile", "Range", "Shape", "ConstantOfShape", "Unsqueeze", "Squeeze",
        "BatchNormalization", "MaxPool", "Softmax", "Where", "Cast", "Dropout", "axis", "axes", "perm", "pads",
        "strides", "kernel_shape", "group", "split", "\x08\x07", std::string("\x1a\x00", 2), std::string("\x22\x00", 2),
        std::string("\x08\x01", 2), std::string("\x10\x00", 2), "\xff\xff\xff\xff\x0f"},
       1 << 18, true, MutateOnnxModel},
      {"selftest", FuzzSelfTest, {}, 16, false},
  };
  return targets;
}

const FuzzTarget* FindTarget(const std::string& name) {
  for (const auto& t : Targets()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace tune::fuzz
