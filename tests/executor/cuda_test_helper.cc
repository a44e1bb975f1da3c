// The GPU tests' one CUDA backend on device 0.
#include "tests/executor/cuda_test_helper.h"

#include <mutex>

namespace tune::executor {

std::shared_ptr<CudaBackend> SharedCudaBackend(std::string* why) {
  static std::once_flag once;
  static std::shared_ptr<CudaBackend>* backend = new std::shared_ptr<CudaBackend>();
  static std::string* reason = new std::string();
  std::call_once(once, [] {
    auto made = CudaBackend::Create(0);
    if (made.ok()) {
      *backend = std::shared_ptr<CudaBackend>(*std::move(made));
    } else {
      *reason = std::string(made.status().message());
    }
  });
  *why = *reason;
  return *backend;
}

}  // namespace tune::executor
