// The shared suite (object_store_suite.cpp) on mem:// and file://, and what
// only the file store promises.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/fs.h"
#include "store/object_store_suite.h"

namespace burst {
namespace {

namespace fs = std::filesystem;

INSTANTIATE_TEST_SUITE_P(Backends, ObjectStoreTest, ::testing::Values("mem", "file"),
                         [](const auto& info) { return info.param; });

TEST(FileStore, ObjectsOutliveTheProcessHandle) {
  fs::path dir = MakeTempDir("burst-store-test");
  std::string url = "file://" + (dir / "s").string();
  {
    auto s = OpenObjectStore(url);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(s.value()->Put("orgs/a/files/f", "kept").ok());
  }
  auto s = OpenObjectStore(url);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s.value()->Get("orgs/a/files/f").value(), "kept");
  EXPECT_EQ(s.value()->Url(), url);
  // Only committed objects are visible: no temp files under objects/.
  EXPECT_TRUE(fs::is_empty(dir / "s" / "tmp"));
  fs::remove_all(dir);
}

unsigned Mode(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

// The umask of a test: the store's modes must not depend on the caller's.
class Umask {
 public:
  explicit Umask(mode_t m) : old_(::umask(m)) {}
  ~Umask() { ::umask(old_); }

 private:
  mode_t old_;
};

TEST(FileStore, EverythingItWritesIsPrivateToItsUser) {
  Umask open_umask(022);
  fs::path dir = MakeTempDir("burst-store-test");
  fs::path root = dir / "s";
  auto s = OpenObjectStore("file://" + root.string());
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s.value()->Put("orgs/a/files/f", "secret").ok());
  WriteFileAtomic(dir / "src", "also secret");
  ASSERT_TRUE(s.value()->PutFile("orgs/a/jobs/j/checkpoints/x/model.bin", dir / "src").ok());
  ASSERT_TRUE(s.value()->GetToFile("orgs/a/files/f", dir / "copy").ok());
  for (const fs::path& d : {root, root / "objects", root / "tmp", root / "objects" / "orgs",
                            root / "objects" / "orgs" / "a", root / "objects" / "orgs" / "a" / "files",
                            root / "objects" / "orgs" / "a" / "jobs" / "j" / "checkpoints" / "x"}) {
    EXPECT_EQ(Mode(d), 0700u) << d;
  }
  EXPECT_EQ(Mode(root / "objects" / "orgs" / "a" / "files" / "f"), 0600u);
  EXPECT_EQ(Mode(root / "objects" / "orgs" / "a" / "jobs" / "j" / "checkpoints" / "x" / "model.bin"), 0600u);
  EXPECT_EQ(Mode(dir / "copy"), 0600u) << "a copy out of the store is as private";
  fs::remove_all(dir);
}

TEST(FileStore, ALooserRootIsTightenedWhenOpened) {
  fs::path dir = MakeTempDir("burst-store-test");
  fs::path root = dir / "s";
  fs::create_directories(root / "objects");
  fs::permissions(root, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(root / "objects", fs::perms::owner_all | fs::perms::others_read | fs::perms::others_exec);
  testing::internal::CaptureStderr();
  auto s = OpenObjectStore("file://" + root.string());
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Mode(root), 0700u);
  EXPECT_EQ(Mode(root / "objects"), 0700u);
  EXPECT_NE(err.find(root.string() + " had mode 0755"), std::string::npos) << err;
  fs::remove_all(dir);
}

// A real full disk: a 64 KiB tmpfs (needs the right to mount; skipped
// without it).
TEST(FileStore, AFullDiskIsResourceExhaustedAndSaysSo) {
  fs::path dir = MakeTempDir("burst-store-test");
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=64k") != 0) {
    fs::remove_all(dir);
    GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  }
  auto s = OpenObjectStore("file://" + (dir / "s").string());
  ASSERT_TRUE(s.ok());
  Status full = s.value()->Put("orgs/a/files/big", std::string(256 << 10, 'x'));
  EXPECT_EQ(full.code(), Code::kResourceExhausted) << full.ToString();
  EXPECT_NE(full.message().find("disk full"), std::string::npos) << full.message();
  EXPECT_NE(full.message().find((dir / "s").string()), std::string::npos) << "it says where";
  EXPECT_FALSE(s.value()->Stat("orgs/a/files/big").ok()) << "nothing half-written is visible";
  EXPECT_TRUE(fs::is_empty(dir / "s" / "tmp")) << "the temp file is gone, the space freed";
  ::umount(dir.c_str());
  fs::remove_all(dir);
}

TEST(ObjectStoreUrl, UnknownOrRelativeUrlsAreErrors) {
  EXPECT_EQ(OpenObjectStore("s4://bucket").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(OpenObjectStore("file://relative/dir").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(OpenObjectStore("file://relative/dir").status().param(), "store");
  EXPECT_TRUE(OpenObjectStore("mem://").ok());
}

}  // namespace
}  // namespace burst
