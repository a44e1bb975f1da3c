// Record exchange: writing records as JSON lines and reading them back, checking every field.
#include "dataset/record_exchange.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include <zlib.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "measure/measure_result.h"
#include "nlohmann/json.hpp"

namespace tune::dataset {
namespace {

using Json = nlohmann::ordered_json;

// Parses `text` keeping key order; nullopt (and the reason in `why`) when it is not JSON.
std::optional<Json> ParseJson(std::string_view text, std::string* why) {
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    std::string message = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " prefix.
    if (size_t bracket = message.find("] "); !message.empty() && message[0] == '[' && bracket != std::string::npos) {
      message = message.substr(bracket + 2);
    }
    if (why != nullptr) *why = message;
    return std::nullopt;
  }
}

// The stored JSON text `text` as an object, or DataLoss naming `what`.
absl::StatusOr<Json> StoredObject(const std::string& text, const char* what, int64_t record_id) {
  std::optional<Json> value = ParseJson(text, nullptr);
  if (!value.has_value() || !value->is_object()) {
    return absl::DataLossError(absl::StrCat("record ", record_id, ": the stored ", what, " is not a JSON object"));
  }
  return *std::move(value);
}

absl::Status Invalid(const std::string& why) { return absl::InvalidArgumentError(why); }

// Typed access to the fields of one object, with messages naming the field's path ("task.flops").
class Fields {
 public:
  Fields(const Json& object, std::string prefix) : object_(object), prefix_(std::move(prefix)) {}

  absl::StatusOr<const Json*> Get(const char* key) const {
    auto it = object_.find(key);
    if (it == object_.end()) return Invalid(absl::StrCat("missing field '", Name(key), "'"));
    return &*it;
  }
  absl::StatusOr<std::string> String(const char* key, bool non_empty = false) const {
    absl::StatusOr<const Json*> value = Get(key);
    if (!value.ok()) return value.status();
    if (!(*value)->is_string()) return Invalid(absl::StrCat("field '", Name(key), "' must be a string"));
    std::string text = (*value)->get<std::string>();
    if (non_empty && text.empty()) return Invalid(absl::StrCat("field '", Name(key), "' must not be empty"));
    return text;
  }
  // A finite number >= `min` (> `min` when `strictly`).
  absl::StatusOr<double> Number(const char* key, double min = 0, bool strictly = false) const {
    absl::StatusOr<const Json*> value = Get(key);
    if (!value.ok()) return value.status();
    if (!(*value)->is_number()) return Invalid(absl::StrCat("field '", Name(key), "' must be a number"));
    const double v = (*value)->get<double>();
    if (!std::isfinite(v) || v < min || (strictly && v == min)) {
      return Invalid(absl::StrCat("field '", Name(key), "' must be ", strictly ? "> " : ">= ", min, ", not ",
                                  (*value)->dump()));
    }
    return v;
  }
  // An integer in [0, max].
  absl::StatusOr<uint64_t> Unsigned(const char* key, uint64_t max) const {
    absl::StatusOr<const Json*> value = Get(key);
    if (!value.ok()) return value.status();
    if (!(*value)->is_number_integer()) {
      return Invalid(absl::StrCat("field '", Name(key), "' must be an integer"));
    }
    if ((*value)->is_number_unsigned()) {
      const uint64_t v = (*value)->get<uint64_t>();
      if (v <= max) return v;
    } else if ((*value)->get<int64_t>() >= 0 && static_cast<uint64_t>((*value)->get<int64_t>()) <= max) {
      return static_cast<uint64_t>((*value)->get<int64_t>());
    }
    return Invalid(absl::StrCat("field '", Name(key), "' must be between 0 and ", max, ", not ", (*value)->dump()));
  }
  // A JSON object, returned as its compact text in its own key order.
  absl::StatusOr<std::string> Object(const char* key) const {
    absl::StatusOr<const Json*> value = Get(key);
    if (!value.ok()) return value.status();
    if (!(*value)->is_object()) return Invalid(absl::StrCat("field '", Name(key), "' must be a JSON object"));
    return (*value)->dump();
  }
  std::string Name(const char* key) const { return prefix_.empty() ? key : absl::StrCat(prefix_, ".", key); }

