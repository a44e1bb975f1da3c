// Workloads and their templates for tests, parsed from shape strings ("64,64,64").
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "codegen/ir/template.h"
#include "codegen/ir/workload.h"
#include "codegen/templates.h"
#include "gtest/gtest.h"

namespace tune::test {

/// `shape` parsed as a workload of `op` (Workload::Parse, no epilogue); a test failure, and a
/// default workload, when it does not parse.
inline codegen::Workload ToyWorkload(codegen::OpKind op, const std::string& shape) {
  absl::StatusOr<codegen::Workload> w = codegen::Workload::Parse(op, shape);
  EXPECT_TRUE(w.ok()) << shape << ": " << w.status();
  return w.ok() ? *w : codegen::Workload{};
}

/// The template of `workload` on `backend` (codegen::CreateTemplate); a test failure, and
/// null, when there is none.
inline std::unique_ptr<codegen::Template> MakeTemplate(const codegen::Workload& workload,
                                                       codegen::Backend backend = codegen::Backend::kLlvm) {
  absl::StatusOr<std::unique_ptr<codegen::Template>> t = codegen::CreateTemplate(workload, backend);
  EXPECT_TRUE(t.ok()) << workload.Key() << ": " << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

/// The CPU template of `shape` parsed as a workload of `op`.
inline std::unique_ptr<codegen::Template> MakeTemplate(codegen::OpKind op, const std::string& shape) {
  return MakeTemplate(ToyWorkload(op, shape));
}

}  // namespace tune::test
