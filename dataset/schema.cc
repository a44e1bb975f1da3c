// The record database's schema: creating it, recognising a tune file, the connection settings.
#include "dataset/schema.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <optional>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dataset/file_guard.h"
#include "spdlog/spdlog.h"

namespace tune::dataset {
namespace {

// The tables of schema version kSchemaVersion; a change bumps it and adds a migration
// (kMigrations) that brings a file of the previous version to the same tables.
constexpr const char* kSchemaSql = R"sql(
CREATE TABLE tasks(
  id INTEGER PRIMARY KEY,
  workload_key TEXT NOT NULL,
  op TEXT NOT NULL,
  shape_json TEXT NOT NULL,
  flops REAL NOT NULL,
  template_version INTEGER NOT NULL,
  created REAL NOT NULL,
  UNIQUE(workload_key, template_version)
);
CREATE TABLE targets(
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  json TEXT NOT NULL,
  created REAL NOT NULL
);
CREATE TABLE runs(
  id INTEGER PRIMARY KEY,
  command TEXT NOT NULL,
  target_key TEXT NOT NULL,
  started REAL NOT NULL,
  finished REAL NOT NULL DEFAULT 0,
  status TEXT NOT NULL,
  host TEXT NOT NULL DEFAULT '',
  pid INTEGER NOT NULL DEFAULT 0,
  heartbeat REAL NOT NULL DEFAULT 0,
  message TEXT NOT NULL DEFAULT ''
);
CREATE TABLE leases(
  task_id INTEGER NOT NULL REFERENCES tasks(id),
  target_id INTEGER NOT NULL REFERENCES targets(id),
  run_id INTEGER NOT NULL REFERENCES runs(id),
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  expires REAL NOT NULL,
  PRIMARY KEY(task_id, target_id)
);
CREATE TABLE records(
  id INTEGER PRIMARY KEY,
  task_id INTEGER NOT NULL REFERENCES tasks(id),
  target_id INTEGER NOT NULL REFERENCES targets(id),
  run_id INTEGER REFERENCES runs(id),
  config_json TEXT NOT NULL,
  config_index INTEGER NOT NULL,
  strategy TEXT NOT NULL,
  protocol_json TEXT NOT NULL,
  status TEXT NOT NULL,
  message TEXT NOT NULL,
  costs_json TEXT NOT NULL,
  number INTEGER NOT NULL,
  median_s REAL,
  mean_s REAL,
  build_s REAL NOT NULL,
  wall_s REAL NOT NULL,
  timestamp REAL NOT NULL
);
CREATE INDEX records_by_task_target_status_median
  ON records(task_id, target_id, status, median_s);
)sql";

// Migration i brings a file of schema version i + 1 to version i + 2.
constexpr const char* kMigrations[] = {
    // 1 -> 2: runs know their owner process and its heartbeat, and a failed run its message;
    // per-(task, target) leases keep concurrent runs on one file off each other's tasks.
    R"sql(
ALTER TABLE runs ADD COLUMN host TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN pid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN heartbeat REAL NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN message TEXT NOT NULL DEFAULT '';
CREATE TABLE leases(
  task_id INTEGER NOT NULL REFERENCES tasks(id),
  target_id INTEGER NOT NULL REFERENCES targets(id),
  run_id INTEGER NOT NULL REFERENCES runs(id),
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  expires REAL NOT NULL,
  PRIMARY KEY(task_id, target_id)
);
)sql",
};
static_assert(std::size(kMigrations) == kSchemaVersion - 1, "one migration per schema version after 1");

// Opens of a file that another process removed (or replaced) between this one's open and
// its lock, before opening the path again gives up.
constexpr int kOpenAttempts = 8;

// What an opened file holds, judged by reading only.
enum class Contents { kEmpty, kTune, kForeign };

// The schema version of an open file (PRAGMA user_version).
absl::StatusOr<int64_t> SchemaVersion(sqlite3* db) { return QueryInt(db, "PRAGMA user_version"); }

// Classifies the open database without writing to it. FailedPrecondition for a newer schema.
// A tune file of an older version is kTune (Migrate upgrades it).
absl::StatusOr<Contents> Inspect(sqlite3* db, const std::string& path) {
  absl::StatusOr<int64_t> version = QueryInt(db, "PRAGMA user_version");
  if (!version.ok()) {
    if (absl::IsFailedPrecondition(version.status()) || absl::IsDataLoss(version.status())) {
      return absl::FailedPreconditionError(
          absl::StrCat("'", path, "' is not a tune database (", version.status().message(), ")"));
    }
    return version.status();
  }
  absl::StatusOr<int64_t> objects = QueryInt(db, "SELECT count(*) FROM sqlite_master");
  if (!objects.ok()) return objects.status();
  if (*version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "'", path, "' has record database schema version ", *version,
        ", newer than this build supports (", kSchemaVersion, "); use a newer tune"));
  }
  if (*version == 0) {
    if (*objects == 0) return Contents::kEmpty;
    return Contents::kForeign;
  }
  absl::StatusOr<int64_t> tables = QueryInt(
      db,
      "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
      "('tasks', 'targets', 'runs', 'records')");
  if (!tables.ok()) return tables.status();
  return *tables == 4 ? Contents::kTune : Contents::kForeign;
}

