// FileGuard implementation: open, flock and an inode check against the path.
#include "dataset/file_guard.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tune::dataset {
namespace {

// Whether `path` names the file open as `fd` (same device and inode).
bool PathNamesFile(const std::string& path, int fd) {
  struct stat by_path {}, by_fd {};
  if (::stat(path.c_str(), &by_path) != 0 || ::fstat(fd, &by_fd) != 0) return false;
  return by_path.st_dev == by_fd.st_dev && by_path.st_ino == by_fd.st_ino;
}

int FlockRetrying(int fd, int operation) {
  int rc;
  do {
    rc = ::flock(fd, operation);
  } while (rc != 0 && errno == EINTR);
  return rc;
}

}  // namespace

void RemoveDatabaseFiles(const std::string& path) {
  for (const char* suffix : {"", "-journal", "-wal", "-shm"}) {
    std::error_code ignored;
    std::filesystem::remove(path + suffix, ignored);
  }
}

absl::StatusOr<FileGuard> FileGuard::Acquire(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT) return absl::NotFoundError(absl::StrCat("'", path, "' does not exist"));
    return absl::UnavailableError(absl::StrCat("cannot open '", path, "': ", std::strerror(error)));
  }
  FileGuard guard(path, fd);
  if (FlockRetrying(fd, LOCK_SH) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot lock '", path, "': ", std::strerror(errno)));
  }
  if (!PathNamesFile(path, fd)) {
    return absl::AbortedError(absl::StrCat("'", path, "' was removed or replaced while being opened"));
  }
  return guard;
}

FileGuard::FileGuard(FileGuard&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

FileGuard& FileGuard::operator=(FileGuard&& other) noexcept {
  if (this != &other) {
    Release();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

FileGuard::~FileGuard() { Release(); }

void FileGuard::Release() {
  if (fd_ >= 0) ::close(fd_);  // drops the lock
  fd_ = -1;
}

bool FileGuard::RemoveIfSoleHolder() {
  if (fd_ < 0) return false;
  bool removed = false;
  // Converting the shared lock to an exclusive one fails at once while another guard holds it.
  if (FlockRetrying(fd_, LOCK_EX | LOCK_NB) == 0 && PathNamesFile(path_, fd_)) {
    RemoveDatabaseFiles(path_);
    removed = true;
  }
  Release();
  return removed;
}

}  // namespace tune::dataset
