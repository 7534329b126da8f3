// One suite, run against every ObjectStore backend (mem://, file://).
#include "store/object_store.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/fs.h"

namespace burst {
namespace {

namespace fs = std::filesystem;

class ObjectStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("burst-store-test");
    store_ = Open();
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }
  std::unique_ptr<ObjectStore> Open() {
    std::string url = GetParam() == "file" ? "file://" + (dir_ / "store").string() : "mem://";
    auto r = OpenObjectStore(url);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return std::move(r).value();
  }
  std::string MustGet(const std::string& key) {
    auto r = store_->Get(key);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r.value() : "";
  }
  std::vector<std::string> Keys(const std::string& prefix) {
    auto r = store_->List(prefix);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<std::string> keys;
    if (r.ok())
      for (const auto& o : r.value()) keys.push_back(o.key);
    return keys;
  }

  fs::path dir_;
  std::unique_ptr<ObjectStore> store_;
};

TEST_P(ObjectStoreTest, PutGetOverwriteStat) {
  std::string binary("a\0b\xff\n", 5);
  ASSERT_TRUE(store_->Put("orgs/o1/files/f1", binary).ok());
  EXPECT_EQ(MustGet("orgs/o1/files/f1"), binary);
  ASSERT_TRUE(store_->Put("orgs/o1/files/f1", "second").ok());
  EXPECT_EQ(MustGet("orgs/o1/files/f1"), "second");
  auto st = store_->Stat("orgs/o1/files/f1");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st.value().size, 6);
  EXPECT_TRUE(store_->Put("empty", "").ok());
  EXPECT_EQ(MustGet("empty"), "");
}

TEST_P(ObjectStoreTest, MissingKeyIsNotFound) {
  EXPECT_EQ(store_->Get("orgs/o1/files/nope").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->Stat("orgs/o1/files/nope").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->GetToFile("nope", dir_ / "out").code(), Code::kNotFound);
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_P(ObjectStoreTest, BadKeysAreRejectedBeforeAnyWrite) {
  for (const std::string& key : std::vector<std::string>{"", "/abs", "a//b", "a/../b", "..", "a/./b", "a/b/", "sp ace",
                                "semi;colon", "back\\slash", std::string(1025, 'a')}) {
    Status s = store_->Put(key, "x");
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << "key \"" << key << "\"";
    EXPECT_EQ(s.param(), "key");
    EXPECT_EQ(store_->Get(key).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(store_->Delete(key).code(), Code::kInvalidArgument);
  }
  EXPECT_TRUE(Keys("").empty());
  // Nothing escaped the store's folder either.
  EXPECT_FALSE(fs::exists(dir_ / "b"));
  EXPECT_TRUE(ValidateKey("orgs/org_1/jobs/ftjob-a.b=c/step-00000100/x.safetensors").ok());
}

TEST_P(ObjectStoreTest, ListIsSortedAndByStringPrefix) {
  for (const char* k : {"orgs/b/files/2", "orgs/a/files/1", "orgs/a/files2/x", "orgs/a/jobs/j/c/m",
                        "other"})
    ASSERT_TRUE(store_->Put(k, k).ok());
  EXPECT_EQ(Keys("orgs/a/"), (std::vector<std::string>{"orgs/a/files/1", "orgs/a/files2/x",
                                                        "orgs/a/jobs/j/c/m"}));
  EXPECT_EQ(Keys("orgs/a/files/"), (std::vector<std::string>{"orgs/a/files/1"}));
  EXPECT_EQ(Keys("orgs/a/files"), (std::vector<std::string>{"orgs/a/files/1", "orgs/a/files2/x"}));
  EXPECT_EQ(Keys("").size(), 5u);
  EXPECT_TRUE(Keys("nothing/here/").empty());
  auto listed = store_->List("orgs/b/");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed.value().size(), 1u);
  EXPECT_EQ(listed.value()[0].size, static_cast<int64_t>(std::string("orgs/b/files/2").size()));
}

TEST_P(ObjectStoreTest, DeleteIsIdempotentAndPrefixDeleteIsScoped) {
  for (const char* k : {"orgs/a/jobs/j1/x", "orgs/a/jobs/j1/y/z", "orgs/a/jobs/j10/x", "orgs/a/f"})
    ASSERT_TRUE(store_->Put(k, "v").ok());
  EXPECT_TRUE(store_->Delete("orgs/a/f").ok());
  EXPECT_TRUE(store_->Delete("orgs/a/f").ok());
  EXPECT_EQ(store_->DeletePrefix("orgs/a/jobs/j1").code(), Code::kInvalidArgument);
  EXPECT_TRUE(store_->DeletePrefix("orgs/a/jobs/j1/").ok());
  EXPECT_EQ(Keys(""), (std::vector<std::string>{"orgs/a/jobs/j10/x"}));
  EXPECT_TRUE(store_->DeletePrefix("orgs/none/").ok());
}

TEST_P(ObjectStoreTest, FilesInAndOut) {
  fs::path src = dir_ / "src.bin";
  std::string data(300000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  WriteFileAtomic(src, data);
  ASSERT_TRUE(store_->PutFile("orgs/a/files/big", src).ok());
  ASSERT_TRUE(store_->GetToFile("orgs/a/files/big", dir_ / "copy.bin").ok());
  EXPECT_EQ(ReadFile(dir_ / "copy.bin"), data);
  Status missing = store_->PutFile("orgs/a/files/x", dir_ / "no-such-file");
  EXPECT_EQ(missing.code(), Code::kNotFound);
  EXPECT_EQ(store_->Stat("orgs/a/files/x").status().code(), Code::kNotFound);
}

TEST_P(ObjectStoreTest, ConcurrentWritersNeverLeaveAMix) {
  std::vector<std::string> values;
  for (int i = 0; i < 4; ++i) values.push_back(std::string(100000 + i, static_cast<char>('a' + i)));
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int n = 0; n < 10; ++n) EXPECT_TRUE(store_->Put("shared/key", values[i]).ok());
    });
  }
  for (int n = 0; n < 50; ++n) {
    auto r = store_->Get("shared/key");
    if (!r.ok()) continue;  // not written yet
    EXPECT_NE(std::find(values.begin(), values.end(), r.value()), values.end()) << "a torn read";
  }
  for (auto& t : threads) t.join();
  std::string last = MustGet("shared/key");
  EXPECT_NE(std::find(values.begin(), values.end(), last), values.end());
}

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
  for (const fs::path& d : {root, root / "objects", root / "tmp", root / "objects" / "orgs", root / "objects" / "orgs" / "a",
                            root / "objects" / "orgs" / "a" / "files", root / "objects" / "orgs" / "a" / "jobs" / "j" / "checkpoints" / "x"}) {
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
