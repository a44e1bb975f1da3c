// Tests of DeviceLock: the lock file's name, one holder at a time (across processes), the
// deadline, release on a holder's death, and a waiter's turn between another's builds.
#include "measure/device_lock.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tune::measure {
namespace {

using ::testing::HasSubstr;

std::string LockTestDir() {
  char pattern[] = "/tmp/tune-lock-test-XXXXXX";
  const char* dir = ::mkdtemp(pattern);
  EXPECT_NE(dir, nullptr);
  return dir == nullptr ? std::string("/tmp") : std::string(dir);
}

// Adds one to the number in `path` without any atomicity of its own: read, pause, write.
void LockTestIncrement(const std::string& path) {
  long value = 0;
  {
    std::ifstream in(path);
    in >> value;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(200));
  std::ofstream(path, std::ios::trunc) << value + 1;
}

TEST(DeviceLockTest, PathNamesTheDeviceInTheLockFolder) {
  ::unsetenv("TUNE_LOCK_DIR");
  EXPECT_EQ(DeviceLock::PathFor("0000:1B:00.0"), "/tmp/tune-gpu-0000-1B-00.0.lock");
  EXPECT_EQ(DeviceLock::PathFor(""), "/tmp/tune-gpu-unknown.lock");
  EXPECT_EQ(DeviceLock::PathFor("a/../b c"), "/tmp/tune-gpu-a-..-b-c.lock");  // no folder escapes
  ::setenv("TUNE_LOCK_DIR", "/var/lock/tune", 1);
  EXPECT_EQ(DeviceLock::PathFor("0000:41:00.0"), "/var/lock/tune/tune-gpu-0000-41-00.0.lock");
  ::unsetenv("TUNE_LOCK_DIR");
}

TEST(DeviceLockTest, OneHolderAtATimeAndTheWaitEndsAtItsDeadline) {
  const std::string path = LockTestDir() + "/gpu.lock";
  auto first = DeviceLock::Open(path);
  auto second = DeviceLock::Open(path);
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_TRUE(first->Acquire(1).ok());
  EXPECT_TRUE(first->held());
  EXPECT_TRUE(first->Acquire(0).ok());  // held already: no-op
  absl::Status busy = second->Acquire(0.05);
  EXPECT_EQ(busy.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(busy.message(), HasSubstr(path));
  EXPECT_FALSE(second->held());
  first->Release();
  EXPECT_TRUE(second->Acquire(0.05).ok());
  {
    DeviceLockRelease release(*second);
  }
  EXPECT_FALSE(second->held());
  EXPECT_TRUE(first->Acquire(0.05).ok());
}

TEST(DeviceLockTest, AFolderThatCannotHoldTheFileIsAClearError) {
  auto lock = DeviceLock::Open("/nonexistent-tune-folder/gpu.lock");
  ASSERT_FALSE(lock.ok());
  EXPECT_THAT(lock.status().message(), HasSubstr("TUNE_LOCK_DIR"));
}

// Two processes add 150 each to a counter file, each addition a read-pause-write under the
// lock: with mutual exclusion no addition is lost.
TEST(DeviceLockTest, ProcessesTakeTurns) {
  const std::string dir = LockTestDir();
  const std::string path = dir + "/gpu.lock", counter = dir + "/counter";
  std::ofstream(counter) << 0;
  constexpr int kEach = 150;
  auto add = [&]() {
    auto lock = DeviceLock::Open(path);
    if (!lock.ok()) return false;
    for (int i = 0; i < kEach; ++i) {
      if (!lock->Acquire(30).ok()) return false;
      LockTestIncrement(counter);
      lock->Release();
    }
    return true;
  };
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(add() ? 0 : 1);
  EXPECT_TRUE(add());
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  long total = 0;
  std::ifstream(counter) >> total;
  EXPECT_EQ(total, 2 * kEach);
}

// A holder that dies (SIGKILL, as a timed-out worker) leaves the lock free.
TEST(DeviceLockTest, AKilledHolderReleasesIt) {
  const std::string path = LockTestDir() + "/gpu.lock";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto lock = DeviceLock::Open(path);
    if (!lock.ok() || !lock->Acquire(5).ok()) ::_exit(1);
    char byte = 1;
    if (::write(ready[1], &byte, 1) != 1) ::_exit(1);
    ::pause();
    ::_exit(0);
  }
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  auto lock = DeviceLock::Open(path);
  ASSERT_TRUE(lock.ok());
  EXPECT_EQ(lock->Acquire(0.05).code(), absl::StatusCode::kDeadlineExceeded);
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(lock->Acquire(5).ok());
  ::close(ready[0]);
  ::close(ready[1]);
}

// A holder that takes the lock build after build, with the short gap of loading the next
// module between them, does not starve a waiter.
TEST(DeviceLockTest, AWaiterGetsATurnBetweenAnotherHoldersBuilds) {
  const std::string path = LockTestDir() + "/gpu.lock";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto lock = DeviceLock::Open(path);
    if (!lock.ok()) ::_exit(1);
    for (int i = 0; i < 4000; ++i) {  // ~20 s at most; killed once the parent had its turn
      if (!lock->Acquire(30).ok()) ::_exit(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      lock->Release();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ::_exit(0);
  }
  auto lock = DeviceLock::Open(path);
  ASSERT_TRUE(lock.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(lock->Acquire(15).ok());
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

}  // namespace
}  // namespace tune::measure