// Inspect inside one read transaction, so that its queries see one state of the file. Run as
// separate statements they may not: a connection committing the schema of a new file between
// the version query (0) and the tables query (some) makes the file look foreign. `version`, when
// given, gets PRAGMA user_version from the same snapshot. Not for use inside a transaction.
absl::StatusOr<Contents> InspectSnapshot(sqlite3* db, const std::string& path, int64_t* version = nullptr) {
  if (absl::Status s = Exec(db, "BEGIN DEFERRED"); !s.ok()) return s;
  absl::StatusOr<Contents> contents = Inspect(db, path);
  if (contents.ok() && version != nullptr) {
    absl::StatusOr<int64_t> v = SchemaVersion(db);
    if (v.ok()) {
      *version = *v;
    } else {
      contents = v.status();
    }
  }
  if (sqlite3_get_autocommit(db) == 0) {  // an error may have ended the transaction already
    absl::Status end = Exec(db, contents.ok() ? "COMMIT" : "ROLLBACK");
    if (contents.ok() && !end.ok()) return end;
  }
  return contents;
}

absl::Status NotTuneDatabase(const std::string& path) {
  return absl::FailedPreconditionError(absl::StrCat(
      "'", path, "' is not a tune database (an SQLite file without tune's schema)"));
}

// Creates the schema in one transaction unless another connection got there first.
absl::Status CreateSchema(sqlite3* db, const std::string& path) {
  absl::StatusOr<Transaction> txn = Transaction::Begin(db);
  if (!txn.ok()) return txn.status();
  absl::StatusOr<Contents> contents = Inspect(db, path);  // re-check under the write lock
  if (!contents.ok()) return contents.status();
  if (*contents == Contents::kTune) return txn->Commit();
  if (*contents == Contents::kForeign) return NotTuneDatabase(path);
  if (absl::Status s = Exec(db, kSchemaSql); !s.ok()) return s;
  if (absl::Status s = Exec(db, absl::StrCat("PRAGMA user_version = ", kSchemaVersion));
      !s.ok()) {
    return s;
  }
  return txn->Commit();
}

// Brings a tune file of an older schema version to kSchemaVersion in one transaction, unless
// another connection got there first. Files of this version are left alone.
absl::Status Migrate(sqlite3* db, const std::string& path) {
  absl::StatusOr<int64_t> version = SchemaVersion(db);
  if (!version.ok()) return version.status();
  if (*version >= kSchemaVersion) return absl::OkStatus();
  absl::StatusOr<Transaction> txn = Transaction::Begin(db);
  if (!txn.ok()) return txn.status();
  absl::StatusOr<Contents> contents = Inspect(db, path);  // re-check under the write lock
  if (!contents.ok()) return contents.status();
  if (*contents != Contents::kTune) return NotTuneDatabase(path);
  version = SchemaVersion(db);
  if (!version.ok()) return version.status();
  for (int64_t v = *version; v < kSchemaVersion; ++v) {
    if (absl::Status s = Exec(db, kMigrations[v - 1]); !s.ok()) {
      // Tables that do not take the upgrade are not the ones tune wrote; I/O errors stay what they are.
      const bool foreign = absl::IsInternal(s) || absl::IsInvalidArgument(s);
      return absl::Status(foreign ? absl::StatusCode::kFailedPrecondition : s.code(),
                          absl::StrCat(foreign ? absl::StrCat("'", path, "' is not a tune database (") : "",
                                       "upgrading from schema version ", v, " to ", v + 1, ": ", s.message(),
                                       foreign ? ")" : ""));
    }
  }
  if (absl::Status s = Exec(db, absl::StrCat("PRAGMA user_version = ", kSchemaVersion)); !s.ok()) return s;
  if (absl::Status s = txn->Commit(); !s.ok()) return s;
  spdlog::info("record database '{}': schema upgraded from version {} to {}", path, *version, kSchemaVersion);
  return absl::OkStatus();
}

// Turns on the connection settings; only called once the file is known to be ours.
absl::Status Configure(sqlite3* db, bool in_memory) {
  if (absl::Status s = Exec(db, "PRAGMA foreign_keys = ON"); !s.ok()) return s;
  if (absl::Status s = Exec(db, "PRAGMA synchronous = NORMAL"); !s.ok()) return s;
  if (in_memory) return absl::OkStatus();
  // Switching a rollback-journal file to WAL turns this connection's read lock into a write
  // lock. Where another connection does the same at once (openers of a file just created),
  // SQLite answers SQLITE_BUSY at once rather than call the busy handler, since both waiting
  // could deadlock; so the switch is retried until the busy timeout. A file already in WAL
  // mode takes no write lock here.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  absl::StatusOr<std::string> mode = QueryText(db, "PRAGMA journal_mode = WAL");
  while (!mode.ok() && (sqlite3_extended_errcode(db) & 0xff) == SQLITE_BUSY &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    mode = QueryText(db, "PRAGMA journal_mode = WAL");
  }
  if (!mode.ok()) return mode.status();
  if (*mode != "wal") {
    spdlog::warn("record database: journal mode is '{}', not 'wal' (file system without "
                 "shared memory?)",
                 *mode);
  }
  return absl::OkStatus();
}

