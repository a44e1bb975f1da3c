// JobManager: jobs in memory and in the jobs table, each tuned by tuner::Tuner on its own thread.
#include "server/job_manager.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "codegen/ir/workload.h"
#include "dataset/record_database.h"
#include "google/protobuf/util/json_util.h"
#include "measure/target.h"
#include "server/monotonic_clock.h"
#include "server/proto_convert.h"
#include "server/remote_measurer.h"
#include "server/wire_names.h"
#include "spdlog/spdlog.h"
#include "tuner/model_file.h"
#include "tuner/retrainer.h"
#include "tuner/tuning_flags.h"

namespace tune::server {
namespace {

// Page cache of a job's database connection, KiB: a quarter of its trials, within these
// bounds (SQLite's default is 2000).
constexpr int64_t kJobCacheKiB = 256;
constexpr int64_t kJobCacheKiBMax = 2000;

// Rows of the jobs table read at once by List.
constexpr int64_t kListPage = 256;

// Tasks a job keeps in flight per live worker of its target (see parallel_tasks below).
constexpr int kTasksPerWorker = 2;

std::vector<codegen::Workload> Workloads(const tuner::ZooModel& model) {
  std::vector<codegen::Workload> out;
  for (const tuner::TuneTask& t : tuner::ExtractTasks(model)) out.push_back(t.workload);
  return out;
}

}  // namespace

/// A tuning job run by the daemon: its request, and the progress the tuner reports.
struct JobManager::Job {
  uint64_t id = 0;
  v1::SubmitJobRequest request;
  std::string model_name;
  std::vector<tuner::TuneTask> tasks;
  double submitted_at = 0;  // Unix time
  double started = 0;       // monotonic
  std::atomic<bool> cancel{false};
  std::string target_key;   // of the worker that gave the job its target (set when it runs)
  bool resumed = false;     // restarted from the database after a daemon restart
  std::thread thread;
  std::atomic<bool> thread_ended{false};  // Run has returned: the thread can be joined at once

  mutable std::mutex mu;    // guards what follows
  v1::JobState state = v1::JOB_QUEUED;
  std::string message;
  std::map<int, v1::TaskProgress> tasks_progress;  // by task index
  uint32_t trials_total = 0;
  uint32_t stored_trials_done = 0;  // a job that ended under an earlier daemon: its trials then
  double eta_s = 0;
  uint64_t version = 0;     // bumped on every change, for watchers

  v1::JobEvent Event() const {
    std::lock_guard<std::mutex> lock(mu);
    v1::JobEvent e;
    e.set_job_id(id);
    e.set_state(state);
    uint32_t done = tasks_progress.empty() ? stored_trials_done : 0;
    for (const auto& [i, t] : tasks_progress) {
      *e.add_tasks() = t;
      done += t.trials();
    }
    e.set_trials_done(done);
    e.set_trials_total(trials_total);
    e.set_elapsed_s(started > 0 ? MonotonicSeconds() - started : 0);
    e.set_eta_s(eta_s);
    e.set_message(message);
    return e;
  }

  v1::JobState State() const {
    std::lock_guard<std::mutex> lock(mu);
    return state;
  }

  uint64_t Version() const {
    std::lock_guard<std::mutex> lock(mu);
    return version;
  }

  /// An ended job keeps its state (a cancelled job never turns done or failed); setting it to
  /// the same state again updates the message. False when the state was kept.
  bool SetState(v1::JobState s, const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    if (IsFinished(state) && s != state) return false;
    state = s;
    message = why;
    ++version;
    return true;
  }
};

JobManager::JobManager(std::string db_path, JobStore* store, WorkerRegistry* registry, LeaseQueue* queue,
                       std::function<bool()> stopping, const tuner::Retrainer* retrainer, size_t ended_kept)
    : db_path_(std::move(db_path)),
      store_(store),
      registry_(registry),
      queue_(queue),
      stopping_(std::move(stopping)),
      retrainer_(retrainer),
      ended_kept_(ended_kept) {}

JobManager::~JobManager() { JoinAll(); }

void JobManager::JoinAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& job : jobs_)
    if (job->thread.joinable()) job->thread.join();
}

