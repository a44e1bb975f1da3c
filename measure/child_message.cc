// MessageWriter / MessageReader: strings, float arrays and results in a child's payload.
#include "measure/child_message.h"

namespace tune::measure {

MessageWriter& MessageWriter::PutString(std::string_view text) {
  Put<uint64_t>(text.size());
  bytes_.append(text);
  return *this;
}

MessageWriter& MessageWriter::PutFloats(const std::vector<float>& values) {
  Put<uint64_t>(values.size());
  bytes_.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return *this;
}

MessageWriter& MessageWriter::PutResult(const MeasureResult& result) {
  Put(static_cast<int32_t>(result.status));
  Put<int32_t>(result.number);
  PutString(result.message);
  Put<uint64_t>(result.costs_s.size());
  for (double cost : result.costs_s) Put(cost);
  return *this;
}

bool MessageReader::GetString(std::string* text) {
  uint64_t size = 0;
  if (!Get(&size) || in_.size() - pos_ < size) return Fail();
  text->assign(in_.data() + pos_, size);
  pos_ += size;
  return true;
}

bool MessageReader::GetFloats(std::vector<float>* values) {
  uint64_t count = 0;
  if (!Get(&count) || (in_.size() - pos_) / sizeof(float) < count) return Fail();
  values->resize(count);
  std::memcpy(values->data(), in_.data() + pos_, count * sizeof(float));
  pos_ += count * sizeof(float);
  return true;
}

bool MessageReader::GetResult(MeasureResult* result) {
  int32_t status = 0;
  uint64_t count = 0;
  if (!Get(&status) || !Get(&result->number) || !GetString(&result->message) || !Get(&count)) {
    return false;
  }
  if (status < static_cast<int32_t>(MeasureStatus::kOk) ||
      status > static_cast<int32_t>(MeasureStatus::kWrongResult) ||
      (in_.size() - pos_) / sizeof(double) < count) {
    return Fail();
  }
  result->status = static_cast<MeasureStatus>(status);
  result->costs_s.resize(count);
  for (double& cost : result->costs_s) Get(&cost);
  return true;
}

}  // namespace tune::measure