 private:
  const Json& object_;
  std::string prefix_;
};

absl::StatusOr<TaskInfo> ReadTask(const Fields& record) {
  absl::StatusOr<const Json*> value = record.Get("task");
  if (!value.ok()) return value.status();
  if (!(*value)->is_object()) return Invalid("field 'task' must be a JSON object");
  Fields f(**value, "task");
  TaskInfo task;
  absl::StatusOr<std::string> key = f.String("workload_key", true);
  if (!key.ok()) return key.status();
  absl::StatusOr<std::string> op = f.String("op", true);
  if (!op.ok()) return op.status();
  absl::StatusOr<std::string> shape = f.Object("shape");
  if (!shape.ok()) return shape.status();
  absl::StatusOr<double> flops = f.Number("flops");
  if (!flops.ok()) return flops.status();
  absl::StatusOr<uint64_t> version = f.Unsigned("template_version", std::numeric_limits<int>::max());
  if (!version.ok()) return version.status();
  return TaskInfo{0, *key, *op, *shape, *flops, static_cast<int>(*version)};
}

absl::StatusOr<TargetInfo> ReadTarget(const Fields& record) {
  absl::StatusOr<const Json*> value = record.Get("target");
  if (!value.ok()) return value.status();
  if (!(*value)->is_object()) return Invalid("field 'target' must be a JSON object");
  Fields f(**value, "target");
  absl::StatusOr<std::string> key = f.String("key", true);
  if (!key.ok()) return key.status();
  absl::StatusOr<std::string> description = f.Object("description");
  if (!description.ok()) return description.status();
  return TargetInfo{0, *key, *description};
}

absl::StatusOr<std::optional<RunInfo>> ReadRun(const Fields& record) {
  absl::StatusOr<const Json*> value = record.Get("run");
  if (!value.ok()) return value.status();
  if ((*value)->is_null()) return std::optional<RunInfo>();
  if (!(*value)->is_object()) return Invalid("field 'run' must be null or a JSON object");
  Fields f(**value, "run");
  RunInfo run;
  absl::StatusOr<std::string> text = f.String("command");
  if (!text.ok()) return text.status();
  run.command = *text;
  if (text = f.String("target_key"); !text.ok()) return text.status();
  run.target_key = *text;
  if (text = f.String("status"); !text.ok()) return text.status();
  run.status = *text;
  if (run.status != "running" && run.status != "finished" && run.status != "interrupted" && run.status != "failed" &&
      run.status != "stale") {
    return Invalid(absl::StrCat("field 'run.status' is '", run.status,
                                "': expected running, finished, interrupted, failed or stale"));
  }
  if (text = f.String("host"); !text.ok()) return text.status();
  run.host = *text;
  if (text = f.String("message"); !text.ok()) return text.status();
  run.message = *text;
  absl::StatusOr<uint64_t> pid = f.Unsigned("pid", std::numeric_limits<int64_t>::max());
  if (!pid.ok()) return pid.status();
  run.pid = static_cast<int64_t>(*pid);
  for (auto [key, out] : {std::pair<const char*, double*>{"started", &run.started}, {"finished", &run.finished},
                          {"heartbeat", &run.heartbeat}}) {
    absl::StatusOr<double> v = f.Number(key);
    if (!v.ok()) return v.status();
    *out = *v;
  }
  return std::optional<RunInfo>(std::move(run));
}

absl::StatusOr<PortableRecord> ParseRecord(const Json& json) {
  if (!json.is_object()) return Invalid("a record must be a JSON object");
  Fields f(json, "");
  absl::StatusOr<std::string> format = f.String("format");
  if (!format.ok()) return format.status();
  if (*format != kRecordsFormat) {
    return Invalid(absl::StrCat("format '", *format, "' is not one this build reads (", kRecordsFormat, ")"));
  }
  PortableRecord out;
  absl::StatusOr<TaskInfo> task = ReadTask(f);
  if (!task.ok()) return task.status();
  out.task = *std::move(task);
  absl::StatusOr<TargetInfo> target = ReadTarget(f);
  if (!target.ok()) return target.status();
  out.target = *std::move(target);
  absl::StatusOr<std::optional<RunInfo>> run = ReadRun(f);
  if (!run.ok()) return run.status();
  out.run = *std::move(run);

  Record& r = out.record;
  absl::StatusOr<std::string> text = f.Object("config");
  if (!text.ok()) return text.status();
  r.config_json = *text;
  absl::StatusOr<uint64_t> index = f.Unsigned("config_index", std::numeric_limits<int64_t>::max());
  if (!index.ok()) return index.status();
  r.config_index = *index;
  if (text = f.String("strategy", true); !text.ok()) return text.status();
  r.strategy = *text;
  if (text = f.Object("protocol"); !text.ok()) return text.status();
  r.protocol_json = *text;
  if (absl::StatusOr<measure::MeasureProtocol> protocol = measure::MeasureProtocol::FromJson(r.protocol_json);
      !protocol.ok()) {
    return Invalid(absl::StrCat("field 'protocol': ", protocol.status().message()));
  }
  if (text = f.String("status"); !text.ok()) return text.status();
  absl::StatusOr<measure::MeasureStatus> status = measure::ParseStatusName(*text);
  if (!status.ok()) return Invalid(absl::StrCat("field 'status': ", status.status().message()));
  r.result.status = *status;
  if (text = f.String("message"); !text.ok()) return text.status();
  r.result.message = *text;

  absl::StatusOr<const Json*> samples = f.Get("samples_s");
  if (!samples.ok()) return samples.status();
  if (!(*samples)->is_array()) return Invalid("field 'samples_s' must be an array");
  for (size_t i = 0; i < (*samples)->size(); ++i) {
    const Json& sample = (**samples)[i];
    if (sample.is_null() && !r.result.ok()) {
      r.result.costs_s.push_back(std::numeric_limits<double>::quiet_NaN());
      continue;
    }
    if (!sample.is_number() || !std::isfinite(sample.get<double>()) || sample.get<double>() < 0) {
      return Invalid(absl::StrCat("field 'samples_s' [", i, "] must be a number of seconds >= 0",
                                  r.result.ok() ? " (an ok record's samples are all finite)" : "", ", not ",
                                  sample.dump()));
    }
    r.result.costs_s.push_back(sample.get<double>());
  }
  if (r.result.ok() && r.result.costs_s.empty()) return Invalid("an ok record must have at least one sample");
  absl::StatusOr<uint64_t> number = f.Unsigned("number", std::numeric_limits<int>::max());
  if (!number.ok()) return number.status();
  r.result.number = static_cast<int>(*number);
  absl::StatusOr<double> seconds = f.Number("build_s");
  if (!seconds.ok()) return seconds.status();
  r.result.build_s = *seconds;
  if (seconds = f.Number("wall_s"); !seconds.ok()) return seconds.status();
  r.result.wall_s = *seconds;
  if (seconds = f.Number("timestamp", 0, /*strictly=*/true); !seconds.ok()) return seconds.status();
  r.timestamp = *seconds;
  return out;
}

}  // namespace

