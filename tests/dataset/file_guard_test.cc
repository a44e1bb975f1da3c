// Tests of FileGuard: a creator that failed removes a database file only when no other opener
// holds it, never a file that replaced the one it locked; every open connection holds a guard.
#include "dataset/file_guard.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "dataset/record_database.h"
#include "gtest/gtest.h"
#include "tests/common/temp_dir.h"

namespace tune::dataset {
namespace {

namespace fs = std::filesystem;

void Touch(const std::string& path, const std::string& text = "") { std::ofstream(path) << text; }

std::string Read(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class FileGuardTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return (fs::path(dir_.path()) / name).string(); }
  test::TempDir dir_;
};

TEST_F(FileGuardTest, TheSoleHolderRemovesTheFileAndItsSideFiles) {
  const std::string path = Path("a.db");
  Touch(path);
  Touch(path + "-wal");
  Touch(path + "-shm");
  absl::StatusOr<FileGuard> guard = FileGuard::Acquire(path);
  ASSERT_TRUE(guard.ok()) << guard.status();
  EXPECT_TRUE(guard->RemoveIfSoleHolder());
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + "-wal"));
  EXPECT_FALSE(fs::exists(path + "-shm"));
  EXPECT_FALSE(guard->RemoveIfSoleHolder()) << "a released guard holds nothing";
}

// Another opener's guard (another open file description, as in another process) keeps the
// file; once it is gone the file can go.
TEST_F(FileGuardTest, AFileAnotherOpenerHoldsIsLeftInPlace) {
  const std::string path = Path("b.db");
  Touch(path, "records");
  absl::StatusOr<FileGuard> creator = FileGuard::Acquire(path);
  ASSERT_TRUE(creator.ok()) << creator.status();
  {
    absl::StatusOr<FileGuard> other = FileGuard::Acquire(path);
    ASSERT_TRUE(other.ok()) << other.status();
    EXPECT_FALSE(creator->RemoveIfSoleHolder());
    EXPECT_EQ(Read(path), "records");
  }
  absl::StatusOr<FileGuard> again = FileGuard::Acquire(path);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->RemoveIfSoleHolder());
  EXPECT_FALSE(fs::exists(path));
}

// The path now names another file (the locked one was removed and a new one made): that file
// is not the guard's to remove, and a guard acquired on a path that vanishes is refused.
TEST_F(FileGuardTest, AReplacedFileIsNotRemoved) {
  const std::string path = Path("c.db");
  Touch(path, "old");
  absl::StatusOr<FileGuard> guard = FileGuard::Acquire(path);
  ASSERT_TRUE(guard.ok()) << guard.status();
  fs::remove(path);
  Touch(path, "new");
  EXPECT_FALSE(guard->RemoveIfSoleHolder());
  EXPECT_EQ(Read(path), "new");
  EXPECT_TRUE(absl::IsNotFound(FileGuard::Acquire(Path("missing.db")).status()));
}

// A record database holds its file's guard while open: a failed creator could not remove it.
TEST_F(FileGuardTest, AnOpenRecordDatabaseHoldsItsFile) {
  const std::string path = Path("records.db");
  {
    absl::StatusOr<std::unique_ptr<RecordDatabase>> db = RecordDatabase::Open(path, /*create=*/true);
    ASSERT_TRUE(db.ok()) << db.status();
    absl::StatusOr<FileGuard> creator = FileGuard::Acquire(path);
    ASSERT_TRUE(creator.ok()) << creator.status();
    EXPECT_FALSE(creator->RemoveIfSoleHolder());
    EXPECT_TRUE(fs::exists(path));
    EXPECT_TRUE((*db)->Tasks().ok()) << "the database still works";
  }
  absl::StatusOr<FileGuard> after = FileGuard::Acquire(path);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(after->RemoveIfSoleHolder()) << "closed, the database holds nothing";
}

}  // namespace
}  // namespace tune::dataset
