// Fuzz target: a record database file as found on disk, opened and read by every query.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "dataset/record_database.h"
#include "server/job_store.h"
#include "tests/fuzz/fuzz_targets.h"

namespace tune::fuzz {
namespace {

// A private folder of this process, in memory where the machine has /dev/shm.
const std::string& Folder() {
  static const std::string folder = ScratchFolder("db");
  return folder;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void RemoveFiles(const std::string& path) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path + suffix, ec);
}

// Every read query over what the file holds (bounded: at most 8 tasks x 8 targets).
void ReadEverything(dataset::RecordDatabase& db) {
  auto tasks = db.Tasks();
  auto targets = db.Targets();
  (void)db.Runs();
  (void)db.StatusCounts();
  if (!tasks.ok() || !targets.ok()) return;
  for (size_t i = 0; i < std::min<size_t>(tasks->size(), 8); ++i) {
    const auto& task = (*tasks)[i];
    (void)db.FindTask(task.workload_key, task.template_version);
    for (size_t j = 0; j < std::min<size_t>(targets->size(), 8); ++j) {
      const auto& target = (*targets)[j];
      if (i == 0) (void)db.FindTarget(target.key);
      (void)db.Records(task.id, target.id);
      (void)db.Best(task.id, target.id, 3);
      (void)db.StatusCounts(task.id, target.id);
    }
  }
}

}  // namespace

int FuzzRecordDatabase(const uint8_t* data, size_t size) {
  const std::string path = Folder() + "/records.db";
  RemoveFiles(path);
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  {
    auto db = dataset::RecordDatabase::Open(path, /*create=*/false);
    if (!db.ok()) {
      // Refused: the file is left exactly as it was.
      if (ReadAll(path) != bytes) {
        std::fprintf(stderr, "record_database: a refused file was modified (%s)\n",
                     std::string(db.status().message()).c_str());
        std::abort();
      }
      RemoveFiles(path);
      return 0;
    }
    ReadEverything(**db);
  }
  // The daemon's jobs table in the same file, as a restarted daemon reads it.
  if (auto store = server::JobStore::Open(path); store.ok()) (void)(*store)->List();
  RemoveFiles(path);
  return 0;
}

}  // namespace tune::fuzz
