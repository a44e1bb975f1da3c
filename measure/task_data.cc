// TaskData::Create: seeded random inputs for a task and the reference output from them.
#include <optional>
#include <random>

#include "measure/kernel_task.h"
#include "measure/reference.h"
#include "measure/runner.h"

namespace tune::measure {
namespace {

// Uniform in [-1, 1) on a 2^-23 grid, from the top 24 bits of one draw, never exactly 0.
// Written out rather than using std::uniform_real_distribution, whose output differs
// between standard libraries, so that the same seed gives the same data everywhere.
float DrawNonZero(std::mt19937_64& rng) {
  while (true) {
    const int64_t bits = static_cast<int64_t>(rng() >> 40);  // [0, 2^24)
    if (bits == (int64_t{1} << 23)) continue;                // would map to 0
    return static_cast<float>(bits - (int64_t{1} << 23)) * (1.0f / (1 << 23));
  }
}

}  // namespace

TaskData TaskData::Create(const codegen::Workload& workload, uint64_t seed, bool with_reference) {
  return *CreateTaskData(workload, seed, with_reference, nullptr);
}

std::optional<TaskData> CreateTaskData(const codegen::Workload& workload, uint64_t seed, bool with_reference,
                                       const StopFn& should_stop) {
  TaskData task;
  task.workload = workload;
  std::mt19937_64 rng(seed);
  StopPoll poll(should_stop);
  for (const codegen::TensorSpec& spec : workload.Inputs()) {
    std::vector<float>& values = task.inputs.emplace_back(spec.NumElements());
    for (size_t i = 0; i < values.size(); ++i) {
      values[i] = DrawNonZero(rng);
      if ((i & 0xffff) == 0 && poll.Tick(0x10000)) return std::nullopt;
    }
  }
  if (with_reference && !ComputeReference(workload, task.inputs, &task.reference, should_stop)) return std::nullopt;
  return task;
}

}  // namespace tune::measure
