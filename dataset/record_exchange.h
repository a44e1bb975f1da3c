// Record exchange: records as a data set of JSON lines ("tune-records/1"), read back by version.
#pragma once

#include <functional>
#include <istream>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dataset/record_database.h"

namespace tune::dataset {

/// The format every line of a records file names in its "format" field. A reader refuses lines
/// of another format; a change to the fields bumps the number.
inline constexpr char kRecordsFormat[] = "tune-records/1";

/// One record as one line of JSON (no trailing newline), its fields in this order:
///   format            "tune-records/1"
///   task              {workload_key, op, shape (object), flops, template_version}
///   target            {key, description (object: measure::Target::ToJson)}
///   run               null, or the run that measured it: {command, target_key, started,
///                     finished, status, host, pid, heartbeat, message} (seconds since the epoch)
///   config            the config as a JSON object, its knobs in the order the database holds
///   config_index      search::ConfigSpace::ToIndex of the config
///   strategy          who proposed it ("random", "default", "finalist", ...)
///   protocol          measure::MeasureProtocol as a JSON object
///   status, message   the measure status name and message
///   samples_s         the raw samples (seconds per call), null for one that is not finite
///   number, build_s, wall_s, timestamp   calls per sample; build and wall seconds; when it
///                     was committed (seconds since the epoch)
/// Numbers are written in the shortest form that reads back as the same double, so every field
/// survives a round trip exactly. DataLoss when a stored JSON text (config, protocol, shape,
/// description) is not a JSON object.
absl::StatusOr<std::string> RecordToJsonLine(const PortableRecord& record);

/// Parses and checks one line written by RecordToJsonLine: every field present with its type,
/// the format, a known status, samples that are finite and >= 0 (null only outside "ok"; an "ok"
/// record has at least one), non-negative build and wall seconds, a positive timestamp, a
/// protocol measure::MeasureProtocol accepts. Fields it does not know are ignored.
/// InvalidArgument saying why (without a line number); `origin` of the result is left empty.
absl::StatusOr<PortableRecord> RecordFromJsonLine(std::string_view line);

/// Reads every line of `in` (blank lines skipped), all or nothing: the first bad line is
/// InvalidArgument "NAME:LINE: why", `name` being what the messages call the input. Each
/// record's `origin` is "NAME:LINE".
absl::StatusOr<std::vector<PortableRecord>> ReadRecords(std::istream& in, const std::string& name);
/// Calls `take` with each record of the file at `path`, plain or gzip-compressed, in order, one
/// line at a time (blank lines skipped; origin "PATH:LINE"), and stops at the first error it
/// returns. NotFound when the file cannot be opened; InvalidArgument "PATH:LINE: why" for a bad
/// line, "PATH: not a readable records file (why)" for a corrupt or truncated gzip stream.
absl::Status ForEachRecordInFile(const std::string& path, const std::function<absl::Status(PortableRecord)>& take);
/// Every record of the file at `path` (ForEachRecordInFile), all or nothing; InvalidArgument for
/// a directory.
absl::StatusOr<std::vector<PortableRecord>> ReadRecordsFile(const std::string& path);

/// Writes `records` as lines of JSON to `out`; Unavailable when the stream fails.
absl::Status WriteRecords(const std::vector<PortableRecord>& records, std::ostream& out);
/// Writes `records` to the file at `path` through a temporary file beside it that replaces it
/// only once complete: a failure leaves no partial file.
absl::Status WriteRecordsFile(const std::vector<PortableRecord>& records, const std::string& path);

}  // namespace tune::dataset