// Classifies a freshly opened file, creates the schema in an empty one, configures the
// connection.
absl::Status Prepare(sqlite3* db, const std::string& path, bool create, bool in_memory) {
  absl::StatusOr<Contents> contents = InspectSnapshot(db, path);
  if (!contents.ok()) return contents.status();
  if (*contents == Contents::kForeign) return NotTuneDatabase(path);
  if (*contents == Contents::kEmpty) {
    if (!create && !in_memory) {
      return absl::FailedPreconditionError(absl::StrCat(
          "'", path, "' is an empty file, not a tune database (a tuning run initializes it)"));
    }
    if (absl::Status s = CreateSchema(db, path); !s.ok()) return s;
  } else if (absl::Status s = Migrate(db, path); !s.ok()) {
    return s;
  }
  return Configure(db, in_memory);
}

}  // namespace

absl::StatusOr<SqliteConnection> OpenWithSchema(const std::string& path, bool create) {
  if (path.empty()) return absl::InvalidArgumentError("record database path is empty");
  const bool in_memory = path == ":memory:";

  // Create the file ourselves (O_EXCL) so that we know whether it is ours to delete on failure,
  // and hold a shared lock on it (FileGuard) for the connection's life, so that a creator that
  // fails removes it only when nobody else has opened it meanwhile.
  bool created_file = false;
  std::optional<FileGuard> guard;
  for (int attempt = 1; !in_memory && !guard.has_value(); ++attempt) {
    created_file = false;
    std::error_code ec;
    const bool exists = std::filesystem::exists(path, ec);
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat("cannot access record database '", path, "': ", ec.message()));
    }
    if (!exists) {
      if (!create) {
        return absl::NotFoundError(absl::StrCat("record database '", path, "' does not exist"));
      }
      const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd >= 0) {
        ::close(fd);
        created_file = true;
      } else if (errno != EEXIST) {  // EEXIST: another process just created it; open that
        return absl::UnavailableError(absl::StrCat("cannot create record database '", path,
                                                   "': ", std::strerror(errno)));
      }
    }
    absl::StatusOr<FileGuard> acquired = FileGuard::Acquire(path);
    if (acquired.ok()) {
      guard = std::move(*acquired);
    } else if (!(absl::IsNotFound(acquired.status()) || absl::IsAborted(acquired.status())) ||
               attempt == kOpenAttempts) {
      // (A file this call created and another process removed is not this call's to remove.)
      return absl::UnavailableError(
          absl::StrCat("cannot open record database '", path, "': ", acquired.status().message()));
    }
  }

  auto fail = [&](absl::Status status) -> absl::Status {
    if (created_file && guard.has_value() && !guard->RemoveIfSoleHolder()) {
      spdlog::warn("record database '{}': left in place after a failed initialization, another process has it open",
                   path);
    }
    return status;
  };

  absl::StatusOr<SqliteConnection> connection = SqliteConnection::Open(path, /*create=*/in_memory);
  if (!connection.ok()) return fail(connection.status());
  if (absl::Status s = Prepare(connection->get(), path, create, in_memory); !s.ok()) {
    connection = s;  // closed before a file it created is removed
    return fail(s);
  }
  if (guard.has_value()) connection->Hold(*std::move(guard));
  return connection;
}

absl::StatusOr<SqliteConnection> OpenReadOnlyWithSchema(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("record database path is empty");
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("cannot access record database '", path, "': ", ec.message()));
  }
  if (!exists) return absl::NotFoundError(absl::StrCat("record database '", path, "' does not exist"));
  absl::StatusOr<SqliteConnection> connection = SqliteConnection::Open(path, /*create=*/false);
  if (!connection.ok()) return connection.status();
  sqlite3* db = connection->get();
  if (absl::Status s = Exec(db, "PRAGMA query_only = ON"); !s.ok()) return s;
  int64_t version = 0;
  absl::StatusOr<Contents> contents = InspectSnapshot(db, path, &version);
  if (!contents.ok()) return contents.status();
  if (*contents != Contents::kTune) return NotTuneDatabase(path);
  if (version != kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "'", path, "' has record database schema version ", version, ", not ", kSchemaVersion,
        " (open it once with this tune, e.g. tune db stats --db ", path, ", to upgrade it)"));
  }
  return connection;
}

}  // namespace tune::dataset
