// KernelTask: record keys from the workload, task data drawn on first use, measuring delegated.
#include "measure/kernel_task.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tune::measure {

std::string WorkloadJson(const codegen::Workload& w) {
  nlohmann::json j;
  j["op"] = codegen::OpName(w.op);
  if (w.op == codegen::OpKind::kConv2d) {
    j["n"] = w.batch;
    j["c"] = w.in_c;
    j["h"] = w.in_h;
    j["w"] = w.in_w;
    j["oc"] = w.out_c;
    j["kernel"] = {w.kernel_h, w.kernel_w};
    j["stride"] = {w.stride_h, w.stride_w};
    j["pad"] = {w.pad_h, w.pad_w};
    j["dilation"] = {w.dilation_h, w.dilation_w};
    j["groups"] = w.groups;
    if (w.layout_block > 0) j["layout"] = absl::StrCat("nchw", w.layout_block, "c");
  } else {
    j["batch"] = w.batch;
    j["m"] = w.m;
    j["n"] = w.n;
    j["k"] = w.k;
  }
  j["bias"] = w.bias;
  j["relu"] = w.relu;
  if (w.relu6) j["relu6"] = true;
  j["dtype"] = w.dtype;
  return j.dump();
}

KernelTask::KernelTask(std::unique_ptr<codegen::Template> tmpl, search::Config default_config,
                       std::shared_ptr<KernelMeasurer> measurer, uint64_t data_seed, bool host_reference,
                       StopFn should_stop)
    : tmpl_(std::move(tmpl)),
      default_config_(std::move(default_config)),
      measurer_(std::move(measurer)),
      data_seed_(data_seed),
      host_reference_(host_reference),
      should_stop_(std::move(should_stop)) {
  const codegen::Workload& w = tmpl_->workload();
  keys_.workload_key = w.Key();
  keys_.op = codegen::OpName(w.op);
  keys_.shape_json = WorkloadJson(w);
  keys_.flops = w.Flops();
  keys_.template_version = tmpl_->version();
}

std::vector<MeasureResult> KernelTask::Measure(const std::vector<search::Config>& configs,
                                               const MeasureProtocol& protocol) {
  if (should_stop_ && should_stop_()) return {};
  if (measurer_->NeedsTaskData() && data_ == nullptr) {
    std::optional<TaskData> data = CreateTaskData(tmpl_->workload(), data_seed_, host_reference_, should_stop_);
    if (!data.has_value()) return {};  // stopped while drawing the inputs or computing the reference
    data_ = std::make_unique<TaskData>(*std::move(data));
  }
  return measurer_->Measure(*tmpl_, data_.get(), configs, protocol);
}

}  // namespace tune::measure