absl::StatusOr<std::string> RecordToJsonLine(const PortableRecord& in) {
  const Record& r = in.record;
  absl::StatusOr<Json> shape = StoredObject(in.task.shape_json, "task shape", r.id);
  if (!shape.ok()) return shape.status();
  absl::StatusOr<Json> description = StoredObject(in.target.json, "target description", r.id);
  if (!description.ok()) return description.status();
  absl::StatusOr<Json> config = StoredObject(r.config_json, "config", r.id);
  if (!config.ok()) return config.status();
  absl::StatusOr<Json> protocol = StoredObject(r.protocol_json, "protocol", r.id);
  if (!protocol.ok()) return protocol.status();

  Json line = Json::object();
  line["format"] = kRecordsFormat;
  line["task"] = Json{{"workload_key", in.task.workload_key},
                      {"op", in.task.op},
                      {"shape", *std::move(shape)},
                      {"flops", in.task.flops},
                      {"template_version", in.task.template_version}};
  line["target"] = Json{{"key", in.target.key}, {"description", *std::move(description)}};
  if (in.run.has_value()) {
    const RunInfo& run = *in.run;
    line["run"] = Json{{"command", run.command}, {"target_key", run.target_key}, {"started", run.started},
                       {"finished", run.finished}, {"status", run.status},     {"host", run.host},
                       {"pid", run.pid},           {"heartbeat", run.heartbeat}, {"message", run.message}};
  } else {
    line["run"] = nullptr;
  }
  line["config"] = *std::move(config);
  line["config_index"] = r.config_index;
  line["strategy"] = r.strategy;
  line["protocol"] = *std::move(protocol);
  line["status"] = measure::StatusName(r.result.status);
  line["message"] = r.result.message;
  Json samples = Json::array();
  for (double c : r.result.costs_s) {
    if (std::isfinite(c)) {
      samples.push_back(c);
    } else {
      samples.push_back(nullptr);
    }
  }
  line["samples_s"] = std::move(samples);
  line["number"] = r.result.number;
  line["build_s"] = r.result.build_s;
  line["wall_s"] = r.result.wall_s;
  line["timestamp"] = r.timestamp;
  // Invalid UTF-8 in a message (a compiler's output) is replaced rather than refused.
  return line.dump(-1, ' ', false, Json::error_handler_t::replace);
}