absl::Status JobManager::Restore() {
  absl::StatusOr<std::vector<JobRow>> stored = store_->List();
  if (!stored.ok()) return stored.status();
  // Ended jobs stay in the store, where List and Find read them (EndedFromRow).
  for (const JobRow& row : *stored) {
    const v1::JobState state = JobStateFromName(row.state);
    if (state != v1::JOB_QUEUED && state != v1::JOB_RUNNING) continue;
    v1::SubmitJobRequest req;
    if (!google::protobuf::util::JsonStringToMessage(row.request_json, &req).ok()) {
      (void)store_->SetState(row.id, "failed", "stored request cannot be read");
      continue;
    }
    if (auto job = Launch(static_cast<uint64_t>(row.id), req, /*resumed=*/true); !job.ok())
      (void)store_->SetState(row.id, "failed", std::string(job.status().message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> JobManager::Submit(const v1::SubmitJobRequest& req) {
  const std::string& target = req.target();
  if (target != "llvm" && target != "cuda" && target.rfind("cuda:", 0) != 0)
    return absl::InvalidArgumentError("target must be llvm or cuda[:N], got '" + target + "'");
  if (req.trials() < 1 || req.trials() > static_cast<uint32_t>(tuner::TuningFlags::kMaxTrials))
    return absl::InvalidArgumentError(absl::StrCat("trials must be in 1..", tuner::TuningFlags::kMaxTrials));
  if (uint32_t active = ActiveCount(); active >= kMaxActiveJobs) {
    return absl::ResourceExhaustedError(absl::StrCat(active, " jobs are queued or running, the most this daemon runs at once (",
                                                     kMaxActiveJobs, "); submit again once some have ended"));
  }
  absl::StatusOr<tuner::ZooModel> model = ModelOf(req);
  if (!model.ok()) return absl::InvalidArgumentError(model.status().message());
  // What can never run is refused before anything is stored: buffers beyond the memory of a
  // live worker's device of the job's kind (or, without one, of this machine).
  const std::string kind = target.substr(0, target.find(':'));
  measure::Target probe;
  probe.kind = kind;
  if (std::optional<WorkerDesc> worker = registry_->AnyLive(kind)) {
    if (absl::StatusOr<measure::Target> t = measure::Target::FromJson(worker->target_json); t.ok()) probe = *t;
  }
  if (absl::Status fits = measure::CheckBuffersFit(Workloads(*model), probe); !fits.ok())
    return absl::InvalidArgumentError(fits.message());
  absl::StatusOr<tuner::TuneOptions> options = TuneOptionsOf(req);
  if (!options.ok()) return absl::InvalidArgumentError(options.status().message());
  if (absl::Status budget = tuner::CheckTrialBudget(*options, model->layers.size()); !budget.ok())
    return absl::InvalidArgumentError(budget.message());
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(req, &json).ok())
    return absl::InternalError("cannot serialise the request");
  absl::StatusOr<int64_t> id = store_->Add(json, "queued");
  if (!id.ok()) return id.status();
  absl::StatusOr<Job*> job = Launch(static_cast<uint64_t>(*id), req, /*resumed=*/false);
  if (!job.ok()) return job.status();
  return (*job)->id;
}

absl::StatusOr<v1::JobState> JobManager::Cancel(uint64_t id) {
  std::shared_ptr<Job> job = Find(id);
  if (!job) return absl::NotFoundError(absl::StrCat("no job ", id));
  job->cancel = true;
  queue_->Cancel(id);
  if (!SetState(job.get(), v1::JOB_CANCELLED, "cancelled")) return job->State();
  return v1::JOB_CANCELLED;
}

absl::Status JobManager::Watch(uint64_t id, const std::function<bool(const v1::JobEvent&)>& write,
                               const std::function<bool()>& cancelled) {
  std::shared_ptr<Job> job = Find(id);
  if (!job) return absl::NotFoundError(absl::StrCat("no job ", id));
  uint64_t seen = ~0ull;
  while (!cancelled()) {
    if (const uint64_t version = job->Version(); version != seen) {
      seen = version;
      const v1::JobEvent e = job->Event();
      if (!write(e) || IsFinished(e.state())) break;
    }
    if (stopping_()) return absl::UnavailableError("the daemon is shutting down");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::OkStatus();
}

std::vector<v1::JobInfo> JobManager::List() const {
  std::map<uint64_t, std::shared_ptr<Job>> known;  // by id: oldest first
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& job : jobs_) known[job->id] = job;
  }
  // The ended jobs let go of, as the store has them, a page of rows at a time.
  for (int64_t after = std::numeric_limits<int64_t>::min();;) {
    absl::StatusOr<std::vector<JobRow>> rows = store_->List(after, kListPage);
    if (!rows.ok() || rows->empty()) break;
    after = rows->back().id;
    for (const JobRow& row : *rows) {
      if (known.count(static_cast<uint64_t>(row.id)) > 0) continue;
      if (std::shared_ptr<Job> ended = EndedFromRow(row)) known[ended->id] = std::move(ended);
    }
  }
  std::vector<v1::JobInfo> out;
  for (const auto& [id, job] : known) {
    const v1::JobEvent e = job->Event();
    v1::JobInfo& j = out.emplace_back();
    j.set_job_id(job->id);
    j.set_name(job->request.name());
    j.set_model(job->model_name);
    j.set_target(job->request.target());
    j.set_state(e.state());
    j.set_trials_done(e.trials_done());
    j.set_trials_total(e.trials_total());
    j.set_submitted_at(job->submitted_at);
    j.set_note(Note(*job, e));
  }
  return out;
}

uint32_t JobManager::ActiveCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint32_t active = 0;
  for (const auto& job : jobs_) active += !IsFinished(job->State());
  return active;
}

size_t JobManager::InMemoryCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.size();
}

