// Fuzz target: the model-file parser (tuner::ParseModelJson) and the tasks a parsed model gives.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "codegen/ir/workload.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tuner/model_file.h"

namespace tune::fuzz {

int FuzzModelFile(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto model = tuner::ParseModelJson(text, "fuzz.json");
  if (!model.ok()) return 0;
  for (const tuner::TuneTask& task : tuner::ExtractTasks(*model)) {
    // A parsed layer's workload is valid, and its record key names it exactly.
    const std::string key = task.workload.Key();
    (void)task.workload.Label();
    (void)task.workload.Flops();
    auto again = codegen::Workload::FromKey(key);
    if (!again.ok() || again->Key() != key) {
      std::fprintf(stderr, "workload key '%s' does not read back: %s\n", key.c_str(),
                   again.ok() ? again->Key().c_str() : std::string(again.status().message()).c_str());
      std::abort();
    }
  }
  return 0;
}

}  // namespace tune::fuzz
