// RecordDatabase: the queries (tasks, targets, runs, records, best records) on an open file.
#include "dataset/record_database.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <map>
#include <tuple>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dataset/schema.h"
#include "dataset/sqlite.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

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

constexpr const char* kLeaseColumns = "run_id, host, pid, expires";

LeaseHolder ReadLease(const Statement& stmt) {
  return LeaseHolder{stmt.Int64(0), stmt.Text(1), stmt.Int64(2), stmt.Double(3)};
}

// Whether the owner of a run or lease is alive as far as this process can tell, `now` being
// the time its heartbeat or expiry is compared with.
bool Live(const std::string& host, int64_t pid, double deadline, double now) {
  return deadline > now && OwnerMayBeAlive(host, pid);
}

// Adds one record through a statement prepared from kInsertRecordSql, stamped `timestamp`.
constexpr const char* kInsertRecordSql =
    "INSERT INTO records(task_id, target_id, run_id, config_json, config_index, strategy, "
    "protocol_json, status, message, costs_json, number, median_s, mean_s, build_s, wall_s, "
    "timestamp) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)";

absl::Status InsertRecord(Statement& insert, const Record& record, double timestamp) {
  const measure::MeasureResult& result = record.result;
  auto finite = [](double v) { return std::isfinite(v) ? std::optional<double>(v) : std::nullopt; };
  insert.Reset();
  absl::Status s = insert.Bind(
      record.task_id, record.target_id, record.run_id != 0 ? std::optional<int64_t>(record.run_id) : std::nullopt,
      record.config_json, static_cast<int64_t>(record.config_index), record.strategy, record.protocol_json,
      measure::StatusName(result.status), result.message, CostsToJson(result.costs_s), result.number,
      finite(result.Median()), finite(result.Mean()), result.build_s, result.wall_s, timestamp);
  if (!s.ok()) return s;
  return insert.Run();
}

// `columns` ("a, b, c") with each name prefixed by `table` and a dot.
std::string Qualified(const std::string& table, const std::string& columns) {
  std::string out;
  size_t start = 0;
  while (start <= columns.size()) {
    size_t comma = columns.find(", ", start);
    if (comma == std::string::npos) comma = columns.size();
    absl::StrAppend(&out, out.empty() ? "" : ", ", table, ".", columns.substr(start, comma - start));
    start = comma + 2;
  }
  return out;
}

// The canonical text of a JSON object (keys sorted, compact); nullopt when `text` is not one.
std::optional<std::string> CanonicalObject(const std::string& text) {
  nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object()) return std::nullopt;
  return value.dump();
}

// What makes two records the same measurement: canonical config and protocol, the timestamp's bits.
std::string MeasurementKey(const std::string& canonical_config, const std::string& canonical_protocol,
                           double timestamp) {
  uint64_t bits = 0;
  static_assert(sizeof(bits) == sizeof(timestamp));
  std::memcpy(&bits, &timestamp, sizeof(bits));
  return absl::StrCat(canonical_config, "\n", canonical_protocol, "\n", bits);
}

constexpr const char* kRunColumns =
    "id, command, target_key, started, finished, status, host, pid, heartbeat, message";

}  // namespace

std::string LocalHostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

bool OwnerMayBeAlive(const std::string& host, int64_t pid) {
  if (pid <= 0 || host.empty()) return false;
  if (host != LocalHostName()) return true;
  if (pid == ::getpid()) return true;
  if (pid > std::numeric_limits<pid_t>::max()) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  // A zombie (ended, not yet reaped by its parent) is gone too: state 'Z' after the name.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'Z') return false;
  return true;
}

struct RecordDatabase::Impl {
  SqliteConnection connection;
  sqlite3* db;
  std::string path;

  Impl(SqliteConnection c, std::string p) : connection(std::move(c)), db(connection.get()), path(std::move(p)) {}
};