std::shared_ptr<JobManager::Job> JobManager::Find(uint64_t id) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& j : jobs_)
      if (j->id == id) return j;
  }
  // One row by its key: a lookup of an old job costs the same however many jobs there are.
  absl::StatusOr<std::optional<JobRow>> row = store_->Get(static_cast<int64_t>(id));
  if (!row.ok() || !row->has_value()) return nullptr;
  return EndedFromRow(**row);
}

/// Why job `job` (whose progress is `e`) ended as it did, or why it cannot progress now.
std::string JobManager::Note(const Job& job, const v1::JobEvent& e) const {
  if (IsFinished(e.state())) return e.message();
  const std::string kind = job.request.target().substr(0, job.request.target().find(':'));
  if (e.state() == v1::JOB_QUEUED) {
    if (!registry_->AnyLive(kind)) return absl::StrCat("waiting for a live ", kind, " worker");
    return "";
  }
  std::string key;
  {
    std::lock_guard<std::mutex> lock(job.mu);
    key = job.target_key;
  }
  if (!key.empty() && registry_->LiveCount(key) == 0) return "stalled: no live worker measures its target";
  return "";
}

/// Sets a job's state and stores it (with its trial counts once it has ended), unless the
/// daemon is stopping: then the stored state stays "running" (or "queued") and a restarted
/// daemon resumes the job. False (nothing stored) when the job had already ended otherwise.
bool JobManager::SetState(Job* job, v1::JobState state, const std::string& why) {
  if (!job->SetState(state, why)) return false;
  if (stopping_()) return true;
  int64_t done = -1, total = -1;
  if (IsFinished(state)) {
    const v1::JobEvent e = job->Event();
    done = e.trials_done();
    total = e.trials_total();
  }
  if (auto st = store_->SetState(static_cast<int64_t>(job->id), JobStateName(state), why, done, total); !st.ok())
    spdlog::warn("job {}: cannot store its state: {}", job->id, std::string(st.message()));
  return true;
}

/// A job that ended (under this daemon or an earlier one), as the database has it: listed and
/// watchable (its final state), never run.
std::shared_ptr<JobManager::Job> JobManager::EndedFromRow(const JobRow& row) const {
  const v1::JobState state = JobStateFromName(row.state);
  if (!IsFinished(state)) return nullptr;
  v1::SubmitJobRequest req;
  if (!google::protobuf::util::JsonStringToMessage(row.request_json, &req).ok()) return nullptr;
  auto job = std::make_shared<Job>();
  job->id = static_cast<uint64_t>(row.id);
  job->request = req;
  absl::StatusOr<tuner::ZooModel> model = ModelOf(req);
  job->model_name = model.ok() ? model->name : "?";
  job->submitted_at = row.submitted;
  job->state = state;
  job->message = row.message;
  job->trials_total = static_cast<uint32_t>(row.trials_total);
  job->stored_trials_done = static_cast<uint32_t>(row.trials_done);
  return job;
}

