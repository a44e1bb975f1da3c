// RecordDatabase: the queries (tasks, targets, runs, records, best records) on an open file.
#include "dataset/record_database.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dataset/schema.h"
#include "dataset/sqlite.h"
#include "nlohmann/json.hpp"

namespace tune::dataset {
namespace {

constexpr const char* kRecordColumns =
    "id, task_id, target_id, run_id, config_json, config_index, strategy, protocol_json, "
    "status, message, costs_json, number, build_s, wall_s, timestamp";
constexpr const char* kTaskColumns = "id, workload_key, op, shape_json, flops, template_version";
constexpr const char* kTargetColumns = "id, key, json";

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

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

// Read one row selected with kRecordColumns, kTaskColumns, kTargetColumns.
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

TaskInfo ReadTask(const Statement& stmt) {
  return TaskInfo{stmt.Int64(0), stmt.Text(1), stmt.Text(2), stmt.Text(3), stmt.Double(4),
                  static_cast<int>(stmt.Int64(5))};
}

TargetInfo ReadTarget(const Statement& stmt) { return TargetInfo{stmt.Int64(0), stmt.Text(1), stmt.Text(2)}; }

}  // namespace

struct RecordDatabase::Impl {
  SqliteConnection connection;
  sqlite3* db;

  explicit Impl(SqliteConnection c) : connection(std::move(c)), db(connection.get()) {}
};

RecordDatabase::RecordDatabase(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RecordDatabase::~RecordDatabase() = default;

absl::StatusOr<std::unique_ptr<RecordDatabase>> RecordDatabase::Open(const std::string& path, bool create) {
  absl::StatusOr<SqliteConnection> connection = OpenWithSchema(path, create);
  if (!connection.ok()) return connection.status();
  return std::unique_ptr<RecordDatabase>(new RecordDatabase(std::make_unique<Impl>(*std::move(connection))));
}

absl::StatusOr<int64_t> RecordDatabase::UpsertTask(const TaskInfo& task) {
  absl::StatusOr<Statement> insert = PrepareBound(
      impl_->db,
      "INSERT INTO tasks(workload_key, op, shape_json, flops, template_version, created) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(workload_key, template_version) DO NOTHING",
      task.workload_key, task.op, task.shape_json, task.flops, task.template_version, NowSeconds());
  if (!insert.ok()) return insert.status();
  if (absl::Status s = insert->Run(); !s.ok()) return s;
  absl::StatusOr<std::optional<TaskInfo>> found = FindTask(task.workload_key, task.template_version);
  if (!found.ok()) return found.status();
  if (!found->has_value()) {
    return absl::InternalError(absl::StrCat("task '", task.workload_key, "' vanished after insert"));
  }
  return (*found)->id;
}

absl::StatusOr<int64_t> RecordDatabase::UpsertTarget(const TargetInfo& target) {
  absl::StatusOr<Statement> insert = PrepareBound(
      impl_->db, "INSERT INTO targets(key, json, created) VALUES (?1, ?2, ?3) ON CONFLICT(key) DO NOTHING",
      target.key, target.json, NowSeconds());
  if (!insert.ok()) return insert.status();
  if (absl::Status s = insert->Run(); !s.ok()) return s;
  absl::StatusOr<std::optional<TargetInfo>> found = FindTarget(target.key);
  if (!found.ok()) return found.status();
  if (!found->has_value()) {
    return absl::InternalError(absl::StrCat("target '", target.key, "' vanished after insert"));
  }
  return (*found)->id;
}

absl::StatusOr<int64_t> RecordDatabase::StartRun(const std::string& command, const std::string& target_key) {
  absl::StatusOr<Statement> insert = PrepareBound(
      impl_->db,
      "INSERT INTO runs(command, target_key, started, finished, status) VALUES (?1, ?2, ?3, 0, 'running')",
      command, target_key, NowSeconds());
  if (!insert.ok()) return insert.status();
  if (absl::Status s = insert->Run(); !s.ok()) return s;
  return impl_->connection.LastInsertId();
}

absl::Status RecordDatabase::FinishRun(int64_t run_id, const std::string& status) {
  if (status != "finished" && status != "interrupted") {
    return absl::InvalidArgumentError("a run ends 'finished' or 'interrupted', not '" + status + "'");
  }
  absl::StatusOr<Statement> update = PrepareBound(
      impl_->db, "UPDATE runs SET finished = ?1, status = ?3 WHERE id = ?2", NowSeconds(), run_id, status);
  if (!update.ok()) return update.status();
  if (absl::Status s = update->Run(); !s.ok()) return s;
  if (impl_->connection.Changes() == 0) {
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
  auto finite = [](double v) { return std::isfinite(v) ? std::optional<double>(v) : std::nullopt; };
  for (const Record& record : records) {
    const measure::MeasureResult& result = record.result;
    const double timestamp = record.timestamp != 0 ? record.timestamp : now;
    insert->Reset();
    absl::Status s = insert->Bind(
        record.task_id, record.target_id,
        record.run_id != 0 ? std::optional<int64_t>(record.run_id) : std::nullopt, record.config_json,
        static_cast<int64_t>(record.config_index), record.strategy, record.protocol_json,
        measure::StatusName(result.status), result.message, CostsToJson(result.costs_s), result.number,
        finite(result.Median()), finite(result.Mean()), result.build_s, result.wall_s, timestamp);
    if (s.ok()) s = insert->Run();
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("adding record ", ids.size() + 1, " of ", records.size(),
                                                 " (task ", record.task_id, ", target ", record.target_id,
                                                 "): ", s.message()));
    }
    ids.push_back(impl_->connection.LastInsertId());
    timestamps.push_back(timestamp);
  }
  if (absl::Status s = txn->Commit(); !s.ok()) return s;
  for (size_t i = 0; i < records.size(); ++i) {
    records[i].id = ids[i];
    records[i].timestamp = timestamps[i];
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Record>> RecordDatabase::Records(int64_t task_id, int64_t target_id) const {
  absl::StatusOr<Statement> query = PrepareBound(
      impl_->db,
      absl::StrCat("SELECT ", kRecordColumns,
                   " FROM records WHERE task_id = ?1 AND target_id = ?2 ORDER BY timestamp, id"),
      task_id, target_id);
  if (!query.ok()) return query.status();
  return ReadRows(*query, ReadRecord);
}

absl::StatusOr<std::vector<Record>> RecordDatabase::Best(int64_t task_id, int64_t target_id, int k) const {
  if (k <= 0) return std::vector<Record>{};
  absl::StatusOr<Statement> query = PrepareBound(
      impl_->db,
      absl::StrCat("SELECT ", kRecordColumns,
                   " FROM records WHERE task_id = ?1 AND target_id = ?2 AND status = 'ok' "
                   "AND median_s IS NOT NULL ORDER BY median_s, id LIMIT ?3"),
      task_id, target_id, k);
  if (!query.ok()) return query.status();
  return ReadRows(*query, ReadRecord);
}

absl::StatusOr<std::vector<TaskInfo>> RecordDatabase::Tasks() const {
  absl::StatusOr<Statement> query = Statement::Prepare(
      impl_->db, absl::StrCat("SELECT ", kTaskColumns, " FROM tasks ORDER BY id"));
  if (!query.ok()) return query.status();
  return ReadRows(*query, ReadTask);
}

absl::StatusOr<std::vector<RunInfo>> RecordDatabase::Runs() const {
  absl::StatusOr<Statement> query = Statement::Prepare(
      impl_->db, "SELECT id, command, target_key, started, finished, status FROM runs ORDER BY id");
  if (!query.ok()) return query.status();
  return ReadRows(*query, [](const Statement& row) {
    return RunInfo{row.Int64(0), row.Text(1), row.Text(2), row.Double(3), row.Double(4), row.Text(5)};
  });
}

absl::StatusOr<std::vector<TargetInfo>> RecordDatabase::Targets() const {
  absl::StatusOr<Statement> query =
      Statement::Prepare(impl_->db, absl::StrCat("SELECT ", kTargetColumns, " FROM targets ORDER BY id"));
  if (!query.ok()) return query.status();
  return ReadRows(*query, ReadTarget);
}

absl::StatusOr<std::optional<TaskInfo>> RecordDatabase::FindTask(const std::string& workload_key,
                                                                 int template_version) const {
  absl::StatusOr<Statement> query = PrepareBound(
      impl_->db,
      absl::StrCat("SELECT ", kTaskColumns, " FROM tasks WHERE workload_key = ?1 AND template_version = ?2"),
      workload_key, template_version);
  if (!query.ok()) return query.status();
  return ReadFirstRow(*query, ReadTask);
}

absl::StatusOr<std::optional<TargetInfo>> RecordDatabase::FindTarget(const std::string& key) const {
  absl::StatusOr<Statement> query =
      PrepareBound(impl_->db, absl::StrCat("SELECT ", kTargetColumns, " FROM targets WHERE key = ?1"), key);
  if (!query.ok()) return query.status();
  return ReadFirstRow(*query, ReadTarget);
}

absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> RecordDatabase::StatusCounts(
    int64_t task_id, int64_t target_id) const {
  // Sorted by status name so the output is stable.
  absl::StatusOr<Statement> query = PrepareBound(
      impl_->db,
      "SELECT status, count(*) FROM records WHERE (?1 = 0 OR task_id = ?1) "
      "AND (?2 = 0 OR target_id = ?2) GROUP BY status ORDER BY status",
      task_id, target_id);
  if (!query.ok()) return query.status();
  return ReadRows(*query, [](const Statement& row) { return std::make_pair(row.Text(0), row.Int64(1)); });
}

}  // namespace tune::dataset
