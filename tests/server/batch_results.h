// What a simulated worker answers to a leased batch in the daemon tests.
#pragma once

#include <cstdint>
#include <functional>

#include "tune/v1/tune.pb.h"

namespace tune::test {

/// The results message of `batch`: every config ok, measured once, config i taking cost(i) s.
inline v1::WorkerMessage OkBatchResults(const v1::Batch& batch, const std::function<double(int)>& cost) {
  v1::WorkerMessage m;
  m.mutable_results()->set_batch_id(batch.batch_id());
  for (int i = 0; i < batch.configs_json_size(); ++i) {
    v1::MeasureResult* r = m.mutable_results()->add_results();
    r->set_index(static_cast<uint32_t>(i));
    r->set_status("ok");
    r->add_costs_s(cost(i));
    r->set_number(1);
  }
  return m;
}

}  // namespace tune::test