void JobManager::ForgetOldEndedLocked() {
  size_t ended = 0;
  for (auto& job : jobs_) {
    if (job->thread_ended && job->thread.joinable()) job->thread.join();
    ended += !job->thread.joinable() && IsFinished(job->State()) ? 1 : 0;
  }
  // Oldest first: jobs_ is in the order jobs were added.
  for (auto it = jobs_.begin(); it != jobs_.end() && ended > ended_kept_;) {
    if (!(*it)->thread.joinable() && IsFinished((*it)->State())) {
      it = jobs_.erase(it);
      --ended;
    } else {
      ++it;
    }
  }
}

/// Creates the job's in-memory entry and starts its thread. Caller validated the request.
absl::StatusOr<JobManager::Job*> JobManager::Launch(uint64_t id, const v1::SubmitJobRequest& req, bool resumed) {
  absl::StatusOr<tuner::ZooModel> model = ModelOf(req);
  if (!model.ok()) return model.status();
  auto job = std::make_shared<Job>();
  job->id = id;
  job->request = req;
  job->resumed = resumed;
  job->model_name = model->name;
  job->tasks = tuner::ExtractTasks(*model);
  job->submitted_at = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  Job* raw = job.get();
  std::string thread_error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Threads of jobs that ended are joined here, so a daemon that runs job after job does not
    // keep every ended thread's stack until it stops, and the oldest ended jobs beyond
    // ended_kept_ are let go of (the store keeps them). The new thread starts under the same
    // lock, so no reaper reads its std::thread while it is being assigned.
    ForgetOldEndedLocked();
    jobs_.push_back(std::move(job));
    try {
      raw->thread = std::thread([this, raw] {
        Run(raw);
        raw->thread_ended = true;
      });
    } catch (const std::system_error& e) {  // out of threads: the job fails, the daemon goes on
      thread_error = absl::StrCat("cannot start the job's thread: ", e.what());
    }
  }
  if (!thread_error.empty()) {
    SetState(raw, v1::JOB_FAILED, thread_error);
    return absl::ResourceExhaustedError(thread_error);
  }
  return raw;
}

