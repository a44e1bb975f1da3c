// Tuner options for tests that count records: random search over a quick measurement protocol
// (candidates are tiny and timings are not under test), no finalists, no cutoff and no
// template start configs, so every measured trial is one record of the strategy that proposed
// it.
#pragma once

#include <cstdint>
#include <string>

#include "tests/common/test_seed.h"
#include "tuner/tuner.h"

namespace tune::test {

inline tuner::TuneOptions FastTuneOptions(int trials, int batch, const std::string& command,
                                          uint64_t seed = kTestSeed) {
  tuner::TuneOptions o;
  o.strategy = "random";
  o.trials_per_task = trials;
  o.batch = batch;
  o.seed = seed;
  o.protocol.warmup = 0;
  o.protocol.repeats = 1;
  o.protocol.min_repeat_ms = 1;
  o.protocol.timeout_s = 30;
  o.finalists = 0;
  o.cutoff_factor = 0;
  o.start_configs = false;
  o.command = command;
  return o;
}

}  // namespace tune::test
