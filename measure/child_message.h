// MessageWriter / MessageReader: the payloads a measuring child process sends its parent.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "measure/measure_result.h"

namespace tune::measure {

/// Packs plain values, strings, float arrays and results into one payload, in host byte
/// order (the child is a fork of its parent: same executable, same host). Read them back
/// with MessageReader in the same order.
class MessageWriter {
 public:
  /// Appends the bytes of a trivially copyable value.
  template <typename T>
  MessageWriter& Put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof(T));
    return *this;
  }
  /// Appends a u64 length, then the bytes.
  MessageWriter& PutString(std::string_view text);
  /// Appends a u64 count, then the floats.
  MessageWriter& PutFloats(const std::vector<float>& values);
  /// Appends status, number, message and costs_s (build_s and wall_s are the parent's to set).
  MessageWriter& PutResult(const MeasureResult& result);

  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

/// Reads a payload written by MessageWriter. Each Get returns false, leaving its output
/// unspecified, when the payload ends early or holds an impossible value; a reader that has
/// failed once stays failed. Does not own the payload: it must outlive the reader.
class MessageReader {
 public:
  explicit MessageReader(std::string_view payload) : in_(payload) {}

  template <typename T>
  bool Get(T* value) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (failed_ || in_.size() - pos_ < sizeof(T)) return Fail();
    std::memcpy(value, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool GetString(std::string* text);
  bool GetFloats(std::vector<float>* values);
  /// Sets status, number, message and costs_s; false for a status MeasureStatus does not have.
  bool GetResult(MeasureResult* result);

  /// True when every byte was read and nothing failed.
  bool Done() const { return !failed_ && pos_ == in_.size(); }

 private:
  bool Fail() {
    failed_ = true;
    return false;
  }

  std::string_view in_;
  size_t pos_ = 0;
  bool failed_ = false;
};

}  // namespace tune::measure