absl::StatusOr<PortableRecord> RecordFromJsonLine(std::string_view line) {
  std::string why;
  std::optional<Json> json = ParseJson(line, &why);
  if (!json.has_value()) return Invalid(absl::StrCat("not valid JSON: ", why));
  return ParseRecord(*json);
}

absl::StatusOr<std::vector<PortableRecord>> ReadRecords(std::istream& in, const std::string& name) {
  std::vector<PortableRecord> records;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    absl::StatusOr<PortableRecord> record = RecordFromJsonLine(line);
    if (!record.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(name, ":", number, ": ", record.status().message()));
    }
    record->origin = absl::StrCat(name, ":", number);
    records.push_back(*std::move(record));
  }
  if (in.bad()) return absl::UnavailableError(absl::StrCat("cannot read ", name));
  return records;
}

absl::Status ForEachRecordInFile(const std::string& path, const std::function<absl::Status(PortableRecord)>& take) {
  // zlib reads gzip and plain files alike, a line at a time.
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  std::unique_ptr<gzFile_s, int (*)(gzFile)> closer(file, gzclose);
  gzbuffer(file, 1 << 20);
  std::string line;
  int64_t number = 0;
  auto one = [&]() -> absl::Status {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) return absl::OkStatus();
    absl::StatusOr<PortableRecord> record = RecordFromJsonLine(line);
    if (!record.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", number, ": ", record.status().message()));
    }
    record->origin = absl::StrCat(path, ":", number);
    return take(*std::move(record));
  };
  char buffer[1 << 16];
  while (gzgets(file, buffer, sizeof(buffer)) != nullptr) {
    const size_t n = std::strlen(buffer);
    line.append(buffer, n);
    if (n > 0 && buffer[n - 1] == '\n') {
      line.pop_back();
      if (absl::Status s = one(); !s.ok()) return s;
      line.clear();
    }
  }
  int code = Z_OK;
  const char* why = gzerror(file, &code);
  if (code != Z_OK && code != Z_STREAM_END) {  // a corrupt or truncated gzip stream
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a readable records file (", why, ")"));
  }
  if (!line.empty()) return one();  // a last line without its newline
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PortableRecord>> ReadRecordsFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return absl::InvalidArgumentError(absl::StrCat(path, " is a directory"));
  std::vector<PortableRecord> records;
  absl::Status read = ForEachRecordInFile(path, [&](PortableRecord record) {
    records.push_back(std::move(record));
    return absl::OkStatus();
  });
  if (!read.ok()) return read;
  return records;
}

absl::Status WriteRecords(const std::vector<PortableRecord>& records, std::ostream& out) {
  for (const PortableRecord& record : records) {
    absl::StatusOr<std::string> line = RecordToJsonLine(record);
    if (!line.ok()) return line.status();
    out << *line << '\n';
    if (!out) return absl::UnavailableError("cannot write the records (disk full or a closed pipe?)");
  }
  out.flush();
  if (!out) return absl::UnavailableError("cannot write the records (disk full or a closed pipe?)");
  return absl::OkStatus();
}

absl::Status WriteRecordsFile(const std::vector<PortableRecord>& records, const std::string& path) {
  const std::string temp = absl::StrCat(path, ".tmp-", ::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
    absl::Status s = WriteRecords(records, out);
    out.close();
    if (s.ok() && !out) s = absl::UnavailableError(absl::StrCat("cannot write ", path));
    if (!s.ok()) {
      std::remove(temp.c_str());
      return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temp.c_str());
    return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

}  // namespace tune::dataset
