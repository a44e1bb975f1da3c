// JobStore on its own SQLite connection: the `jobs` table, created and widened on first write.
#include "server/job_store.h"

#include <atomic>
#include <chrono>
#include <limits>
#include <mutex>

#include "dataset/schema.h"
#include "dataset/sqlite.h"

namespace tune::server {
namespace {

using dataset::Exec;
using dataset::QueryInt;
using dataset::Statement;

constexpr const char* kJobsSql =
    "CREATE TABLE IF NOT EXISTS jobs(id INTEGER PRIMARY KEY, request_json TEXT NOT NULL, "
    "state TEXT NOT NULL, message TEXT NOT NULL, submitted REAL NOT NULL, "
    "trials_done INTEGER NOT NULL DEFAULT 0, trials_total INTEGER NOT NULL DEFAULT 0)";

/// Whether the jobs table has the trial columns (tables made before them do not).
absl::StatusOr<bool> HasTrialColumns(sqlite3* db) {
  absl::StatusOr<int64_t> n =
      QueryInt(db, "SELECT count(*) FROM pragma_table_info('jobs') WHERE name = 'trials_done'");
  if (!n.ok()) return n.status();
  return *n > 0;
}

/// Creates the jobs table, or adds the trial columns to one made before they existed.
absl::Status EnsureTable(sqlite3* db) {
  if (absl::Status s = Exec(db, kJobsSql); !s.ok()) return s;
  absl::StatusOr<bool> has = HasTrialColumns(db);
  if (!has.ok()) return has.status();
  if (*has) return absl::OkStatus();
  return Exec(db,
              "ALTER TABLE jobs ADD COLUMN trials_done INTEGER NOT NULL DEFAULT 0;"
              "ALTER TABLE jobs ADD COLUMN trials_total INTEGER NOT NULL DEFAULT 0");
}

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

struct JobStore::Impl {
  std::mutex mu;
  dataset::SqliteConnection connection;  // guarded by mu
  std::atomic<int64_t> rows_read{0};

  /// The jobs with `where` (SQL over the columns, parameters ?1 and ?2 bound to `a` and `b`),
  /// oldest first. Caller holds mu.
  absl::StatusOr<std::vector<JobRow>> Select(const std::string& where, int64_t a, int64_t b);
};

JobStore::JobStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JobStore::~JobStore() = default;

absl::StatusOr<std::unique_ptr<JobStore>> JobStore::Open(const std::string& path) {
  absl::StatusOr<dataset::SqliteConnection> connection = dataset::OpenWithSchema(path, /*create=*/true);
  if (!connection.ok()) return connection.status();
  return std::unique_ptr<JobStore>(new JobStore(std::unique_ptr<Impl>(new Impl{{}, *std::move(connection)})));
}

absl::StatusOr<int64_t> JobStore::Add(const std::string& request_json, const std::string& state) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  sqlite3* db = impl_->connection.get();
  if (absl::Status s = EnsureTable(db); !s.ok()) return s;
  absl::StatusOr<Statement> insert = dataset::PrepareBound(
      db, "INSERT INTO jobs(request_json, state, message, submitted) VALUES (?1, ?2, '', ?3)", request_json,
      state, NowSeconds());
  if (!insert.ok()) return insert.status();
  if (absl::Status s = insert->Run(); !s.ok()) return s;
  return impl_->connection.LastInsertId();
}

absl::Status JobStore::SetState(int64_t id, const std::string& state, const std::string& message,
                                int64_t trials_done, int64_t trials_total) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  sqlite3* db = impl_->connection.get();
  if (absl::Status s = EnsureTable(db); !s.ok()) return s;
  absl::StatusOr<Statement> update = dataset::PrepareBound(
      db,
      "UPDATE jobs SET state = ?1, message = ?2, trials_done = CASE WHEN ?4 >= 0 THEN ?4 ELSE trials_done END, "
      "trials_total = CASE WHEN ?5 >= 0 THEN ?5 ELSE trials_total END WHERE id = ?3",
      state, message, id, trials_done, trials_total);
  if (!update.ok()) return update.status();
  return update->Run();
}

absl::StatusOr<std::vector<JobRow>> JobStore::Impl::Select(const std::string& where, int64_t a, int64_t b) {
  sqlite3* db = connection.get();
  absl::StatusOr<int64_t> has = QueryInt(db, "SELECT count(*) FROM sqlite_master WHERE name = 'jobs'");
  if (!has.ok()) return has.status();
  if (*has == 0) return std::vector<JobRow>();
  // A jobs table from before the trial columns reads as 0 trials (nothing is altered here).
  absl::StatusOr<bool> counted = HasTrialColumns(db);
  if (!counted.ok()) return counted.status();
  absl::StatusOr<Statement> query = dataset::PrepareBound(
      db,
      std::string(*counted ? "SELECT id, request_json, state, message, submitted, trials_done, trials_total "
                           : "SELECT id, request_json, state, message, submitted, 0, 0 ") +
          "FROM jobs WHERE " + where + " ORDER BY id LIMIT ?2",
      a, b);
  if (!query.ok()) return query.status();
  return dataset::ReadRows(*query, [this](const Statement& row) {
    rows_read.fetch_add(1, std::memory_order_relaxed);
    return JobRow{row.Int64(0), row.Text(1), row.Text(2), row.Text(3), row.Double(4), row.Int64(5), row.Int64(6)};
  });
}

absl::StatusOr<std::vector<JobRow>> JobStore::List() const {
  return List(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
}

absl::StatusOr<std::vector<JobRow>> JobStore::List(int64_t after_id, int64_t limit) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (limit <= 0) return std::vector<JobRow>();
  return impl_->Select("id > ?1", after_id, limit);
}

absl::StatusOr<std::optional<JobRow>> JobStore::Get(int64_t id) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  absl::StatusOr<std::vector<JobRow>> rows = impl_->Select("id = ?1", id, 1);
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return std::optional<JobRow>();
  return std::optional<JobRow>(std::move(rows->front()));
}

int64_t JobStore::RowsRead() const { return impl_->rows_read.load(std::memory_order_relaxed); }

}  // namespace tune::server
