// SQLite on absl::Status: a connection, prepared statements with typed binds, transactions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dataset/file_guard.h"

struct sqlite3;
struct sqlite3_stmt;

namespace tune::dataset {

/// How long a statement waits for another connection's write lock before it fails with
/// "database is locked", in ms. A daemon writes through a connection per job beside its own;
/// on a host whose cores are all busy a writer can hold the lock for seconds (an hour's soak
/// of 256 workers on two loaded cores failed a job at 5 s), and a job that fails on it loses
/// its tuning.
inline constexpr int kBusyTimeoutMs = 60000;

/// An open SQLite connection (closed when destroyed). Move-only. Thread-compatible: one
/// thread at a time, or external locking.
class SqliteConnection {
 public:
  /// Opens `path` read-write (creating it when `create`; ":memory:" is a private in-memory
  /// database) with extended result codes and a busy timeout of kBusyTimeoutMs. Unavailable when the file
  /// cannot be opened.
  static absl::StatusOr<SqliteConnection> Open(const std::string& path, bool create);

  SqliteConnection(SqliteConnection&& other) noexcept
      : guard_(std::move(other.guard_)), db_(std::exchange(other.db_, nullptr)) {}
  SqliteConnection& operator=(SqliteConnection&& other) noexcept;
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;
  ~SqliteConnection();

  sqlite3* get() const { return db_; }
  /// The rowid of the last successful INSERT on this connection.
  int64_t LastInsertId() const;
  /// Rows changed by the last INSERT, UPDATE or DELETE.
  int64_t Changes() const;
  /// Keeps `guard` (the file's shared lock, dataset/file_guard.h) until the connection closes;
  /// it is released after the connection.
  void Hold(FileGuard guard) { guard_ = std::move(guard); }

 private:
  explicit SqliteConnection(sqlite3* db) : db_(db) {}
  std::optional<FileGuard> guard_;  // declared first: destroyed after the connection is closed
  sqlite3* db_;
};

/// An SQLite result code as a Status carrying SQLite's message after `context`: Unavailable
/// for busy/locked/I/O, InvalidArgument for constraint violations, FailedPrecondition for a
/// file that is not a database, DataLoss for corruption, Internal otherwise.
absl::Status SqlError(sqlite3* db, int rc, absl::string_view context);

/// One prepared statement (finalized when destroyed). Binding indices and columns are as in
/// SQLite: bind from 1, columns from 0. Move-only; used on its connection's thread.
class Statement {
 public:
  static absl::StatusOr<Statement> Prepare(sqlite3* db, absl::string_view sql);
  /// Prepares the first statement of `sql`, setting `*used` to the characters it spans;
  /// nullopt when `sql` holds no statement.
  static absl::StatusOr<std::optional<Statement>> PrepareFirst(sqlite3* db, absl::string_view sql, size_t* used);

  Statement(Statement&& other) noexcept : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)) {}
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  absl::Status BindInt64(int index, int64_t value);
  absl::Status BindDouble(int index, double value);
  absl::Status BindText(int index, absl::string_view value);
  absl::Status BindNull(int index);

  /// Binds `values` to ?1, ?2, ... in order: integers as INTEGER, floating point as REAL,
  /// strings as TEXT, an empty std::optional as NULL. The first failure is returned.
  template <typename... Values>
  absl::Status Bind(const Values&... values) {
    absl::Status status;
    int index = 0;
    ((status.ok() ? (void)(status = BindOne(++index, values)) : (void)0), ...);
    return status;
  }

  /// Advances; true when a row is available, false when the statement is done.
  absl::StatusOr<bool> Step();
  /// Steps until done, ignoring any rows (for statements run for their effect).
  absl::Status Run();
  /// Makes the statement ready to run again with new bindings.
  void Reset();

  bool IsNull(int column) const;
  int64_t Int64(int column) const;
  double Double(int column) const;
  std::string Text(int column) const;

 private:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}

  template <typename T>
  absl::Status BindOne(int index, const T& value) {
    if constexpr (std::is_integral_v<T>) {
      return BindInt64(index, static_cast<int64_t>(value));
    } else if constexpr (std::is_floating_point_v<T>) {
      return BindDouble(index, value);
    } else if constexpr (std::is_convertible_v<const T&, absl::string_view>) {
      return BindText(index, value);
    } else {
      return value.has_value() ? BindOne(index, *value) : BindNull(index);
    }
  }

  std::string Context() const;
  absl::Status Check(int rc, absl::string_view what) const;

  sqlite3* db_;
  sqlite3_stmt* stmt_;
};

namespace internal {
template <typename T>
struct RowOf {
  using type = T;
};
template <typename T>
struct RowOf<absl::StatusOr<T>> {
  using type = T;
};
}  // namespace internal

/// Steps `stmt` to its end and returns `read(stmt)` of every row. `read` returns a value, or
/// an absl::StatusOr of one (the first error ends the read).
template <typename Read,
          typename Row = typename internal::RowOf<std::invoke_result_t<Read, const Statement&>>::type>
absl::StatusOr<std::vector<Row>> ReadRows(Statement& stmt, Read read) {
  std::vector<Row> rows;
  while (true) {
    absl::StatusOr<bool> more = stmt.Step();
    if (!more.ok()) return more.status();
    if (!*more) return rows;
    if constexpr (std::is_same_v<std::invoke_result_t<Read, const Statement&>, Row>) {
      rows.push_back(read(stmt));
    } else {
      absl::StatusOr<Row> row = read(stmt);
      if (!row.ok()) return row.status();
      rows.push_back(*std::move(row));
    }
  }
}

/// `read(stmt)` of the first row, nullopt when there is none.
template <typename Read, typename Row = std::invoke_result_t<Read, const Statement&>>
absl::StatusOr<std::optional<Row>> ReadFirstRow(Statement& stmt, Read read) {
  absl::StatusOr<bool> row = stmt.Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<Row>();
  return std::optional<Row>(read(stmt));
}

/// Prepares `sql` and binds `values` to it (as Statement::Bind does).
template <typename... Values>
absl::StatusOr<Statement> PrepareBound(sqlite3* db, absl::string_view sql, const Values&... values) {
  absl::StatusOr<Statement> stmt = Statement::Prepare(db, sql);
  if (!stmt.ok()) return stmt;
  if (absl::Status s = stmt->Bind(values...); !s.ok()) return s;
  return stmt;
}

/// Runs each ';'-separated statement of `sql` in turn, each through a prepared statement.
absl::Status Exec(sqlite3* db, absl::string_view sql);

/// The first column of the one row `sql` returns; Internal when it returns no row.
absl::StatusOr<int64_t> QueryInt(sqlite3* db, absl::string_view sql);
absl::StatusOr<std::string> QueryText(sqlite3* db, absl::string_view sql);

/// BEGIN IMMEDIATE ... COMMIT; rolls back when destroyed uncommitted. Move-only.
class Transaction {
 public:
  static absl::StatusOr<Transaction> Begin(sqlite3* db);
  Transaction(Transaction&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  absl::Status Commit();

 private:
  explicit Transaction(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

}  // namespace tune::dataset
