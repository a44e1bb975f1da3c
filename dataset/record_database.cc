// RecordDatabase on the SQLite3 C API: schema, open/validation, inserts and best-record queries.
#include "dataset/record_database.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace tune::dataset {
namespace {

// Version of the schema below, stored in PRAGMA user_version. Bump it with a migration.
constexpr int kSchemaVersion = 1;

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
  status TEXT NOT NULL
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

constexpr const char* kRecordColumns =
    "id, task_id, target_id, run_id, config_json, config_index, strategy, protocol_json, "
    "status, message, costs_json, number, build_s, wall_s, timestamp";

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The start of `sql` on one line, for error messages.
std::string Snippet(absl::string_view sql) {
  std::string text(sql.substr(0, 60));
  for (char& c : text) {
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  }
  return text;
}

// Maps an SQLite result code to a Status carrying SQLite's own message.
absl::Status SqlError(sqlite3* db, int rc, absl::string_view context) {
  const char* message = nullptr;
  if (db != nullptr && sqlite3_extended_errcode(db) == rc) message = sqlite3_errmsg(db);
  if (message == nullptr) message = sqlite3_errstr(rc);
  std::string text = absl::StrCat(context, ": ", message);
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_FULL:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_PROTOCOL:
      return absl::UnavailableError(text);
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
    case SQLITE_TOOBIG:
      return absl::InvalidArgumentError(text);
    case SQLITE_NOTADB:
      return absl::FailedPreconditionError(text);
    case SQLITE_CORRUPT:
      return absl::DataLossError(text);
    default:
      return absl::InternalError(text);
  }
}

// RAII wrapper around one prepared statement. Binding indices and columns are as in SQLite
// (bind from 1, columns from 0).
class Statement {
 public:
  static absl::StatusOr<Statement> Prepare(sqlite3* db, absl::string_view sql) {
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt,
                                      nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(stmt);
      return SqlError(db, rc, absl::StrCat("preparing '", Snippet(sql), "'"));
    }
    return Statement(db, stmt);
  }
  /// Prepares the first statement of `sql`, setting `*used` to the characters it spans;
  /// nullopt when `sql` holds no statement.
  static absl::StatusOr<std::optional<Statement>> PrepareFirst(sqlite3* db,
                                                               absl::string_view sql,
                                                               size_t* used) {
    sqlite3_stmt* stmt = nullptr;
    const char* tail = nullptr;
    const int rc =
        sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt, &tail);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(stmt);
      return SqlError(db, rc, absl::StrCat("preparing '", Snippet(sql), "'"));
    }
    *used = tail != nullptr ? static_cast<size_t>(tail - sql.data()) : sql.size();
    if (stmt == nullptr) return std::optional<Statement>();
    return std::optional<Statement>(Statement(db, stmt));
  }

  Statement(Statement&& other) noexcept
      : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)) {}
  Statement& operator=(Statement&& other) noexcept {
    if (this != &other) {
      sqlite3_finalize(stmt_);
      db_ = other.db_;
      stmt_ = std::exchange(other.stmt_, nullptr);
    }
    return *this;
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() { sqlite3_finalize(stmt_); }

  absl::Status BindInt64(int index, int64_t value) {
    return Check(sqlite3_bind_int64(stmt_, index, value), "binding");
  }
  absl::Status BindDouble(int index, double value) {
    return Check(sqlite3_bind_double(stmt_, index, value), "binding");
  }
  absl::Status BindText(int index, absl::string_view value) {
    return Check(sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT,
                                     SQLITE_UTF8),
                 "binding");
  }
  absl::Status BindNull(int index) { return Check(sqlite3_bind_null(stmt_, index), "binding"); }

  /// Advances; true when a row is available, false when the statement is done.
  absl::StatusOr<bool> Step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqlError(db_, rc, Context());
  }
  /// Steps until done, ignoring any rows (for statements run for their effect).
  absl::Status Run() {
    while (true) {
      absl::StatusOr<bool> row = Step();
      if (!row.ok()) return row.status();
      if (!*row) return absl::OkStatus();
    }
  }
  /// Makes the statement ready to run again with new bindings.
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  bool IsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  int64_t Int64(int column) const { return sqlite3_column_int64(stmt_, column); }
  double Double(int column) const { return sqlite3_column_double(stmt_, column); }
  std::string Text(int column) const {
    const unsigned char* text = sqlite3_column_text(stmt_, column);
    if (text == nullptr) return "";
    return std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(stmt_, column));
  }

 private:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}

  std::string Context() const {
    const char* sql = sqlite3_sql(stmt_);
    return absl::StrCat("running '", Snippet(sql ? sql : ""), "'");
  }
  absl::Status Check(int rc, absl::string_view what) const {
    if (rc == SQLITE_OK) return absl::OkStatus();
    return SqlError(db_, rc, absl::StrCat(what, " for ", Context()));
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_;
};