RecordDatabase::RecordDatabase(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RecordDatabase::~RecordDatabase() = default;

absl::StatusOr<std::unique_ptr<RecordDatabase>> RecordDatabase::Open(const std::string& path, bool create) {
  absl::StatusOr<SqliteConnection> connection = OpenWithSchema(path, create);
  if (!connection.ok()) return connection.status();
  return std::unique_ptr<RecordDatabase>(new RecordDatabase(std::make_unique<Impl>(*std::move(connection), path)));
}

absl::StatusOr<std::unique_ptr<RecordDatabase>> RecordDatabase::OpenReadOnly(const std::string& path) {
  absl::StatusOr<SqliteConnection> connection = OpenReadOnlyWithSchema(path);
  if (!connection.ok()) return connection.status();
  return std::unique_ptr<RecordDatabase>(new RecordDatabase(std::make_unique<Impl>(*std::move(connection), path)));
}

const std::string& RecordDatabase::path() const { return impl_->path; }

absl::Status RecordDatabase::SetCacheKiB(int64_t kib) {
  // A negative cache_size is in KiB, a positive one in pages.
  return Exec(impl_->db, absl::StrCat("PRAGMA cache_size = ", -std::max<int64_t>(kib, 1)));
}

absl::StatusOr<int64_t> RecordDatabase::CacheKiB() const {
  absl::StatusOr<int64_t> size = QueryInt(impl_->db, "PRAGMA cache_size");
  if (!size.ok()) return size.status();
  if (*size < 0) return -*size;
  absl::StatusOr<int64_t> page = QueryInt(impl_->db, "PRAGMA page_size");
  if (!page.ok()) return page.status();
  return *size * *page / 1024;
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
  const double now = NowSeconds();
  absl::StatusOr<Statement> insert = PrepareBound(
      impl_->db,
      "INSERT INTO runs(command, target_key, started, finished, status, host, pid, heartbeat) "
      "VALUES (?1, ?2, ?3, 0, 'running', ?4, ?5, ?3)",
      command, target_key, now, LocalHostName(), static_cast<int64_t>(::getpid()));
  if (!insert.ok()) return insert.status();
  if (absl::Status s = insert->Run(); !s.ok()) return s;
  return impl_->connection.LastInsertId();
}

absl::Status RecordDatabase::FinishRun(int64_t run_id, const std::string& status, const std::string& message) {
  if (status != "finished" && status != "interrupted" && status != "failed") {
    return absl::InvalidArgumentError("a run ends 'finished', 'interrupted' or 'failed', not '" + status + "'");
  }
  absl::StatusOr<Transaction> txn = Transaction::Begin(impl_->db);
  if (!txn.ok()) return txn.status();
  const double now = NowSeconds();
  absl::StatusOr<Statement> update =
      PrepareBound(impl_->db, "UPDATE runs SET finished = ?1, heartbeat = ?1, status = ?3, message = ?4 WHERE id = ?2",
                   now, run_id, status, message);
  if (!update.ok()) return update.status();
  if (absl::Status s = update->Run(); !s.ok()) return s;
  if (impl_->connection.Changes() == 0) {
    return absl::NotFoundError(absl::StrCat("no run with id ", run_id));
  }
  absl::StatusOr<Statement> release = PrepareBound(impl_->db, "DELETE FROM leases WHERE run_id = ?1", run_id);
  if (!release.ok()) return release.status();
  if (absl::Status s = release->Run(); !s.ok()) return s;
  return txn->Commit();
}

absl::Status RecordDatabase::Heartbeat(int64_t run_id) {
  absl::StatusOr<Transaction> txn = Transaction::Begin(impl_->db);
  if (!txn.ok()) return txn.status();
  const double now = NowSeconds();
  absl::StatusOr<Statement> beat = PrepareBound(
      impl_->db, "UPDATE runs SET heartbeat = ?1 WHERE id = ?2 AND status = 'running'", now, run_id);
  if (!beat.ok()) return beat.status();
  if (absl::Status s = beat->Run(); !s.ok()) return s;
  absl::StatusOr<Statement> renew =
      PrepareBound(impl_->db, "UPDATE leases SET expires = ?1 WHERE run_id = ?2", now + kStaleAfterS, run_id);
  if (!renew.ok()) return renew.status();
  if (absl::Status s = renew->Run(); !s.ok()) return s;
  return txn->Commit();
}

absl::StatusOr<std::optional<LeaseHolder>> RecordDatabase::AcquireLease(int64_t task_id, int64_t target_id,
                                                                        int64_t run_id) {
  absl::StatusOr<Transaction> txn = Transaction::Begin(impl_->db);
  if (!txn.ok()) return txn.status();
  absl::StatusOr<std::optional<LeaseHolder>> holder = Lease(task_id, target_id);
  if (!holder.ok()) return holder.status();
  const double now = NowSeconds();
  if (holder->has_value() && (*holder)->run_id != run_id &&
      Live((*holder)->host, (*holder)->pid, (*holder)->expires, now)) {
    return holder;  // the transaction rolls back: nothing was written
  }
  absl::StatusOr<Statement> take = PrepareBound(
      impl_->db,
      "INSERT INTO leases(task_id, target_id, run_id, host, pid, expires) VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
      "ON CONFLICT(task_id, target_id) DO UPDATE SET run_id = ?3, host = ?4, pid = ?5, expires = ?6",
      task_id, target_id, run_id, LocalHostName(), static_cast<int64_t>(::getpid()), now + kStaleAfterS);
  if (!take.ok()) return take.status();
  if (absl::Status s = take->Run(); !s.ok()) return s;
  if (absl::Status s = txn->Commit(); !s.ok()) return s;
  return std::optional<LeaseHolder>();
}

absl::StatusOr<std::optional<LeaseHolder>> RecordDatabase::Lease(int64_t task_id, int64_t target_id) const {
  absl::StatusOr<Statement> query = PrepareBound(
      impl_->db, absl::StrCat("SELECT ", kLeaseColumns, " FROM leases WHERE task_id = ?1 AND target_id = ?2"),
      task_id, target_id);
  if (!query.ok()) return query.status();
  return ReadFirstRow(*query, ReadLease);
}

absl::Status RecordDatabase::AddRecords(std::vector<Record>& records) {
  if (records.empty()) return absl::OkStatus();
  sqlite3* db = impl_->db;
  absl::StatusOr<Transaction> txn = Transaction::Begin(db);
  if (!txn.ok()) return txn.status();
  absl::StatusOr<Statement> insert = Statement::Prepare(db, kInsertRecordSql);
  if (!insert.ok()) return insert.status();

  // Ids and timestamps reach the caller's records only once the batch has committed.
  std::vector<int64_t> ids;
  std::vector<double> timestamps;
  ids.reserve(records.size());
  timestamps.reserve(records.size());
  const double now = NowSeconds();
  for (const Record& record : records) {
    const double timestamp = record.timestamp != 0 ? record.timestamp : now;
    absl::Status s = InsertRecord(*insert, record, timestamp);
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

absl::StatusOr<std::vector<Record>> RecordDatabase::Records(int64_t task_id, int64_t target_id,
                                                            int64_t after_id) const {
  // Newer records than a recent id are few: a range of ids (the unary + keeps SQLite off the
  // task index, which would visit every record of the task).
  absl::StatusOr<Statement> query = PrepareBound(
      impl_->db,
      absl::StrCat("SELECT ", kRecordColumns, " FROM records WHERE ",
                   after_id > 0 ? "+task_id = ?1 AND +target_id = ?2 AND id > ?3" : "task_id = ?1 AND target_id = ?2 AND ?3 = 0",
                   " ORDER BY timestamp, id"),
      task_id, target_id, after_id);
  if (!query.ok()) return query.status();
  return ReadRows(*query, ReadRecord);
}

absl::StatusOr<std::vector<Record>> RecordDatabase::RecentRecords(int64_t task_id, int64_t target_id, int limit,
                                                                  const std::string& skip_strategy,
                                                                  int64_t offset) const {
  if (limit <= 0) return std::vector<Record>{};
  // SQLite keeps only limit + offset rows in its sorter while it walks the task's index entries.
  absl::StatusOr<Statement> query = PrepareBound(
      impl_->db,
      absl::StrCat("SELECT ", kRecordColumns,
                   " FROM records WHERE task_id = ?1 AND target_id = ?2 AND strategy != ?3 "
                   "ORDER BY timestamp DESC, id DESC LIMIT ?4 OFFSET ?5"),
      task_id, target_id, skip_strategy, limit, std::max<int64_t>(offset, 0));
  if (!query.ok()) return query.status();
  return ReadRows(*query, ReadRecord);
}

absl::StatusOr<int64_t> RecordDatabase::LastRecordId() const {
  return QueryInt(impl_->db, "SELECT coalesce(max(id), 0) FROM records");
}

absl::StatusOr<std::vector<Record>> RecordDatabase::Best(int64_t task_id, int64_t target_id, int k) const {
  if (k <= 0) return std::vector<Record>{};
  // The ok records of this task on this target, and among them the finalists timed side by side
  // (a CASE, so that a protocol that is not JSON is no error but no finalist).
  const std::string ok_records =
      "FROM records WHERE task_id = ?1 AND target_id = ?2 AND status = 'ok' AND median_s IS NOT NULL";
  const std::string side_by_side = absl::StrCat(
      " AND strategy = '", kFinalistStrategy, "' AND run_id != 0 AND CASE WHEN json_valid(protocol_json) THEN "
      "json_extract(protocol_json, '$.interleave') END IS 1");
  // Each config once, at its fastest record (a config measured again, as a finalist or in
  // another run, would otherwise fill several of the k places), fastest first; `where` narrows
  // the configs, `limit` < 0 takes them all.
  auto fastest_per_config = [&](const std::string& where, int64_t limit) {
    return PrepareBound(impl_->db,
                        absl::StrCat("SELECT ", kRecordColumns, " FROM (SELECT ", kRecordColumns,
                                     ", median_s, ROW_NUMBER() OVER (PARTITION BY config_json ORDER BY median_s, id) AS nth ",
                                     ok_records, where, ") WHERE nth = 1 ORDER BY median_s, id LIMIT ?3"),
                        task_id, target_id, limit);
  };

  struct Finalist {
    int64_t run_id;
    std::string config_json;
    double median_s;
    int64_t id;
  };
  absl::StatusOr<Statement> finalist_query =
      PrepareBound(impl_->db, absl::StrCat("SELECT run_id, config_json, median_s, id ", ok_records, side_by_side, " ORDER BY id"),
                   task_id, target_id);
  if (!finalist_query.ok()) return finalist_query.status();
  absl::StatusOr<std::vector<Finalist>> finalists = ReadRows(*finalist_query, [](const Statement& row) {
    return Finalist{row.Int64(0), row.Text(1), row.Double(2), row.Int64(3)};
  });
  if (!finalists.ok()) return finalists.status();
  if (finalists->empty()) {
    absl::StatusOr<Statement> query = fastest_per_config("", k);
    if (!query.ok()) return query.status();
    return ReadRows(*query, ReadRecord);
  }

  // Each run's finalists of the task are one group, timed at one moment of the host, ranked
  // by their medians (as the tuner picks its winner). A config's verdict is that of the last
  // group it was in: it ranks after every config that beat it there.
  std::map<int64_t, std::vector<const Finalist*>> groups;  // by run, best first
  std::map<int64_t, int64_t> group_end;                     // run -> its last record's id
  for (const Finalist& f : *finalists) {
    groups[f.run_id].push_back(&f);
    group_end[f.run_id] = std::max(group_end[f.run_id], f.id);
  }
  for (auto& [run, members] : groups) {
    std::stable_sort(members.begin(), members.end(),
                     [](const Finalist* a, const Finalist* b) { return a->median_s < b->median_s; });
  }
  std::map<std::string, int64_t> last_group;  // config -> run of the last group it was in
  for (const Finalist& f : *finalists) {
    auto [it, added] = last_group.emplace(f.config_json, f.run_id);
    if (!added && group_end[f.run_id] > group_end[it->second]) it->second = f.run_id;
  }
  std::map<std::string, std::vector<std::string>> beaten_by;  // config -> those above it in its last group
  for (const auto& [config, run] : last_group) {
    for (const Finalist* f : groups[run]) {
      if (f->config_json == config) break;
      if (std::find(beaten_by[config].begin(), beaten_by[config].end(), f->config_json) == beaten_by[config].end()) {
        beaten_by[config].push_back(f->config_json);
      }
    }
    if (beaten_by[config].empty()) beaten_by.erase(config);
  }

  // Only the configs that lost a verdict move (down), so the k best are among the k + (those)
  // fastest configs and the finalists themselves.
  std::map<std::string, Record> candidates;
  for (const auto& [where, limit] :
       {std::pair<std::string, int64_t>{"", static_cast<int64_t>(k) + static_cast<int64_t>(beaten_by.size())},
        {absl::StrCat(" AND config_json IN (SELECT config_json ", ok_records, side_by_side, ")"), -1}}) {
    absl::StatusOr<Statement> query = fastest_per_config(where, limit);
    if (!query.ok()) return query.status();
    absl::StatusOr<std::vector<Record>> rows = ReadRows(*query, ReadRecord);
    if (!rows.ok()) return rows.status();
    for (Record& r : *rows) candidates.emplace(r.config_json, std::move(r));
  }

  // A config's rank time: its fastest record, or the latest rank time of those that beat it
  // if later (and then it comes after them). The recursion ends: each step goes to a config
  // above it in the same group, or to a later group.
  struct Rank {
    double time_s;
    int depth;
  };
  std::map<std::string, Rank> ranks;
  std::function<Rank(const std::string&)> rank = [&](const std::string& config) -> Rank {
    if (auto it = ranks.find(config); it != ranks.end()) return it->second;
    Rank r{candidates.at(config).result.Median(), 0};
    if (auto it = beaten_by.find(config); it != beaten_by.end()) {
      for (const std::string& better : it->second) {
        const Rank b = rank(better);
        r = Rank{std::max(r.time_s, b.time_s), std::max(r.depth, b.depth + 1)};
      }
    }
    return ranks[config] = r;
  };
  std::vector<std::pair<Rank, Record*>> order;
  for (auto& [config, record] : candidates) order.emplace_back(rank(config), &record);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return std::tuple(a.first.time_s, a.first.depth, a.second->result.Median(), a.second->id) <
           std::tuple(b.first.time_s, b.first.depth, b.second->result.Median(), b.second->id);
  });
  std::vector<Record> best;
  for (size_t i = 0; i < order.size() && best.size() < static_cast<size_t>(k); ++i) best.push_back(std::move(*order[i].second));
  return best;
}

absl::StatusOr<std::vector<PortableRecord>> RecordDatabase::ExportRecords(int64_t task_id,
                                                                         int64_t target_id) const {
  absl::StatusOr<Statement> query = PrepareBound(
      impl_->db,
      absl::StrCat("SELECT ", Qualified("r", kRecordColumns), ", ", Qualified("t", kTaskColumns), ", ",
                   Qualified("g", kTargetColumns), ", ", Qualified("u", kRunColumns),
                   " FROM records r JOIN tasks t ON t.id = r.task_id JOIN targets g ON g.id = r.target_id "
                   "LEFT JOIN runs u ON u.id = r.run_id WHERE (?1 = 0 OR r.task_id = ?1) "
                   "AND (?2 = 0 OR r.target_id = ?2) ORDER BY r.id"),
      task_id, target_id);
  if (!query.ok()) return query.status();
  return ReadRows(*query, [](const Statement& row) -> absl::StatusOr<PortableRecord> {
    PortableRecord out;
    absl::StatusOr<Record> record = ReadRecord(row);
    if (!record.ok()) return record.status();
    out.record = *std::move(record);
    constexpr int kTask = 15, kTarget = 21, kRun = 24;
    out.task = TaskInfo{row.Int64(kTask), row.Text(kTask + 1), row.Text(kTask + 2), row.Text(kTask + 3),
                        row.Double(kTask + 4), static_cast<int>(row.Int64(kTask + 5))};
    out.target = TargetInfo{row.Int64(kTarget), row.Text(kTarget + 1), row.Text(kTarget + 2)};
    if (!row.IsNull(kRun)) {
      out.run = RunInfo{row.Int64(kRun),         row.Text(kRun + 1),  row.Text(kRun + 2),
                        row.Double(kRun + 3),    row.Double(kRun + 4), row.Text(kRun + 5),
                        row.Text(kRun + 6),      row.Int64(kRun + 7), row.Double(kRun + 8),
                        row.Text(kRun + 9)};
    }
    return out;
  });
}

absl::StatusOr<ImportCounts> RecordDatabase::ImportRecords(const std::vector<PortableRecord>& records) {
  sqlite3* db = impl_->db;
  absl::StatusOr<Transaction> txn = Transaction::Begin(db);
  if (!txn.ok()) return txn.status();
  absl::StatusOr<Statement> insert = Statement::Prepare(db, kInsertRecordSql);
  if (!insert.ok()) return insert.status();

  std::map<std::pair<std::string, int>, TaskInfo> tasks;        // by workload key, template version
  std::map<std::string, TargetInfo> targets;                     // by key
  std::map<std::tuple<std::string, double, std::string, int64_t>, int64_t> runs;  // command, started, host, pid
  std::map<std::pair<int64_t, int64_t>, std::set<std::string>> present;  // measurement keys per task, target
  std::set<int64_t> new_tasks, new_targets;
  ImportCounts counts;
  const double now = NowSeconds();

  for (const PortableRecord& in : records) {
    auto invalid = [&in](const std::string& why) {
      return absl::InvalidArgumentError(in.origin.empty() ? why : absl::StrCat(in.origin, ": ", why));
    };
    const std::optional<std::string> config = CanonicalObject(in.record.config_json);
    if (!config.has_value()) return invalid("the config is not a JSON object");
    const std::optional<std::string> protocol = CanonicalObject(in.record.protocol_json);
    if (!protocol.has_value()) return invalid("the protocol is not a JSON object");

    // The task: found (the same fields) or added.
    auto task_it = tasks.find({in.task.workload_key, in.task.template_version});
    if (task_it == tasks.end()) {
      const std::optional<std::string> shape = CanonicalObject(in.task.shape_json);
      if (!shape.has_value()) return invalid("the task's shape is not a JSON object");
      absl::StatusOr<std::optional<TaskInfo>> found = FindTask(in.task.workload_key, in.task.template_version);
      if (!found.ok()) return found.status();
      TaskInfo task = in.task;
      if (found->has_value()) {
        const TaskInfo& have = **found;
        if (have.op != in.task.op || have.flops != in.task.flops || CanonicalObject(have.shape_json) != shape) {
          return invalid(absl::StrCat("task '", in.task.workload_key, "' (template version ", in.task.template_version,
                                      ") is in ", impl_->path, " with another op, shape or flops"));
        }
        task = have;
      } else {
        absl::StatusOr<int64_t> id = UpsertTask(in.task);
        if (!id.ok()) return id.status();
        task.id = *id;
      }
      task_it = tasks.emplace(std::make_pair(in.task.workload_key, in.task.template_version), task).first;
    } else if (task_it->second.op != in.task.op || task_it->second.flops != in.task.flops ||
               CanonicalObject(task_it->second.shape_json) != CanonicalObject(in.task.shape_json)) {
      return invalid(absl::StrCat("task '", in.task.workload_key, "' (template version ", in.task.template_version,
                                  ") has another op, shape or flops than before"));
    }
    const int64_t task_id = task_it->second.id;

    // The target: found (the same description) or added.
    auto target_it = targets.find(in.target.key);
    const std::optional<std::string> description = CanonicalObject(in.target.json);
    if (!description.has_value()) return invalid("the target's description is not a JSON object");
    if (target_it == targets.end()) {
      absl::StatusOr<std::optional<TargetInfo>> found = FindTarget(in.target.key);
      if (!found.ok()) return found.status();
      TargetInfo target = in.target;
      if (found->has_value()) {
        if (CanonicalObject((*found)->json) != description) {
          return invalid(absl::StrCat("target '", in.target.key, "' is in ", impl_->path, " with another description"));
        }
        target = **found;
      } else {
        absl::StatusOr<int64_t> id = UpsertTarget(in.target);
        if (!id.ok()) return id.status();
        target.id = *id;
      }
      target_it = targets.emplace(in.target.key, target).first;
    } else if (CanonicalObject(target_it->second.json) != description) {
      return invalid(absl::StrCat("target '", in.target.key, "' has another description than before"));
    }
    const int64_t target_id = target_it->second.id;

    // Skip a measurement that is there already.
    auto present_it = present.find({task_id, target_id});
    if (present_it == present.end()) {
      absl::StatusOr<Statement> query = PrepareBound(
          db, "SELECT config_json, protocol_json, timestamp FROM records WHERE task_id = ?1 AND target_id = ?2",
          task_id, target_id);
      if (!query.ok()) return query.status();
      absl::StatusOr<std::vector<std::string>> keys = ReadRows(*query, [](const Statement& row) {
        return MeasurementKey(CanonicalObject(row.Text(0)).value_or(row.Text(0)),
                              CanonicalObject(row.Text(1)).value_or(row.Text(1)), row.Double(2));
      });
      if (!keys.ok()) return keys.status();
      present_it = present.emplace(std::make_pair(task_id, target_id),
                                   std::set<std::string>(keys->begin(), keys->end())).first;
    }
    const double timestamp = in.record.timestamp != 0 ? in.record.timestamp : now;
    if (!present_it->second.insert(MeasurementKey(*config, *protocol, timestamp)).second) {
      ++counts.already_present;
      continue;
    }

    // The run: found by its command, start, host and pid, or added.
    int64_t run_id = 0;
    if (in.run.has_value()) {
      const RunInfo& run = *in.run;
      auto key = std::make_tuple(run.command, run.started, run.host, run.pid);
      auto run_it = runs.find(key);
      if (run_it == runs.end()) {
        absl::StatusOr<Statement> find = PrepareBound(
            db, "SELECT id FROM runs WHERE command = ?1 AND started = ?2 AND host = ?3 AND pid = ?4 ORDER BY id",
            run.command, run.started, run.host, run.pid);
        if (!find.ok()) return find.status();
        absl::StatusOr<std::optional<int64_t>> found =
            ReadFirstRow(*find, [](const Statement& row) { return row.Int64(0); });
        if (!found.ok()) return found.status();
        if (found->has_value()) {
          run_id = **found;
        } else {
          absl::StatusOr<Statement> add = PrepareBound(
              db,
              "INSERT INTO runs(command, target_key, started, finished, status, host, pid, heartbeat, message) "
              "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
              run.command, run.target_key, run.started, run.finished, run.status == "stale" ? "running" : run.status,
              run.host, run.pid, run.heartbeat, run.message);
          if (!add.ok()) return add.status();
          if (absl::Status s = add->Run(); !s.ok()) return s;
          run_id = impl_->connection.LastInsertId();
        }
        run_it = runs.emplace(key, run_id).first;
      }
      run_id = run_it->second;
    }

    Record record = in.record;
    record.task_id = task_id;
    record.target_id = target_id;
    record.run_id = run_id;
    if (absl::Status s = InsertRecord(*insert, record, timestamp); !s.ok()) {
      return absl::Status(s.code(), in.origin.empty() ? s.message() : absl::StrCat(in.origin, ": ", s.message()));
    }
    ++counts.imported;
    new_tasks.insert(task_id);
    new_targets.insert(target_id);
  }
  if (absl::Status s = txn->Commit(); !s.ok()) return s;
  counts.tasks = static_cast<int64_t>(new_tasks.size());
  counts.targets = static_cast<int64_t>(new_targets.size());
  return counts;
}

absl::StatusOr<std::vector<TaskInfo>> RecordDatabase::Tasks() const {
  absl::StatusOr<Statement> query = Statement::Prepare(
      impl_->db, absl::StrCat("SELECT ", kTaskColumns, " FROM tasks ORDER BY id"));
  if (!query.ok()) return query.status();
  return ReadRows(*query, ReadTask);
}

absl::Status RecordDatabase::ForEachTaskMeasuredOn(int64_t target_id,
                                                   const std::function<void(const TaskInfo&)>& visit) const {
  // records_by_task_target_status_median answers the EXISTS from the index alone.
  absl::StatusOr<Statement> query = PrepareBound(
      impl_->db,
      absl::StrCat("SELECT ", kTaskColumns,
                   " FROM tasks WHERE EXISTS (SELECT 1 FROM records r WHERE r.task_id = tasks.id "
                   "AND r.target_id = ?1 AND r.status = 'ok') ORDER BY id"),
      target_id);
  if (!query.ok()) return query.status();
  while (true) {
    absl::StatusOr<bool> more = query->Step();
    if (!more.ok()) return more.status();
    if (!*more) return absl::OkStatus();
    visit(ReadTask(*query));
  }
}

absl::StatusOr<std::vector<RunInfo>> RecordDatabase::Runs() const {
  absl::StatusOr<Statement> query = Statement::Prepare(
      impl_->db,
      "SELECT id, command, target_key, started, finished, status, host, pid, heartbeat, message "
      "FROM runs ORDER BY id");
  if (!query.ok()) return query.status();
  const double now = NowSeconds();
  return ReadRows(*query, [now](const Statement& row) {
    RunInfo run{row.Int64(0), row.Text(1), row.Text(2), row.Double(3), row.Double(4), row.Text(5),
                row.Text(6),  row.Int64(7), row.Double(8), row.Text(9)};
    if (run.status == "running" && !Live(run.host, run.pid, run.heartbeat + kStaleAfterS, now)) {
      run.status = "stale";
    }
    return run;
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

struct RunHeartbeat::State {
  std::unique_ptr<RecordDatabase> db;  // null for an in-memory database
  int64_t run_id = 0;
  std::mutex mu;
  std::condition_variable wake;
  bool stop = false;
  std::thread thread;
};

RunHeartbeat::RunHeartbeat(std::unique_ptr<State> state) : state_(std::move(state)) {}

RunHeartbeat::~RunHeartbeat() {
  if (!state_->thread.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->wake.notify_all();
  state_->thread.join();
}

absl::StatusOr<std::unique_ptr<RunHeartbeat>> RunHeartbeat::Start(const std::string& path, int64_t run_id,
                                                                   double interval_s) {
  auto state = std::make_unique<State>();
  state->run_id = run_id;
  if (path == ":memory:") return std::unique_ptr<RunHeartbeat>(new RunHeartbeat(std::move(state)));
  absl::StatusOr<std::unique_ptr<RecordDatabase>> db = RecordDatabase::Open(path, /*create=*/false);
  if (!db.ok()) return db.status();
  state->db = *std::move(db);
  State* s = state.get();
  const auto interval = std::chrono::duration<double>(std::max(interval_s, 1e-3));
  state->thread = std::thread([s, interval, interval_s] {
    std::unique_lock<std::mutex> lock(s->mu);
    int failures = 0;
    while (!s->wake.wait_for(lock, interval, [s] { return s->stop; })) {
      lock.unlock();
      absl::Status beat = s->db->Heartbeat(s->run_id);
      if (!beat.ok() && failures++ == 0) {
        spdlog::warn("record database: run {} heartbeat failed (tried again every {} s): {}", s->run_id,
                     interval_s, std::string(beat.message()));
      }
      if (beat.ok()) failures = 0;
      lock.lock();
    }
  });
  return std::unique_ptr<RunHeartbeat>(new RunHeartbeat(std::move(state)));
}

}  // namespace tune::dataset
