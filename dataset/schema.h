// The record database's schema (versioned by PRAGMA user_version) and opening a file as one.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "dataset/sqlite.h"

namespace tune::dataset {

/// Version of the schema this build writes, stored in PRAGMA user_version.
inline constexpr int kSchemaVersion = 2;

/// Opens `path` (":memory:" for a private in-memory database) as a record database: an empty
/// or absent file (absent only with `create`) gets the schema in one transaction, a tune file
/// of an older schema version is upgraded in one transaction (its data kept), a tune file
/// is checked, and the connection gets foreign keys and WAL. NotFound for an absent file
/// without `create`; FailedPrecondition for a file that is not a tune database, has a newer
/// schema, or is empty without `create`; Unavailable/Internal for I/O errors. Never leaves a
/// file it created behind on failure, unless another process opened it meanwhile: each
/// connection holds a shared lock on its file (dataset/file_guard.h), and a failed creator
/// removes the file only when it can take that lock exclusively. Several processes and
/// connections may open one file, a new one included, at the same moment: they agree on its
/// schema.
absl::StatusOr<SqliteConnection> OpenWithSchema(const std::string& path, bool create);

/// Opens an existing record database of schema version kSchemaVersion for reading only: the
/// connection is PRAGMA query_only, and nothing is created, upgraded or configured. NotFound
/// for an absent file; FailedPrecondition for a file that is not a tune database (an empty
/// one included) or has another schema version; Unavailable/Internal for I/O errors.
absl::StatusOr<SqliteConnection> OpenReadOnlyWithSchema(const std::string& path);

}  // namespace tune::dataset