// Runs each ';'-separated statement of `sql` in turn, each through a prepared statement.
absl::Status Exec(sqlite3* db, absl::string_view sql) {
  while (true) {
    size_t used = 0;
    absl::StatusOr<std::optional<Statement>> stmt = Statement::PrepareFirst(db, sql, &used);
    if (!stmt.ok()) return stmt.status();
    if (!stmt->has_value()) return absl::OkStatus();  // only whitespace or comments left
    if (absl::Status s = (*stmt)->Run(); !s.ok()) return s;
    sql.remove_prefix(used);
  }
}

// Reads a single integer or text value from a one-row query.
absl::StatusOr<int64_t> QueryInt(sqlite3* db, absl::string_view sql) {
  absl::StatusOr<Statement> stmt = Statement::Prepare(db, sql);
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::InternalError(absl::StrCat("'", sql, "' returned no row"));
  return stmt->Int64(0);
}

absl::StatusOr<std::string> QueryText(sqlite3* db, absl::string_view sql) {
  absl::StatusOr<Statement> stmt = Statement::Prepare(db, sql);
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::InternalError(absl::StrCat("'", sql, "' returned no row"));
  return stmt->Text(0);
}

// BEGIN IMMEDIATE ... COMMIT; rolls back when destroyed uncommitted.
class Transaction {
 public:
  static absl::StatusOr<Transaction> Begin(sqlite3* db) {
    if (absl::Status s = Exec(db, "BEGIN IMMEDIATE"); !s.ok()) return s;
    return Transaction(db);
  }
  Transaction(Transaction&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  ~Transaction() {
    // A failed statement may already have ended the transaction; only roll back an open one.
    if (db_ != nullptr && !sqlite3_get_autocommit(db_)) {
      absl::Status s = Exec(db_, "ROLLBACK");
      if (!s.ok()) spdlog::warn("record database: rollback failed: {}", std::string(s.message()));
    }
  }
  absl::Status Commit() {
    absl::Status s = Exec(db_, "COMMIT");
    if (s.ok()) db_ = nullptr;
    return s;
  }

 private:
  explicit Transaction(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

std::string CostsToJson(const std::vector<double>& costs) {
  nlohmann::json array = nlohmann::json::array();
  for (double c : costs) {
    if (std::isfinite(c)) {
      array.push_back(c);
    } else {
      array.push_back(nullptr);  // JSON has no inf/nan; read back as NaN
    }
  }
  return array.dump();
}

absl::StatusOr<std::vector<double>> CostsFromJson(const std::string& text) {
  nlohmann::json array = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (array.is_discarded() || !array.is_array()) {
    return absl::DataLossError(absl::StrCat("record costs are not a JSON array: ", text));
  }
  std::vector<double> costs;
  costs.reserve(array.size());
  for (const nlohmann::json& value : array) {
    if (value.is_number()) {
      costs.push_back(value.get<double>());
    } else if (value.is_null()) {
      costs.push_back(std::numeric_limits<double>::quiet_NaN());
    } else {
      return absl::DataLossError(absl::StrCat("record costs hold a non-number: ", text));
    }
  }
  return costs;
}

// Reads one row selected with kRecordColumns.
absl::StatusOr<Record> ReadRecord(const Statement& stmt) {
  Record record;
  record.id = stmt.Int64(0);
  record.task_id = stmt.Int64(1);
  record.target_id = stmt.Int64(2);
  record.run_id = stmt.IsNull(3) ? 0 : stmt.Int64(3);
  record.config_json = stmt.Text(4);
  record.config_index = static_cast<uint64_t>(stmt.Int64(5));
  record.strategy = stmt.Text(6);
  record.protocol_json = stmt.Text(7);
  absl::StatusOr<measure::MeasureStatus> status = measure::ParseStatusName(stmt.Text(8));
  if (!status.ok()) {
    return absl::DataLossError(
        absl::StrCat("record ", record.id, " has a bad status: ", status.status().message()));
  }
  record.result.status = *status;
  record.result.message = stmt.Text(9);
  absl::StatusOr<std::vector<double>> costs = CostsFromJson(stmt.Text(10));
  if (!costs.ok()) return costs.status();
  record.result.costs_s = *std::move(costs);
  record.result.number = static_cast<int>(stmt.Int64(11));
  record.result.build_s = stmt.Double(12);
  record.result.wall_s = stmt.Double(13);
  record.timestamp = stmt.Double(14);
  return record;
}

absl::StatusOr<std::vector<Record>> ReadRecords(Statement& stmt) {
  std::vector<Record> records;
  while (true) {
    absl::StatusOr<bool> row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) return records;
    absl::StatusOr<Record> record = ReadRecord(stmt);
    if (!record.ok()) return record.status();
    records.push_back(*std::move(record));
  }
}

TaskInfo ReadTask(const Statement& stmt) {
  TaskInfo task;
  task.id = stmt.Int64(0);
  task.workload_key = stmt.Text(1);
  task.op = stmt.Text(2);
  task.shape_json = stmt.Text(3);
  task.flops = stmt.Double(4);
  task.template_version = static_cast<int>(stmt.Int64(5));
  return task;
}

TargetInfo ReadTarget(const Statement& stmt) {
  TargetInfo target;
  target.id = stmt.Int64(0);
  target.key = stmt.Text(1);
  target.json = stmt.Text(2);
  return target;
}

// Removes a database file this process created, with the side files SQLite may have made.
void RemoveCreatedFile(const std::string& path) {
  for (const char* suffix : {"", "-journal", "-wal", "-shm"}) {
    std::error_code ignored;
    std::filesystem::remove(path + suffix, ignored);
  }
}

// What an opened file holds, judged by reading only.
enum class Contents { kEmpty, kTune, kForeign };

// Classifies the open database without writing to it. FailedPrecondition for a newer schema.
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

// Opens `path` with `flags`; the handle is closed on failure.
absl::StatusOr<sqlite3*> OpenHandle(const std::string& path, int flags) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = SqlError(db, rc, absl::StrCat("cannot open record database '", path, "'"));
    sqlite3_close_v2(db);
    if (absl::IsInternal(s)) return absl::UnavailableError(s.message());
    return s;
  }
  sqlite3_extended_result_codes(db, 1);
  return db;
}

