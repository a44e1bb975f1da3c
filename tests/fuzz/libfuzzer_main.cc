// libFuzzer entry point: the target named by TUNE_FUZZ_TARGET (one binary per target).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const tune::fuzz::FuzzTarget* target = tune::fuzz::FindTarget(TUNE_FUZZ_TARGET);
  if (target == nullptr) std::abort();
  return target->run(data, size);
}
