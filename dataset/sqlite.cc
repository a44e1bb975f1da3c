// SQLite on absl::Status: connection, statements, transactions over the SQLite3 C API.
#include "dataset/sqlite.h"

#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace tune::dataset {
namespace {

// The start of `sql` on one line, for error messages.
std::string Snippet(absl::string_view sql) {
  std::string text(sql.substr(0, 60));
  for (char& c : text) {
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  }
  return text;
}

}  // namespace

absl::StatusOr<SqliteConnection> SqliteConnection::Open(const std::string& path, bool create) {
  sqlite3* db = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = SqlError(db, rc, absl::StrCat("cannot open record database '", path, "'"));
    sqlite3_close_v2(db);
    if (absl::IsInternal(s)) return absl::UnavailableError(s.message());
    return s;
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  return SqliteConnection(db);
}

SqliteConnection& SqliteConnection::operator=(SqliteConnection&& other) noexcept {
  if (this != &other) {
    if (db_ != nullptr) sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    guard_ = std::move(other.guard_);  // after the close: the old guard outlived its connection
  }
  return *this;
}

SqliteConnection::~SqliteConnection() {
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

int64_t SqliteConnection::LastInsertId() const { return sqlite3_last_insert_rowid(db_); }
int64_t SqliteConnection::Changes() const { return sqlite3_changes(db_); }

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

absl::StatusOr<Statement> Statement::Prepare(sqlite3* db, absl::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return SqlError(db, rc, absl::StrCat("preparing '", Snippet(sql), "'"));
  }
  return Statement(db, stmt);
}

absl::StatusOr<std::optional<Statement>> Statement::PrepareFirst(sqlite3* db, absl::string_view sql, size_t* used) {
  sqlite3_stmt* stmt = nullptr;
  const char* tail = nullptr;
  const int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt, &tail);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return SqlError(db, rc, absl::StrCat("preparing '", Snippet(sql), "'"));
  }
  *used = tail != nullptr ? static_cast<size_t>(tail - sql.data()) : sql.size();
  if (stmt == nullptr) return std::optional<Statement>();
  return std::optional<Statement>(Statement(db, stmt));
}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    db_ = other.db_;
    stmt_ = std::exchange(other.stmt_, nullptr);
  }
  return *this;
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

absl::Status Statement::BindInt64(int index, int64_t value) {
  return Check(sqlite3_bind_int64(stmt_, index, value), "binding");
}
absl::Status Statement::BindDouble(int index, double value) {
  return Check(sqlite3_bind_double(stmt_, index, value), "binding");
}
absl::Status Statement::BindText(int index, absl::string_view value) {
  return Check(sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
               "binding");
}
absl::Status Statement::BindNull(int index) { return Check(sqlite3_bind_null(stmt_, index), "binding"); }

absl::StatusOr<bool> Statement::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqlError(db_, rc, Context());
}

absl::Status Statement::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Statement::IsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
int64_t Statement::Int64(int column) const { return sqlite3_column_int64(stmt_, column); }
double Statement::Double(int column) const { return sqlite3_column_double(stmt_, column); }
std::string Statement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(stmt_, column));
}

std::string Statement::Context() const {
  const char* sql = sqlite3_sql(stmt_);
  return absl::StrCat("running '", Snippet(sql ? sql : ""), "'");
}

absl::Status Statement::Check(int rc, absl::string_view what) const {
  if (rc == SQLITE_OK) return absl::OkStatus();
  return SqlError(db_, rc, absl::StrCat(what, " for ", Context()));
}

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

namespace {
// Steps `sql` to its first row; Internal when there is none.
absl::StatusOr<Statement> FirstRow(sqlite3* db, absl::string_view sql) {
  absl::StatusOr<Statement> stmt = Statement::Prepare(db, sql);
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::InternalError(absl::StrCat("'", sql, "' returned no row"));
  return stmt;
}
}  // namespace

absl::StatusOr<int64_t> QueryInt(sqlite3* db, absl::string_view sql) {
  absl::StatusOr<Statement> stmt = FirstRow(db, sql);
  if (!stmt.ok()) return stmt.status();
  return stmt->Int64(0);
}

absl::StatusOr<std::string> QueryText(sqlite3* db, absl::string_view sql) {
  absl::StatusOr<Statement> stmt = FirstRow(db, sql);
  if (!stmt.ok()) return stmt.status();
  return stmt->Text(0);
}

absl::StatusOr<Transaction> Transaction::Begin(sqlite3* db) {
  if (absl::Status s = Exec(db, "BEGIN IMMEDIATE"); !s.ok()) return s;
  return Transaction(db);
}

Transaction::~Transaction() {
  // A failed statement may already have ended the transaction; only roll back an open one.
  if (db_ != nullptr && !sqlite3_get_autocommit(db_)) {
    absl::Status s = Exec(db_, "ROLLBACK");
    if (!s.ok()) spdlog::warn("record database: rollback failed: {}", std::string(s.message()));
  }
}

absl::Status Transaction::Commit() {
  absl::Status s = Exec(db_, "COMMIT");
  if (s.ok()) db_ = nullptr;
  return s;
}

}  // namespace tune::dataset