/// The job's thread: waits for a worker of its target kind, then runs the tuner with a
/// RemoteMeasurer on its own connection to the database.
void JobManager::Run(Job* job) {
  const std::string kind = job->request.target().substr(0, job->request.target().find(':'));
  std::optional<WorkerDesc> worker;
  while (!job->cancel && !stopping_()) {
    if ((worker = registry_->AnyLive(kind))) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!worker) {
    if (job->cancel) SetState(job, v1::JOB_CANCELLED, "cancelled before it started");
    return;  // the daemon is stopping: the job stays queued in the database
  }
  auto target = measure::Target::FromJson(worker->target_json);
  if (!target.ok()) return (void)SetState(job, v1::JOB_FAILED, std::string(target.status().message()));
  // Against the device that measures it (a job resumed after a restart was never checked).
  {
    std::vector<codegen::Workload> workloads;
    for (const tuner::TuneTask& t : job->tasks) workloads.push_back(t.workload);
    if (absl::Status fits = measure::CheckBuffersFit(workloads, *target); !fits.ok())
      return (void)SetState(job, v1::JOB_FAILED, std::string(fits.message()));
  }
  auto db = dataset::RecordDatabase::Open(db_path_);
  if (!db.ok()) return (void)SetState(job, v1::JOB_FAILED, std::string(db.status().message()));
  absl::StatusOr<tuner::TuneOptions> options = TuneOptionsOf(job->request);
  if (!options.ok()) return (void)SetState(job, v1::JOB_FAILED, std::string(options.status().message()));
  // A job resumed from the database was never checked by Submit (the file may be foreign).
  if (absl::Status budget = tuner::CheckTrialBudget(*options, job->tasks.size()); !budget.ok())
    return (void)SetState(job, v1::JOB_FAILED, std::string(budget.message()));

  tuner::TuneOptions& o = *options;
  o.command = absl::StrCat("submit ", job->model_name, " --target ", job->request.target(), " (job ", job->id, ")");
  o.should_stop = [job, this] { return job->cancel.load() || stopping_(); };
  o.resume = job->resumed;
  // A job without its own artifact starts from the daemon's latest model of its target (a copy
  // of its own, taken now: a retraining meanwhile does not change it).
  tuner::UseLatestModel(retrainer_, target->Key(), &o);
  if (!SetState(job, v1::JOB_RUNNING)) return;  // cancelled meanwhile
  {
    std::lock_guard<std::mutex> lock(job->mu);
    job->target_key = target->Key();
    job->trials_total = o.total_trials > 0 ? o.total_trials
                                           : o.trials_per_task * static_cast<uint32_t>(job->tasks.size());
    ++job->version;
  }
  // The job's connection lives as long as the job. With SQLite's default cache (2000 KiB),
  // every short job churned a full cache through the allocator's arenas, which kept it: the
  // daemon's RSS grew by KiBs per job. A long job keeps the default (its commits use it).
  const int64_t cache_kib =
      std::clamp<int64_t>(static_cast<int64_t>(job->trials_total) / 4, kJobCacheKiB, kJobCacheKiBMax);
  if (absl::Status s = (*db)->SetCacheKiB(cache_kib); !s.ok())
    spdlog::warn("job {}: cannot bound its page cache: {}", job->id, std::string(s.message()));
  job->started = MonotonicSeconds();
  const std::string key = target->Key();
  // Twice as many tasks in flight as live workers measure the target (asked before each batch,
  // so workers that join later are used too): while a task's search runs here (a model fit and
  // a proposal take seconds), its worker takes another task's queued batch rather than wait.
  // With that many rounds in flight each goes whole to one worker (RemoteMeasurer::SplitParts);
  // the last tasks' rounds are split among the workers again.
  o.parallel_tasks = [this, key] { return kTasksPerWorker * static_cast<int>(registry_->LiveCount(key)); };
  auto measurer = std::make_unique<RemoteMeasurer>(
      queue_, job->id, key, tuner::TaskDataSeed(o.seed),
      [this, key] { return static_cast<int>(registry_->LiveCount(key)); },
      [this, job] { return job->cancel.load() || stopping_(); });
  tuner::Tuner tuner(db->get(), *target, std::move(measurer), o, [job](const tuner::ProgressEvent& e) {
    std::lock_guard<std::mutex> lock(job->mu);
    v1::TaskProgress& t = job->tasks_progress[e.task_index];
    if (e.task) {
      t.set_workload_key(e.task->workload.Key());
      t.set_count(e.task->count);
    }
    t.set_trials(e.trials);
    t.set_best_s(std::isfinite(e.best_s) ? e.best_s : 0);
    job->eta_s = e.eta_s;
    ++job->version;
  });
  auto outcomes = tuner.Run(job->tasks);
  if (!outcomes.ok()) {
    if (job->cancel) SetState(job, v1::JOB_CANCELLED, "cancelled");
    else SetState(job, v1::JOB_FAILED, std::string(outcomes.status().message()));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(job->mu);
    for (size_t i = 0; i < outcomes->size(); ++i) {
      const tuner::TaskOutcome& out = (*outcomes)[i];
      v1::TaskProgress& t = job->tasks_progress[static_cast<int>(i)];
      t.set_task_id(out.task_id);
      t.set_workload_key(out.task.workload.Key());
      t.set_count(out.task.count);
      t.set_trials(out.trials);
      t.set_ok(out.trials - out.failed);
      t.set_best_s(std::isfinite(out.best_s) ? out.best_s : 0);
      t.set_default_s(std::isfinite(out.default_s) ? out.default_s : 0);
    }
  }
  if (job->cancel) SetState(job, v1::JOB_CANCELLED, "cancelled");
  else if (stopping_()) job->SetState(v1::JOB_FAILED, "the daemon stopped; it resumes when the daemon restarts");
  else SetState(job, v1::JOB_DONE);
}

}  // namespace tune::server