// Turns on the connection settings; only called once the file is known to be ours.
absl::Status Configure(sqlite3* db, bool in_memory) {
  if (absl::Status s = Exec(db, "PRAGMA foreign_keys = ON"); !s.ok()) return s;
  if (absl::Status s = Exec(db, "PRAGMA synchronous = NORMAL"); !s.ok()) return s;
  if (in_memory) return absl::OkStatus();
  absl::StatusOr<std::string> mode = QueryText(db, "PRAGMA journal_mode = WAL");
  if (!mode.ok()) return mode.status();
  if (*mode != "wal") {
    spdlog::warn("record database: journal mode is '{}', not 'wal' (file system without "
                 "shared memory?)",
                 *mode);
  }
  return absl::OkStatus();
}

}  // namespace

struct RecordDatabase::Impl {
  sqlite3* db = nullptr;
  std::string path;

  ~Impl() {
    if (db != nullptr) sqlite3_close_v2(db);
  }
};

RecordDatabase::RecordDatabase(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RecordDatabase::~RecordDatabase() = default;

absl::StatusOr<std::unique_ptr<RecordDatabase>> RecordDatabase::Open(const std::string& path,
                                                                     bool create) {
  if (path.empty()) return absl::InvalidArgumentError("record database path is empty");
  const bool in_memory = path == ":memory:";
  constexpr int kFlags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;

  // Create the file ourselves (O_EXCL) so that we know whether it is ours to delete on failure.
  bool created_file = false;
  if (!in_memory) {
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
  }

  auto fail = [&](absl::Status status) -> absl::Status {
    if (created_file) RemoveCreatedFile(path);
    return status;
  };

  auto impl = std::make_unique<Impl>();
  impl->path = path;
  {
    absl::StatusOr<sqlite3*> db =
        OpenHandle(path, in_memory ? kFlags | SQLITE_OPEN_CREATE : kFlags);
    if (!db.ok()) return fail(db.status());
    impl->db = *db;
  }
  sqlite3_busy_timeout(impl->db, 5000);

  absl::StatusOr<Contents> contents = Inspect(impl->db, path);
  if (!contents.ok()) {
    impl.reset();
    return fail(contents.status());
  }
  if (*contents == Contents::kForeign) {
    impl.reset();
    return fail(NotTuneDatabase(path));
  }
  if (*contents == Contents::kEmpty) {
    if (!create && !in_memory) {
      return absl::FailedPreconditionError(absl::StrCat(
          "'", path, "' is an empty file, not a tune database (a tuning run initializes it)"));
    }
    if (absl::Status s = CreateSchema(impl->db, path); !s.ok()) {
      impl.reset();
      return fail(s);
    }
  }
  if (absl::Status s = Configure(impl->db, in_memory); !s.ok()) {
    impl.reset();
    return fail(s);
  }
  return std::unique_ptr<RecordDatabase>(new RecordDatabase(std::move(impl)));
}

absl::StatusOr<int64_t> RecordDatabase::UpsertTask(const TaskInfo& task) {
  sqlite3* db = impl_->db;
  {
    absl::StatusOr<Statement> insert = Statement::Prepare(
        db,
        "INSERT INTO tasks(workload_key, op, shape_json, flops, template_version, created) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(workload_key, template_version) DO NOTHING");
    if (!insert.ok()) return insert.status();
    for (absl::Status s :
         {insert->BindText(1, task.workload_key), insert->BindText(2, task.op),
          insert->BindText(3, task.shape_json), insert->BindDouble(4, task.flops),
          insert->BindInt64(5, task.template_version), insert->BindDouble(6, NowSeconds())}) {
      if (!s.ok()) return s;
    }
    if (absl::Status s = insert->Run(); !s.ok()) return s;
  }
  absl::StatusOr<std::optional<TaskInfo>> found = FindTask(task.workload_key,
                                                           task.template_version);
  if (!found.ok()) return found.status();
  if (!found->has_value()) {
    return absl::InternalError(absl::StrCat("task '", task.workload_key, "' vanished after insert"));
  }
  return (*found)->id;
}

absl::StatusOr<int64_t> RecordDatabase::UpsertTarget(const TargetInfo& target) {
  sqlite3* db = impl_->db;
  {
    absl::StatusOr<Statement> insert = Statement::Prepare(
        db,
        "INSERT INTO targets(key, json, created) VALUES (?1, ?2, ?3) "
        "ON CONFLICT(key) DO NOTHING");
    if (!insert.ok()) return insert.status();
    for (absl::Status s : {insert->BindText(1, target.key), insert->BindText(2, target.json),
                           insert->BindDouble(3, NowSeconds())}) {
      if (!s.ok()) return s;
    }
    if (absl::Status s = insert->Run(); !s.ok()) return s;
  }
  absl::StatusOr<std::optional<TargetInfo>> found = FindTarget(target.key);
  if (!found.ok()) return found.status();
  if (!found->has_value()) {
    return absl::InternalError(absl::StrCat("target '", target.key, "' vanished after insert"));
  }
  return (*found)->id;
}

absl::StatusOr<int64_t> RecordDatabase::StartRun(const std::string& command,
                                                 const std::string& target_key) {
  sqlite3* db = impl_->db;
  absl::StatusOr<Statement> insert = Statement::Prepare(
      db,
      "INSERT INTO runs(command, target_key, started, finished, status) "
      "VALUES (?1, ?2, ?3, 0, 'running')");
  if (!insert.ok()) return insert.status();
  for (absl::Status s : {insert->BindText(1, command), insert->BindText(2, target_key),
                         insert->BindDouble(3, NowSeconds())}) {
    if (!s.ok()) return s;
  }
  if (absl::Status s = insert->Run(); !s.ok()) return s;
  return sqlite3_last_insert_rowid(db);
}

absl::Status RecordDatabase::FinishRun(int64_t run_id, const std::string& status) {
  if (status != "finished" && status != "interrupted") {
    return absl::InvalidArgumentError("a run ends 'finished' or 'interrupted', not '" + status + "'");
  }
  sqlite3* db = impl_->db;
  absl::StatusOr<Statement> update = Statement::Prepare(
      db, "UPDATE runs SET finished = ?1, status = ?3 WHERE id = ?2");
  if (!update.ok()) return update.status();
  for (absl::Status s : {update->BindDouble(1, NowSeconds()), update->BindInt64(2, run_id), update->BindText(3, status)}) {
    if (!s.ok()) return s;
  }
  if (absl::Status s = update->Run(); !s.ok()) return s;
  if (sqlite3_changes(db) == 0) {
    return absl::NotFoundError(absl::StrCat("no run with id ", run_id));
  }
  return absl::OkStatus();
}

absl::Status RecordDatabase::AddRecords(std::vector<Record>& records) {
  if (records.empty()) return absl::OkStatus();
  sqlite3* db = impl_->db;
  absl::StatusOr<Transaction> txn = Transaction::Begin(db);
  if (!txn.ok()) return txn.status();
  absl::StatusOr<Statement> insert = Statement::Prepare(
      db,
      "INSERT INTO records(task_id, target_id, run_id, config_json, config_index, strategy, "
      "protocol_json, status, message, costs_json, number, median_s, mean_s, build_s, wall_s, "
      "timestamp) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)");
  if (!insert.ok()) return insert.status();

  // Ids and timestamps reach the caller's records only once the batch has committed.
  std::vector<int64_t> ids;
  std::vector<double> timestamps;
  ids.reserve(records.size());
  timestamps.reserve(records.size());
  const double now = NowSeconds();
  for (const Record& record : records) {
    const measure::MeasureResult& result = record.result;
    const double median = result.Median();
    const double mean = result.Mean();
    const double timestamp = record.timestamp != 0 ? record.timestamp : now;
    insert->Reset();
    for (absl::Status s : {
             insert->BindInt64(1, record.task_id),
             insert->BindInt64(2, record.target_id),
             record.run_id != 0 ? insert->BindInt64(3, record.run_id) : insert->BindNull(3),
             insert->BindText(4, record.config_json),
             insert->BindInt64(5, static_cast<int64_t>(record.config_index)),
             insert->BindText(6, record.strategy),
             insert->BindText(7, record.protocol_json),
             insert->BindText(8, measure::StatusName(result.status)),
             insert->BindText(9, result.message),
             insert->BindText(10, CostsToJson(result.costs_s)),
             insert->BindInt64(11, result.number),
             std::isfinite(median) ? insert->BindDouble(12, median) : insert->BindNull(12),
             std::isfinite(mean) ? insert->BindDouble(13, mean) : insert->BindNull(13),
             insert->BindDouble(14, result.build_s),
             insert->BindDouble(15, result.wall_s),
             insert->BindDouble(16, timestamp),
         }) {
      if (!s.ok()) return s;
    }
    if (absl::Status s = insert->Run(); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("adding record ", ids.size() + 1, " of ",
                                                 records.size(), " (task ", record.task_id,
                                                 ", target ", record.target_id, "): ",
                                                 s.message()));
    }
    ids.push_back(sqlite3_last_insert_rowid(db));
    timestamps.push_back(timestamp);
  }
  if (absl::Status s = txn->Commit(); !s.ok()) return s;
  for (size_t i = 0; i < records.size(); ++i) {
    records[i].id = ids[i];
    records[i].timestamp = timestamps[i];
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Record>> RecordDatabase::Records(int64_t task_id,
                                                            int64_t target_id) const {
  absl::StatusOr<Statement> query = Statement::Prepare(
      impl_->db, absl::StrCat("SELECT ", kRecordColumns,
                              " FROM records WHERE task_id = ?1 AND target_id = ?2 "
                              "ORDER BY timestamp, id"));
  if (!query.ok()) return query.status();
  for (absl::Status s : {query->BindInt64(1, task_id), query->BindInt64(2, target_id)}) {
    if (!s.ok()) return s;
  }
  return ReadRecords(*query);
}

absl::StatusOr<std::vector<Record>> RecordDatabase::Best(int64_t task_id, int64_t target_id,
                                                         int k) const {
  if (k <= 0) return std::vector<Record>{};
  absl::StatusOr<Statement> query = Statement::Prepare(
      impl_->db,
      absl::StrCat("SELECT ", kRecordColumns,
                   " FROM records WHERE task_id = ?1 AND target_id = ?2 AND status = 'ok' "
                   "AND median_s IS NOT NULL ORDER BY median_s, id LIMIT ?3"));
  if (!query.ok()) return query.status();
  for (absl::Status s :
       {query->BindInt64(1, task_id), query->BindInt64(2, target_id), query->BindInt64(3, k)}) {
    if (!s.ok()) return s;
  }
  return ReadRecords(*query);
}

absl::StatusOr<std::vector<TaskInfo>> RecordDatabase::Tasks() const {
  absl::StatusOr<Statement> query = Statement::Prepare(
      impl_->db,
      "SELECT id, workload_key, op, shape_json, flops, template_version FROM tasks ORDER BY id");
  if (!query.ok()) return query.status();
  std::vector<TaskInfo> tasks;
  while (true) {
    absl::StatusOr<bool> row = query->Step();
    if (!row.ok()) return row.status();
    if (!*row) return tasks;
    tasks.push_back(ReadTask(*query));
  }
}

namespace {
constexpr const char* kJobsSql =
    "CREATE TABLE IF NOT EXISTS jobs(id INTEGER PRIMARY KEY, request_json TEXT NOT NULL, "
    "state TEXT NOT NULL, message TEXT NOT NULL, submitted REAL NOT NULL, "
    "trials_done INTEGER NOT NULL DEFAULT 0, trials_total INTEGER NOT NULL DEFAULT 0)";

/// Whether the jobs table has the trial columns (tables made before them do not).
absl::StatusOr<bool> JobsHaveTrials(sqlite3* db) {
  absl::StatusOr<int64_t> n = QueryInt(db, "SELECT count(*) FROM pragma_table_info('jobs') WHERE name = 'trials_done'");
  if (!n.ok()) return n.status();
  return *n > 0;
}

/// Creates the jobs table, or adds the trial columns to one made before they existed.
absl::Status EnsureJobsTable(sqlite3* db) {
  if (absl::Status s = Exec(db, kJobsSql); !s.ok()) return s;
  absl::StatusOr<bool> has = JobsHaveTrials(db);
  if (!has.ok()) return has.status();
  if (*has) return absl::OkStatus();
  for (const char* sql : {"ALTER TABLE jobs ADD COLUMN trials_done INTEGER NOT NULL DEFAULT 0",
                          "ALTER TABLE jobs ADD COLUMN trials_total INTEGER NOT NULL DEFAULT 0"}) {
    if (absl::Status s = Exec(db, sql); !s.ok()) return s;
  }
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<int64_t> RecordDatabase::AddJob(const std::string& request_json, const std::string& state) {
  sqlite3* db = impl_->db;
  if (absl::Status s = EnsureJobsTable(db); !s.ok()) return s;
  absl::StatusOr<Statement> insert = Statement::Prepare(
      db, "INSERT INTO jobs(request_json, state, message, submitted) VALUES (?1, ?2, '', ?3)");
  if (!insert.ok()) return insert.status();
  for (absl::Status s : {insert->BindText(1, request_json), insert->BindText(2, state),
                         insert->BindDouble(3, NowSeconds())}) {
    if (!s.ok()) return s;
  }
  if (absl::Status s = insert->Run(); !s.ok()) return s;
  return sqlite3_last_insert_rowid(db);
}

absl::Status RecordDatabase::SetJobState(int64_t id, const std::string& state, const std::string& message,
                                         int64_t trials_done, int64_t trials_total) {
  sqlite3* db = impl_->db;
  if (absl::Status s = EnsureJobsTable(db); !s.ok()) return s;
  absl::StatusOr<Statement> update = Statement::Prepare(
      db, "UPDATE jobs SET state = ?1, message = ?2, trials_done = CASE WHEN ?4 >= 0 THEN ?4 ELSE trials_done END, "
          "trials_total = CASE WHEN ?5 >= 0 THEN ?5 ELSE trials_total END WHERE id = ?3");
  if (!update.ok()) return update.status();
  for (absl::Status s : {update->BindText(1, state), update->BindText(2, message), update->BindInt64(3, id),
                         update->BindInt64(4, trials_done), update->BindInt64(5, trials_total)}) {
    if (!s.ok()) return s;
  }
  return update->Run();
}

absl::StatusOr<std::vector<JobRow>> RecordDatabase::Jobs() const {
  std::vector<JobRow> jobs;
  absl::StatusOr<int64_t> has = QueryInt(impl_->db, "SELECT count(*) FROM sqlite_master WHERE name = 'jobs'");
  if (!has.ok()) return has.status();
  if (*has == 0) return jobs;
  // A jobs table from before the trial columns reads as 0 trials (nothing is altered here).
  absl::StatusOr<bool> counted = JobsHaveTrials(impl_->db);
  if (!counted.ok()) return counted.status();
  absl::StatusOr<Statement> query = Statement::Prepare(
      impl_->db, *counted ? "SELECT id, request_json, state, message, submitted, trials_done, trials_total "
                                "FROM jobs ORDER BY id"
                              : "SELECT id, request_json, state, message, submitted, 0, 0 FROM jobs ORDER BY id");
  if (!query.ok()) return query.status();
  while (true) {
    absl::StatusOr<bool> row = query->Step();
    if (!row.ok()) return row.status();
    if (!*row) return jobs;
    JobRow j;
    j.id = query->Int64(0);
    j.request_json = query->Text(1);
    j.state = query->Text(2);
    j.message = query->Text(3);
    j.submitted = query->Double(4);
    j.trials_done = query->Int64(5);
    j.trials_total = query->Int64(6);
    jobs.push_back(std::move(j));
  }
}

absl::StatusOr<std::vector<RunInfo>> RecordDatabase::Runs() const {
  absl::StatusOr<Statement> query = Statement::Prepare(
      impl_->db, "SELECT id, command, target_key, started, finished, status FROM runs ORDER BY id");
  if (!query.ok()) return query.status();
  std::vector<RunInfo> runs;
  while (true) {
    absl::StatusOr<bool> row = query->Step();
    if (!row.ok()) return row.status();
    if (!*row) return runs;
    RunInfo r;
    r.id = query->Int64(0);
    r.command = query->Text(1);
    r.target_key = query->Text(2);
    r.started = query->Double(3);
    r.finished = query->Double(4);
    r.status = query->Text(5);
    runs.push_back(std::move(r));
  }
}

absl::StatusOr<std::vector<TargetInfo>> RecordDatabase::Targets() const {
  absl::StatusOr<Statement> query =
      Statement::Prepare(impl_->db, "SELECT id, key, json FROM targets ORDER BY id");
  if (!query.ok()) return query.status();
  std::vector<TargetInfo> targets;
  while (true) {
    absl::StatusOr<bool> row = query->Step();
    if (!row.ok()) return row.status();
    if (!*row) return targets;
    targets.push_back(ReadTarget(*query));
  }
}

absl::StatusOr<std::optional<TaskInfo>> RecordDatabase::FindTask(const std::string& workload_key,
                                                                 int template_version) const {
  absl::StatusOr<Statement> query = Statement::Prepare(
      impl_->db,
      "SELECT id, workload_key, op, shape_json, flops, template_version FROM tasks "
      "WHERE workload_key = ?1 AND template_version = ?2");
  if (!query.ok()) return query.status();
  for (absl::Status s :
       {query->BindText(1, workload_key), query->BindInt64(2, template_version)}) {
    if (!s.ok()) return s;
  }
  absl::StatusOr<bool> row = query->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<TaskInfo>();
  return std::optional<TaskInfo>(ReadTask(*query));
}

absl::StatusOr<std::optional<TargetInfo>> RecordDatabase::FindTarget(
    const std::string& key) const {
  absl::StatusOr<Statement> query =
      Statement::Prepare(impl_->db, "SELECT id, key, json FROM targets WHERE key = ?1");
  if (!query.ok()) return query.status();
  if (absl::Status s = query->BindText(1, key); !s.ok()) return s;
  absl::StatusOr<bool> row = query->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<TargetInfo>();
  return std::optional<TargetInfo>(ReadTarget(*query));
}

absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> RecordDatabase::StatusCounts(
    int64_t task_id, int64_t target_id) const {
  // Sorted by status name so the output is stable.
  absl::StatusOr<Statement> query = Statement::Prepare(
      impl_->db,
      "SELECT status, count(*) FROM records WHERE (?1 = 0 OR task_id = ?1) "
      "AND (?2 = 0 OR target_id = ?2) GROUP BY status ORDER BY status");
  if (!query.ok()) return query.status();
  for (absl::Status s : {query->BindInt64(1, task_id), query->BindInt64(2, target_id)}) {
    if (!s.ok()) return s;
  }
  std::vector<std::pair<std::string, int64_t>> counts;
  while (true) {
    absl::StatusOr<bool> row = query->Step();
    if (!row.ok()) return row.status();
    if (!*row) return counts;
    counts.emplace_back(query->Text(0), query->Int64(1));
  }
}

}  // namespace tune::dataset
