// FileGuard: a shared flock(2) on a database file for as long as a connection uses it, so that
// a process that created the file and then failed removes it only when no other process has
// opened it meanwhile.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace tune::dataset {

/// Removes the database file `path` and the side files SQLite makes beside it ("-journal",
/// "-wal", "-shm"), ignoring those absent, whoever has them open (FileGuard::RemoveIfSoleHolder
/// is the careful form).
void RemoveDatabaseFiles(const std::string& path);

/// A shared lock on an open file. Every read-write opener of a record database file holds one
/// for the life of its connection; the creator of a file that fails to initialize it removes
/// the file only through RemoveIfSoleHolder, which takes the lock exclusively first, so a
/// file another process has opened (and may have written records to) is never unlinked under
/// it. An opener that locks a file just removed finds the path no longer names it (Acquire:
/// Aborted) and opens the path again. Move-only; locks of one process on separate Acquires
/// conflict like those of separate processes (flock locks belong to open file descriptions).
/// On NFS, Linux emulates flock with whole-file POSIX locks, which other processes' SQLite
/// byte-range locks would meet; SQLite's WAL mode does not work there either (a record
/// database belongs on a local file system).
class FileGuard {
 public:
  /// Opens `path` and takes a shared lock on it (waiting while a RemoveIfSoleHolder holds it
  /// exclusively). NotFound when the path does not exist; Aborted when, once locked, the path
  /// no longer names the file opened (it was removed or replaced meanwhile: open it again);
  /// Unavailable for other errors.
  static absl::StatusOr<FileGuard> Acquire(const std::string& path);

  FileGuard(FileGuard&& other) noexcept;
  FileGuard& operator=(FileGuard&& other) noexcept;
  FileGuard(const FileGuard&) = delete;
  FileGuard& operator=(const FileGuard&) = delete;
  ~FileGuard();

  /// Removes the file with its side files (RemoveDatabaseFiles) if no other guard holds it and
  /// the path still names it; returns whether it did. Either way the guard no longer holds the
  /// file afterwards.
  bool RemoveIfSoleHolder();

 private:
  FileGuard(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  void Release();

  std::string path_;
  int fd_ = -1;
};

}  // namespace tune::dataset
