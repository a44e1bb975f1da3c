// DeviceLock: flock on a file per GPU, polled with a deadline.
#include "measure/device_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tune::measure {

std::string DeviceLock::PathFor(const std::string& device_id) {
  const char* dir = std::getenv("TUNE_LOCK_DIR");
  std::string name = device_id.empty() ? std::string("unknown") : device_id;
  for (char& c : name) {
    const bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '_' || c == '-';
    if (!keep) c = '-';
  }
  return absl::StrCat(dir != nullptr && *dir != '\0' ? dir : "/tmp", "/tune-gpu-", name, ".lock");
}

absl::StatusOr<DeviceLock> DeviceLock::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot open the GPU lock file ", path, ": ",
                                                      std::strerror(errno),
                                                      " (TUNE_LOCK_DIR names another folder for it)"));
  }
  return DeviceLock(fd, path);
}

DeviceLock::DeviceLock(DeviceLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)), held_(std::exchange(other.held_, false)) {}

DeviceLock& DeviceLock::operator=(DeviceLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    held_ = std::exchange(other.held_, false);
  }
  return *this;
}

DeviceLock::~DeviceLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor of the description releases the lock
}

absl::Status DeviceLock::Acquire(double wait_s) {
  if (held_) return absl::OkStatus();
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::max(0.0, wait_s)));
  // Polled rather than blocking, so the wait has a deadline; a holder that measures builds one
  // after another lets go between them (loading the next module takes milliseconds), which is
  // when a poller 100-1000 us apart gets its turn.
  auto pause = std::chrono::microseconds(100);
  while (true) {
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
      held_ = true;
      return absl::OkStatus();
    }
    if (errno != EWOULDBLOCK && errno != EINTR) {
      return absl::InternalError(absl::StrCat("locking ", path_, ": ", std::strerror(errno)));
    }
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("another process kept the GPU lock ", path_, " for more than ", wait_s, " s"));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

void DeviceLock::Release() {
  if (!held_) return;
  ::flock(fd_, LOCK_UN);
  held_ = false;
}

}  // namespace tune::measure
