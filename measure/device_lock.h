// DeviceLock: an exclusive lock file per GPU, so that processes sharing one GPU take turns
// running kernels while one of them times its own.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tune::measure {

/// An advisory lock (flock) on a file that names one physical device. Every CudaRunner worker
/// holds its GPU's lock while it runs kernels (the reference, each build's check and timing),
/// so several tune processes (collectors, tuners, workers) can share one GPU without any of
/// them timing a kernel while another's runs. The kernel releases the lock of a process that
/// dies, so a killed worker never leaves its GPU locked.
///
/// Thread-compatible; one object per holder. Two objects of one process on one file are two
/// holders (each has its own open file description).
class DeviceLock {
 public:
  /// The lock file of the device `device_id` (a PCI bus id such as "0000:1B:00.0"; characters
  /// other than [A-Za-z0-9._-] become '-') in $TUNE_LOCK_DIR, or /tmp when that is unset.
  static std::string PathFor(const std::string& device_id);

  /// Opens (creating it, mode 0666 less the umask) the lock file at `path`; takes no lock.
  static absl::StatusOr<DeviceLock> Open(const std::string& path);

  DeviceLock(DeviceLock&& other) noexcept;
  DeviceLock& operator=(DeviceLock&& other) noexcept;
  DeviceLock(const DeviceLock&) = delete;
  DeviceLock& operator=(const DeviceLock&) = delete;
  ~DeviceLock();  // releases and closes

  /// Takes the lock, trying every 100-1000 us for up to `wait_s` seconds. DeadlineExceeded
  /// when another holder kept it that long; the error names the file. No-op when held.
  absl::Status Acquire(double wait_s);
  /// Gives the lock up (no-op when not held).
  void Release();
  bool held() const { return held_; }
  const std::string& path() const { return path_; }

 private:
  DeviceLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
  bool held_ = false;
};

/// Releases a DeviceLock when it goes out of scope.
class DeviceLockRelease {
 public:
  explicit DeviceLockRelease(DeviceLock& lock) : lock_(lock) {}
  ~DeviceLockRelease() { lock_.Release(); }
  DeviceLockRelease(const DeviceLockRelease&) = delete;
  DeviceLockRelease& operator=(const DeviceLockRelease&) = delete;

 private:
  DeviceLock& lock_;
};

}  // namespace tune::measure
